"""`helmbench serve` and `helmbench review …`: the clinician review workbench (the `workbench` extra).

Scriptable contracts: `serve` prints the owner's link on one line once it listens; `review create`
prints `study N`; `review raters add` prints the rater's link on one line; every link is
`http://HOST:PORT/…?token=…`. What else they have to say goes to standard error. Starlette, uvicorn
and the database libraries are imported inside the commands (the command line loads none of them).
"""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path

import typer

from ..reporting.safe_text import for_terminal
from .defaults import ConfigFileError, find_project
from .results import DbOption, db_session, default_db, fail, open_db

DEFAULT_HOST = "127.0.0.1"  # workbench/server.py's (the command line imports no web library)
DEFAULT_PORT = 8765
HostOption = typer.Option(DEFAULT_HOST, "--host", help="address to listen on (default: loopback only)")
PortOption = typer.Option(DEFAULT_PORT, "--port", min=0, max=65535, help="port (0: any free one)")
EXTRA = "the review workbench needs its extra: pip install 'pytest-helmbench[workbench]'"


def _require_extra() -> None:
    try:
        import jinja2  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        fail(f"{EXTRA} ({exc.name} is missing)")


def _note(text: str) -> None:
    typer.echo(for_terminal(text), err=True)


def serve(
    db: str | None = DbOption,
    host: str = HostOption,
    port: int = PortOption,
) -> None:
    """Serve the workbench (browse runs, review studies) on the results database until Ctrl-C."""
    _require_extra()
    from ..storage.engine import safe_url
    from ..workbench.server import Started, is_loopback
    from ..workbench.server import serve as run_server

    url = db or default_db()

    def say(started: Started) -> None:
        typer.echo(started.owner_link)  # the one line scripts read
        sys.stdout.flush()
        _note(f"helmbench workbench on {safe_url(url)}: the link above is the owner's (keep it private)")
        _note("Ctrl-C stops it")
        if not is_loopback(started.host):
            _note(
                f"warning: listening on {started.host}, not loopback: anyone who reaches port "
                f"{started.port} of this machine gets the login (401) and, with a link, the replies, "
                "ratings and raters' names "
                "(HTTP: not encrypted; put it behind TLS on a shared network)"
            )

    with open_db(url, os_error=f"cannot listen on {host}:{port}") as engine:
        run_server(engine, host, port, safe_url(url), say)


# A typer command: its parameters are its command-line options, one each.
def create(  # noqa: PLR0913
    run_id: int = typer.Option(..., "--run-id", help="the run whose judged replies to sample"),
    size: int = typer.Option(200, "--size", min=1, max=100_000, help="items in the study"),
    raters: int = typer.Option(2, "--raters", min=1, max=20, help="raters per item"),
    strata: str = typer.Option(
        "rubric,verdict,condition,layout", "--strata", help="stratify by (comma-separated)"
    ),
    include: str = typer.Option(
        "", "--include", help="over-sample (comma-separated): disagreements, critical, unknown-numbers"
    ),
    root: Path | None = typer.Option(None, "--root", help="the benchmark whose rubrics the run used"),
    db: str | None = DbOption,
) -> None:
    """Draw a stratified sample of a run's judged replies into a new review study; prints `study N`."""
    from sqlmodel import Session

    from ..errors import HelmbenchError
    from ..evaluation.builtin import builtin_registry
    from ..suite.loader import BenchmarkLoader
    from ..workbench.sampling import INCLUDE, STRATA, draw, parse_names, reviewable
    from ..workbench.store import StudySettings, create_study, run_judge

    with open_db(db, (HelmbenchError, ConfigFileError)) as engine:
        root = root or find_project().root
        chosen_strata = parse_names(strata, STRATA, "--strata")
        chosen_include = parse_names(include, INCLUDE, "--include")
        loader = BenchmarkLoader(root, evaluation_types=builtin_registry())
        with Session(engine) as session:
            run_judge(session, run_id)
            pool = reviewable(session, run_id, loader)
        if not pool.candidates:
            fail(
                f"run {run_id} has no reply judged on an atomic rubric that is unchanged on disk under "
                f"{root} ({pool.unjudged} without such a verdict; {len(pool.changed)} scenarios changed)"
            )
        drawn = draw(pool.candidates, size, chosen_strata, chosen_include)
        settings = StudySettings(run_id, size, raters, chosen_strata, chosen_include)
        study_id = create_study(engine, settings, drawn, pool.rubrics)
    typer.echo(f"study {study_id}")
    _note(
        f"{len(drawn)} of {len(pool.candidates)} reviewable replies of run {run_id} drawn "
        f"({sum(1 for d in drawn if 'stratified' not in d.reasons)} over-sampled); {raters} rater(s) per item"
    )
    if pool.changed:
        shown = ", ".join(sorted(pool.changed)[:5]) + (" …" if len(pool.changed) > 5 else "")
        changed = len(pool.changed)
        _note(f"left out: replies of {changed} scenario(s) whose files changed since the run ({shown})")
    _note(f"next: helmbench review raters add NAME --study {study_id}")


def raters_add(
    name: str = typer.Argument(..., help="the rater's name (shown to the owner only)"),
    study: int = typer.Option(..., "--study", help="the study's id"),
    adjudicator: bool = typer.Option(False, "--adjudicator", help="an adjudicator, not a rater"),
    host: str = HostOption,
    port: int = PortOption,
    db: str | None = DbOption,
) -> None:
    """Add a rater (assigned every item still short of raters) and print their personal link."""
    from ..errors import HelmbenchError
    from ..workbench.server import link
    from ..workbench.store import add_reviewer

    with open_db(db, (HelmbenchError,)) as engine:
        token = add_reviewer(engine, study, name, "adjudicator" if adjudicator else "rater")
    typer.echo(link(host, port, token))
    _note("this link is the only way in and is not stored: send it to the rater privately")


def figures(
    study: int = typer.Option(..., "--study", help="the study's id"),
    store: bool = typer.Option(
        True, "--store/--no-store", help="store the judge-human agreement as a calibration"
    ),
    db: str | None = DbOption,
) -> None:
    """Print a study's agreement figures and (by default) store them as the judge's calibration."""
    from sqlmodel import Session

    from ..errors import HelmbenchError
    from ..reporting.calibration_figures import calibration_line
    from ..workbench.figures import labeller, store_calibration, study_figures, study_state

    with open_db(db, (HelmbenchError,)) as engine:
        if store:
            calibration_id, found = store_calibration(engine, study)
        else:
            calibration_id = None
            with Session(engine) as session:
                found = study_figures(study_state(session, study))
        with Session(engine) as session:
            judge = study_state(session, study).study.judge or "none"
    rr = found["rater_rater"]
    kappa = rr["fleiss_kappa"]["value"]
    typer.echo(
        f"study {study}: {found['n_final']} of {found['n_items']} items final "
        f"({found['n_adjudicated']} adjudicated, {found['n_disagreements']} awaiting adjudication); "
        "rater-rater Fleiss κ "
        f"{'n/a' if kappa is None else f'{kappa:.2f}'} on {rr['n']} items"
    )
    typer.echo(for_terminal(calibration_line(judge, found, labeller(study))))
    if calibration_id is not None:
        typer.echo(f"calibration {calibration_id} stored (labeller {labeller(study)})")


class ExportKind(StrEnum):
    csv = "csv"
    jsonl = "jsonl"
    calibration = "calibration"


def export(
    study: int = typer.Option(..., "--study", help="the study's id"),
    fmt: ExportKind = typer.Option(..., "--format", case_sensitive=False, help="csv, jsonl or calibration"),
    out: str = typer.Option(
        "-", "--out", help="file (csv, jsonl; - is standard output) or folder (calibration)"
    ),
    db: str | None = DbOption,
) -> None:
    """Write a study's ratings: item,rater,label CSV, JSON Lines with every check, or calibration items."""
    from ..errors import HelmbenchError
    from ..workbench import exports
    from ..workbench.store import get_study

    with db_session(db, (HelmbenchError,), os_error=f"cannot write {out}") as session:
        get_study(session, study)
        if fmt is ExportKind.calibration:
            _write_calibration(exports.calibration_items(session, study), out, exports.calibration_yaml)
            return
        write = exports.write_csv if fmt is ExportKind.csv else exports.write_jsonl
        if out == "-":
            count = write(session, study, sys.stdout)
        else:
            with open(out, "w", encoding="utf-8", newline="") as handle:
                count = write(session, study, handle)
    where = "standard output" if out == "-" else out
    _note(f"exported {count} row(s) of study {study} as {fmt.value} to {where}")


def _write_calibration(found: object, out: str, dump: object) -> None:
    if out == "-":
        fail("--format calibration writes one file per scenario: give a folder with --out DIR")
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    files = found.files  # type: ignore[attr-defined]
    for scenario, content in sorted(files.items()):
        (folder / f"{scenario}.yml").write_text(dump(content), encoding="utf-8")  # type: ignore[operator]
    items = sum(len(c["items"]) for c in files.values())
    _note(f"wrote {items} calibration item(s) in {len(files)} file(s) under {folder}")
    for reason, count in sorted(found.left_out.items()):  # type: ignore[attr-defined]
        _note(f"left out {count}: {reason}")


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
    review = typer.Typer(help="Clinician review studies (the workbench).", no_args_is_help=True)
    review.command("create")(create)
    raters = typer.Typer(help="A study's raters.", no_args_is_help=True)
    raters.command("add")(raters_add)
    review.add_typer(raters, name="raters")
    review.command("figures")(figures)
    review.command("export")(export)
    app.add_typer(review, name="review")
