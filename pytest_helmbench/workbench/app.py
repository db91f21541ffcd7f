"""The workbench's ASGI application (Starlette, Jinja2 templates, no JavaScript build step).

Pages by role (security.py says how a request is identified):
- owner: `/` runs side by side and the studies; `/browse` cases filtered, searched and paged; `/case/N`
  one case whole (transcript, every check's verdict and rationale, the composed prompt); `/study/N` a
  study's progress, raters, agreement figures, human-verified headline and exports; adjudication.
- rater: `/rate` the next item (after the content warning; a break suggested after the study's number
  of items or minutes), `/item/N` one assigned item (answerable, and editable after: a new revision),
  `/mine` the items rated. A rater is never shown the judge's verdict, the model's name, the case code
  or another rater's answer, and reaches only the items assigned to them.
- adjudicator: the study's disagreements, both answers side by side, the final verdict with a reason.

Database work runs in Starlette's thread pool; every write is one short transaction (store.py).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from sqlalchemy.engine import Engine
from sqlmodel import Session
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from ..reporting.figure_text import figures_line
from ..storage.queries import DatasetError, load_runs, resolve_run_ids
from ..storage.tables import Result, ReviewItem
from . import browse, store
from .replies import check_views, conversation, deciding_reply, judged_replies
from .security import COOKIE, Access, Gate, SecurityHeaders

TEMPLATES = Path(__file__).parent / "templates"
STATIC = {"workbench.css": "text/css", "workbench.js": "text/javascript"}
FORM_MAX = 64 * 1024
Handler = Callable[[Request, Access], Awaitable[Response]]


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES)),
        autoescape=select_autoescape(["html"], default_for_string=True, default=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["pct"] = lambda v: "n/a" if v is None else f"{100 * v:.1f}%"
    env.filters["num"] = lambda v: "n/a" if v is None else f"{v:.2f}"
    return env


class Workbench:
    """The application's state: the engine, the gate, the templates."""

    def __init__(self, engine: Engine, gate: Gate, source: str = "") -> None:
        self.engine = engine
        self.gate = gate
        self.source = source
        self.templates = _environment()

    def render(
        self, request: Request, access: Access, name: str, status: int = 200, **context: Any
    ) -> Response:
        page = self.templates.get_template(name).render(
            access=access, csrf=self.gate.csrf(access), source=self.source, path=request.url.path, **context
        )
        return HTMLResponse(page, status_code=status)

    def session(self) -> Session:
        return Session(self.engine)


def _token(request: Request) -> tuple[str | None, bool]:
    """The token and whether it came in the address (to move it into the cookie)."""
    given = request.query_params.get("token")
    if given:
        return given, True
    return request.cookies.get(COOKIE), False


def _without_token(request: Request) -> str:
    query = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
    return request.url.path + (f"?{urlencode(query)}" if query else "")


async def _form(request: Request) -> dict[str, str]:
    body = await request.body()
    if len(body) > FORM_MAX:
        return {}
    parsed = parse_qs(body.decode("utf-8", errors="replace"), keep_blank_values=True, max_num_fields=200)
    return {key: values[-1] for key, values in parsed.items()}


def guarded(
    bench: Workbench, roles: tuple[str, ...], handler: Handler
) -> Callable[[Request], Awaitable[Response]]:
    """The endpoint behind the token check (401 / 403), the token moved from the address to the cookie,
    and (for a POST) the CSRF check."""

    async def endpoint(request: Request) -> Response:
        token, in_address = _token(request)
        access = await run_in_threadpool(bench.gate.identify, token)
        if access is None:
            return PlainTextResponse("401: this page needs a valid link (token)", status_code=401)
        if in_address and request.method == "GET":
            response = RedirectResponse(_without_token(request), status_code=303)
            response.set_cookie(COOKIE, str(token), httponly=True, samesite="strict", path="/")
            return response
        if access.role not in roles:
            return PlainTextResponse("403: not for this link", status_code=403)
        if request.method == "POST":
            form = await _form(request)
            origin = request.headers.get("origin")
            if origin is not None and origin != f"{request.url.scheme}://{request.headers.get('host')}":
                return PlainTextResponse("403: cross-origin form", status_code=403)
            if not bench.gate.csrf_ok(access, form.get("csrf")):
                return PlainTextResponse("403: the form's CSRF token is missing or wrong", status_code=403)
            request.state.form = form
        return await handler(request, access)

    return endpoint


# ---------------------------------------------------------------------------------------------
# Owner pages


def _home(bench: Workbench) -> Handler:
    async def page(request: Request, access: Access) -> Response:
        if access.role == "rater":
            return RedirectResponse("/rate", status_code=303)
        if access.role == "adjudicator":
            return RedirectResponse(f"/study/{access.study_id}/adjudicate", status_code=303)

        def load() -> dict[str, Any]:
            with bench.session() as session:
                try:
                    ids = resolve_run_ids(session, all_runs=True)
                except DatasetError:  # no run yet
                    ids = []
                runs = load_runs(session, ids, unpriced_counts=False) if ids else []
                return {
                    "runs": [(run, figures_line(run.scores) if run.scores else "not scored") for run in runs],
                    "studies": store.studies(session),
                }

        return bench.render(request, access, "home.html", **await run_in_threadpool(load))

    return page


def _browse(bench: Workbench) -> Handler:
    async def page(request: Request, access: Access) -> Response:
        filters = browse.Filters.from_query(request.query_params)
        number = (
            int(request.query_params.get("page", "1"))
            if request.query_params.get("page", "1").isdigit()
            else 1
        )

        def load() -> dict[str, Any]:
            with bench.session() as session:
                rows, total = browse.case_page(session, filters, number)
                return {"rows": rows, "total": total, "choices": browse.choices(session)}

        found = await run_in_threadpool(load)
        pages = max(1, -(-found["total"] // browse.PAGE_SIZE))
        query = {k: v for k, v in filters.values.items()}
        links = {
            "prev": "?" + urlencode({**query, "page": number - 1}) if number > 1 else None,
            "next": "?" + urlencode({**query, "page": number + 1}) if number < pages else None,
        }
        return bench.render(
            request, access, "browse.html", filters=filters, page=number, pages=pages, links=links, **found
        )

    return page


def _case(bench: Workbench) -> Handler:
    async def page(request: Request, access: Access) -> Response:
        result_id = request.path_params["result_id"]

        def load() -> Any:
            with bench.session() as session:
                return browse.case_detail(session, result_id)

        row = await run_in_threadpool(load)
        if row is None:
            return PlainTextResponse("404: no such case", status_code=404)
        result: Result = row[0]
        replies = judged_replies(
            result.evaluation_details, result.parsed_answer, result.raw_response, result.status
        )
        shown = [
            (reply, conversation(result.prompt, result.messages, reply, result.layout), check_views(reply))
            for reply in replies
        ]
        return bench.render(request, access, "case.html", row=row, result=result, shown=shown)

    return page


def _study(bench: Workbench) -> Handler:
    async def page(request: Request, access: Access) -> Response:
        from . import figures  # the agreement figures load the calibration code: only when asked

        study_id = request.path_params["study_id"]

        def load() -> dict[str, Any]:
            with bench.session() as session:
                state = figures.study_state(session, study_id)
                progress = {r.id: sum(1 for s in state.items if r.id in s.ratings) for r in state.raters}
                assigned = {r.id: len(store.assigned_items(session, r.id or 0)) for r in state.raters}
                verified = figures.human_verified(session, study_id)
                return {
                    "state": state,
                    "figures": figures.study_figures(state),
                    "progress": progress,
                    "assigned": assigned,
                    "verified": verified,
                    "verified_line": figures_line(verified["verified"]),
                    "judge_line": figures_line(verified["judge"]),
                }

        try:
            found = await run_in_threadpool(load)
        except store.ReviewError as exc:
            return PlainTextResponse(f"404: {exc}", status_code=404)
        return bench.render(request, access, "study.html", **found, stored=request.query_params.get("stored"))

    return page


def _store_calibration(bench: Workbench) -> Handler:
    async def page(request: Request, access: Access) -> Response:
        from . import figures

        study_id = request.path_params["study_id"]
        try:
            calibration_id, _ = await run_in_threadpool(figures.store_calibration, bench.engine, study_id)
        except store.ReviewError as exc:
            return PlainTextResponse(f"409: {exc}", status_code=409)
        return RedirectResponse(f"/study/{study_id}?stored={calibration_id}", status_code=303)

    return page


def _export(bench: Workbench, kind: str) -> Handler:
    async def page(request: Request, access: Access) -> Response:
        import io

        from . import exports

        study_id = request.path_params["study_id"]

        def load() -> str:
            out = io.StringIO()
            with bench.session() as session:
                store.get_study(session, study_id)
                (exports.write_csv if kind == "csv" else exports.write_jsonl)(session, study_id, out)
            return out.getvalue()

        try:
            text = await run_in_threadpool(load)
        except store.ReviewError as exc:
            return PlainTextResponse(f"404: {exc}", status_code=404)
        media = "text/csv" if kind == "csv" else "application/x-ndjson"
        name = f"study-{study_id}-ratings.{kind}"
        return Response(
            text, media_type=media, headers={"content-disposition": f'attachment; filename="{name}"'}
        )

    return page


# ---------------------------------------------------------------------------------------------
# Adjudication (the owner, or the study's adjudicator)


def _may_adjudicate(access: Access, study_id: int) -> bool:
    return access.role == "owner" or (access.role == "adjudicator" and access.study_id == study_id)


def _queue(bench: Workbench) -> Handler:
    async def page(request: Request, access: Access) -> Response:
        from . import figures

        study_id = request.path_params["study_id"]
        if not _may_adjudicate(access, study_id):
            return PlainTextResponse("403: not for this link", status_code=403)

        def load() -> Any:
            with bench.session() as session:
                return figures.study_state(session, study_id)

        try:
            state = await run_in_threadpool(load)
        except store.ReviewError as exc:
            return PlainTextResponse(f"404: {exc}", status_code=404)
        done = [s for s in state.items if s.source == "adjudicated"]
        return bench.render(request, access, "queue.html", state=state, queue=state.queue, done=done)

    return page


def _item_context(session: Session, item: ReviewItem) -> dict[str, Any]:
    """What a rater or adjudicator is shown of an item: the conversation and the rubric (no verdict,
    no model, no case code)."""
    result = session.get(Result, item.result_id)
    assert result is not None
    replies = judged_replies(
        result.evaluation_details, result.parsed_answer, result.raw_response, result.status
    )
    reply = next((r for r in replies if r.turn == item.turn), None) or deciding_reply(replies, None)
    assert reply is not None
    study = store.get_study(session, item.study_id)
    return {
        "item": item,
        "study": study,
        "rubric": study.rubrics.get(item.rubric_hash, {"checks": []}),
        "conversation": conversation(result.prompt, result.messages, reply, result.layout),
    }


def _adjudicate(bench: Workbench) -> Handler:
    async def page(request: Request, access: Access) -> Response:
        from . import figures

        item_id = request.path_params["item_id"]

        def load() -> dict[str, Any] | None:
            with bench.session() as session:
                item = session.get(ReviewItem, item_id)
                if item is None or not _may_adjudicate(access, item.study_id):
                    return None
                state = figures.study_state(session, item.study_id)
                mine = next(s for s in state.items if s.item.id == item_id)
                names = {r.id: r.name for r in state.raters}
                labelled = [
                    (names.get(r) if access.role == "owner" else f"Rater {chr(65 + n)}", rating)
                    for n, (r, rating) in enumerate(sorted(mine.ratings.items()))
                ]
                return {**_item_context(session, item), "state": mine, "ratings": labelled}

        found = await run_in_threadpool(load)
        if found is None:
            return PlainTextResponse("403: not for this link", status_code=403)
        if request.method == "POST":
            form = request.state.form
            try:
                await run_in_threadpool(
                    store.save_adjudication,
                    bench.engine,
                    item_id,
                    form.get("verdict", ""),
                    form.get("reason", ""),
                    access.reviewer_id,
                )
            except store.ReviewError as exc:
                return bench.render(request, access, "adjudicate.html", status=400, error=str(exc), **found)
            return RedirectResponse(f"/study/{found['item'].study_id}/adjudicate", status_code=303)
        return bench.render(request, access, "adjudicate.html", error=None, **found)

    return page


# ---------------------------------------------------------------------------------------------
# Rater pages


def _rate(bench: Workbench) -> Handler:
    async def page(request: Request, access: Access) -> Response:
        def load() -> tuple[str, Any]:
            with bench.session() as session:
                reviewer = session.get(store.Reviewer, access.reviewer_id)
                study = store.get_study(session, access.study_id or 0)
                if reviewer is None:
                    return "gone", None
                if reviewer.warned_at is None:
                    return "warning", study
                if store.break_due(reviewer, study):
                    return "break", study
                items = store.assigned_items(session, reviewer.id or 0)
                rated = store.latest_ratings(session, [i.id for i in items if i.id], reviewer.id)
                left = [i for i in items if (i.id, reviewer.id) not in rated]
                return ("item", left[0].id) if left else ("done", len(items))

        kind, value = await run_in_threadpool(load)
        if kind == "item":
            return RedirectResponse(f"/item/{value}", status_code=303)
        if kind == "gone":
            return PlainTextResponse("403: not for this link", status_code=403)
        template = {"warning": "warning.html", "break": "break.html", "done": "done.html"}[kind]
        return bench.render(request, access, template, study=value, total=value)

    return page


def _acknowledge(bench: Workbench) -> Handler:
    async def page(request: Request, access: Access) -> Response:
        await run_in_threadpool(store.acknowledge_warning, bench.engine, access.reviewer_id)
        return RedirectResponse("/rate", status_code=303)

    return page


def _resume(bench: Workbench) -> Handler:
    async def page(request: Request, access: Access) -> Response:
        await run_in_threadpool(store.new_sitting, bench.engine, access.reviewer_id)
        return RedirectResponse("/rate", status_code=303)

    return page


def _pause(bench: Workbench) -> Handler:
    async def page(request: Request, access: Access) -> Response:
        return bench.render(request, access, "pause.html")

    return page


def _answer_of(form: dict[str, str], rubric: dict[str, Any]) -> dict[str, Any]:
    return {
        "skipped": form.get("action") == "skip",
        "verdict": form.get("verdict"),
        "answers": {c["id"]: form.get(f"check_{c['id']}") for c in rubric.get("checks", ())},
        "note": form.get("note", ""),
    }


def _item(bench: Workbench) -> Handler:
    async def page(request: Request, access: Access) -> Response:
        item_id = request.path_params["item_id"]

        def load() -> dict[str, Any] | None:
            with bench.session() as session:
                item = session.get(ReviewItem, item_id)
                if item is None or not store.is_assigned(session, access.reviewer_id or 0, item_id):
                    return None
                items = store.assigned_items(session, access.reviewer_id or 0)
                mine = store.latest_ratings(session, [i.id for i in items if i.id], access.reviewer_id)
                history = store.rating_history(session, item_id, access.reviewer_id or 0)
                return {
                    **_item_context(session, item),
                    "number": next(n for n, i in enumerate(items, 1) if i.id == item_id),
                    "total": len(items),
                    "done": len(mine),
                    "current": mine.get((item_id, access.reviewer_id)),
                    "history": history,
                }

        found = await run_in_threadpool(load)
        if found is None:
            return PlainTextResponse("403: this item is not one of yours", status_code=403)
        if request.method == "POST":
            answer = _answer_of(request.state.form, found["rubric"])
            try:
                await run_in_threadpool(store.save_rating, bench.engine, access.reviewer_id, item_id, answer)
            except store.ReviewError as exc:
                return bench.render(
                    request, access, "item.html", status=400, error=str(exc), given=answer, **found
                )
            return RedirectResponse("/rate", status_code=303)
        given = None
        if found["current"] is not None:
            current = found["current"]
            given = {"verdict": current.verdict, "answers": current.answers, "note": current.note}
        return bench.render(request, access, "item.html", error=None, given=given, **found)

    return page


def _mine(bench: Workbench) -> Handler:
    async def page(request: Request, access: Access) -> Response:
        def load() -> dict[str, Any]:
            with bench.session() as session:
                items = store.assigned_items(session, access.reviewer_id or 0)
                mine = store.latest_ratings(session, [i.id for i in items if i.id], access.reviewer_id)
                return {
                    "rows": [(n, i, mine.get((i.id, access.reviewer_id))) for n, i in enumerate(items, 1)]
                }

        return bench.render(request, access, "mine.html", **await run_in_threadpool(load))

    return page


def _static(bench: Workbench) -> Handler:
    async def page(request: Request, access: Access) -> Response:
        name = request.path_params["name"]
        if name not in STATIC:
            return PlainTextResponse("404", status_code=404)
        return FileResponse(TEMPLATES / name, media_type=STATIC[name])

    return page


OWNER = ("owner",)
RATER = ("rater",)
ANYONE = ("owner", "rater", "adjudicator")


def build_app(engine: Engine, gate: Gate, hosts: set[str] | None = None, source: str = "") -> Any:
    """The ASGI application: routes behind the gate, wrapped in the security headers."""
    bench = Workbench(engine, gate, source)

    def route(
        path: str, handler: Handler, roles: tuple[str, ...], methods: tuple[str, ...] = ("GET",)
    ) -> Route:
        return Route(path, guarded(bench, roles, handler), methods=list(methods))

    routes = [
        route("/", _home(bench), ANYONE),
        route("/browse", _browse(bench), OWNER),
        route("/case/{result_id:int}", _case(bench), OWNER),
        route("/study/{study_id:int}", _study(bench), OWNER),
        route("/study/{study_id:int}/calibration", _store_calibration(bench), OWNER, ("POST",)),
        route("/study/{study_id:int}/export.csv", _export(bench, "csv"), OWNER),
        route("/study/{study_id:int}/export.jsonl", _export(bench, "jsonl"), OWNER),
        route("/study/{study_id:int}/adjudicate", _queue(bench), ("owner", "adjudicator")),
        route("/adjudicate/{item_id:int}", _adjudicate(bench), ("owner", "adjudicator"), ("GET", "POST")),
        route("/rate", _rate(bench), RATER),
        route("/warned", _acknowledge(bench), RATER, ("POST",)),
        route("/resume", _resume(bench), RATER, ("POST",)),
        route("/pause", _pause(bench), RATER),
        route("/item/{item_id:int}", _item(bench), RATER, ("GET", "POST")),
        route("/mine", _mine(bench), RATER),
        route("/static/{name}", _static(bench), ANYONE),
    ]

    async def not_found(request: Request, exc: Exception) -> Response:
        token, _ = _token(request)
        access = await run_in_threadpool(gate.identify, token)
        return PlainTextResponse(
            "401: this page needs a valid link (token)" if access is None else "404",
            status_code=401 if access is None else 404,
        )

    app = Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found})
    return SecurityHeaders(app, hosts or set())


def as_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=1, default=str)
