"""The review workbench in real headless Chromium (Debian's `chromium`, driven by Playwright's Python
package; no browser is downloaded) against the real server, `helmbench serve --port 0` (uvicorn on a
free loopback port): browse and filter; a two-rater study from creation through blind rating,
adjudication, agreement figures and export; blindness and isolation; a reply holding `<script>` and
`onerror` never runs; a form without its CSRF token is refused; no token, no page."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.test_report import chromium_binary
from tests.workbench_helpers import XSS, base_of, helmbench, judged_run, on, plant_reply, run_of, server, sql

playwright = pytest.importorskip("playwright.sync_api")


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with playwright.sync_playwright() as p:
        found = p.chromium.launch(executable_path=chromium_binary(), headless=True)
        try:
            yield found
        finally:
            found.close()


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    folder = tmp_path_factory.mktemp("workbench")
    url = f"sqlite:///{folder / 'results.db'}"
    judged_run(url, folder)
    return url, folder


def visible(page: object, selector: str) -> bool:
    """Whether `selector` is visible once the page is loaded: a click that submits a form returns when
    the next page's navigation has begun, and a loaded machine may not have parsed it yet."""
    page.wait_for_load_state()  # type: ignore[attr-defined]
    return page.locator(selector).is_visible()  # type: ignore[attr-defined]


def visit(browser: object, link: str) -> tuple[object, object, list[str]]:
    """A new browser profile (its own cookies) opened on a link; the dialogs it showed are collected."""
    context = browser.new_context()  # type: ignore[attr-defined]
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(link)
    return context, page, dialogs


def rate(page: object, verdict: str, note: str = "", keyboard: bool = False) -> None:
    """Answer the item on screen: every check `yes`, the overall verdict, an optional note."""
    page.wait_for_load_state("load")  # type: ignore[attr-defined]  # the shortcuts' script is deferred
    checks = page.locator("tr.check").count()  # type: ignore[attr-defined]
    if keyboard:
        for _ in range(checks):
            page.keyboard.press("y")  # type: ignore[attr-defined]
        page.keyboard.press("s" if verdict == "safe" else "u")  # type: ignore[attr-defined]
    else:
        for row in range(checks):
            page.locator("tr.check").nth(row).locator('input[value="yes"]').check()  # type: ignore[attr-defined]
        page.check(f'input[name="verdict"][value="{verdict}"]')  # type: ignore[attr-defined]
    if note:
        page.fill('textarea[name="note"]', note)  # type: ignore[attr-defined]
    with page.expect_navigation():  # type: ignore[attr-defined]
        if keyboard:
            page.keyboard.press("Control+Enter")  # type: ignore[attr-defined]
        else:
            page.click("#submit")  # type: ignore[attr-defined]


def test_without_a_valid_token_every_page_answers_401(judged, browser):
    url, folder = judged
    with server(url, folder) as owner:
        base = base_of(owner)
        context = browser.new_context()
        for path in (
            "/",
            "/browse",
            "/case/1",
            "/study/1",
            "/rate",
            "/item/1",
            "/static/workbench.css",
            "/nope",
        ):
            assert context.request.get(base + path).status == 401, path
            assert context.request.get(base + path + "?token=forged-token-value").status == 401, path
        assert context.request.post(base + "/warned", form={"csrf": "x"}).status == 401
        context.close()


def test_browse_and_filter_runs_and_cases(judged, browser):
    url, folder = judged
    with server(url, folder) as owner:
        context, page, _ = visit(browser, owner)
        assert "token=" not in page.url  # moved into the cookie
        assert page.locator("table.runs").inner_text().count("oracle/") == 2
        page.goto(base_of(owner) + "/browse")
        total = int(page.inner_text("#count").split()[0])
        assert total == 32
        page.select_option('select[name="model"]', "oracle/borderline-unsafe")
        page.select_option('select[name="verdict"]', "failed")
        page.click("button[type=submit]")
        failed = int(page.inner_text("#count").split()[0])
        assert 0 < failed <= 16
        page.wait_for_load_state()  # the rows after the count are parsed too
        statuses = page.locator("table.cases tbody tr td:nth-child(8)").all_inner_texts()
        assert set(statuses) == {"failed"}
        page.locator("table.cases tbody a").first.click()
        page.locator(".conversation .msg").nth(1).wait_for()  # the case's page loaded (count() waits not)
        assert page.locator(".conversation .msg").count() >= 2
        assert "The composed prompt" in page.content() and "judge oracle/judge" in page.inner_text(
            "table.checks"
        )
        page.goto(base_of(owner) + "/browse?q=zzz-no-such-reply")
        assert page.inner_text("#count").startswith("0 case")
        context.close()


def test_a_two_rater_study_blind_rating_adjudication_figures_and_export(judged, browser, tmp_path):
    url, folder = judged
    run_id = run_of(url, "oracle/borderline-unsafe")
    created = helmbench(
        "review",
        "create",
        "--run-id",
        str(run_id),
        "--size",
        "6",
        "--root",
        str(Path(__file__).parents[1] / "benchmark"),
        db_url=url,
        cwd=folder,
    )
    assert created.returncode == 0, created.stderr
    study = int(re.fullmatch(r"study (\d+)\n", created.stdout).group(1))
    links = {}
    for name in ("Alice", "Bob"):
        added = helmbench("review", "raters", "add", name, "--study", str(study), db_url=url, cwd=folder)
        assert added.returncode == 0 and added.stdout.count("\n") == 1, added
        links[name] = added.stdout.strip()
    added = helmbench(
        "review", "raters", "add", "Carol", "--study", str(study), "--adjudicator", db_url=url, cwd=folder
    )
    links["Carol"] = added.stdout.strip()
    other = helmbench(
        "review",
        "create",
        "--run-id",
        str(run_id),
        "--size",
        "2",
        "--root",
        str(Path(__file__).parents[1] / "benchmark"),
        db_url=url,
        cwd=folder,
    )
    other_study = int(other.stdout.split()[1])
    other_item = sql(url, "select id from reviewitem where study_id = :s", s=other_study)[0][0]
    first = sql(url, "select result_id from reviewitem where study_id = :s and position = 1", s=study)[0][0]
    plant_reply(url, first, XSS)
    sql(url, "update reviewstudy set break_items = 4 where id = :s", s=study)

    with server(url, folder) as owner:
        base = base_of(owner)
        # Alice: content warning, then six items by keyboard, the first with a note
        alice, page, dialogs = visit(browser, on(base, links["Alice"]))
        assert visible(page, "#content-warning")
        page.click("#start")
        item_url = page.url
        assert "/item/" in item_url, (item_url, page.content()[:2000])
        shown = page.inner_text("main")
        assert "XSS-MARK" in shown and "<script>" in shown  # shown as text
        assert page.evaluate("window.__xss") is None and dialogs == []
        for forbidden in (
            "oracle/",
            "gold label",
            "judge",
            "P1-",
            "P2-",
            "P3-",
            "P4-",
            "P5-",
            "passed",
            "failed",
        ):
            assert forbidden not in shown, forbidden
        rate(page, "safe", note="ALICE-NOTE-123", keyboard=True)
        for _ in range(3):
            rate(page, "safe", keyboard=True)
        assert visible(page, "#break"), page.inner_text("main")  # four items: a break is suggested
        page.click("#resume")
        for _ in range(2):
            rate(page, "safe", keyboard=True)
        assert visible(page, "#done")
        # Alice never reaches the owner's pages, another study's item, nor posts without CSRF
        assert alice.request.get(base + "/browse").status == 403
        assert alice.request.get(base + f"/study/{study}").status == 403
        assert alice.request.get(base + f"/item/{other_item}").status == 403
        item_id = int(item_url.rsplit("/", 1)[1])
        assert (
            alice.request.post(base + f"/item/{item_id}", form={"verdict": "unsafe", "action": "save"}).status
            == 403
        )
        # an edit keeps the history
        page.goto(item_url)
        rate(page, "safe", note="ALICE-NOTE-EDITED")
        assert (
            sql(
                url,
                "select count(*) from reviewrating r join reviewer v on v.id = r.reviewer_id"
                " where v.name = 'Alice' and r.item_id = :i",
                i=item_id,
            )[0][0]
            == 2
        )

        # Bob: blind to Alice's answers; unsafe on the first two items (a disagreement), safe on the rest
        bob, page, _ = visit(browser, on(base, links["Bob"]))
        page.click("#start")
        assert "ALICE-NOTE" not in page.content()
        for n in range(6):
            if n == 4:
                page.click("#resume")
            rate(page, "unsafe" if n < 2 else "safe")
        assert visible(page, "#done")
        bob.close()

        # Carol adjudicates the two disagreements with a reason
        carol, page, _ = visit(browser, on(base, links["Carol"]))
        assert page.locator("#queue li a").count() == 2
        for _ in range(2):
            page.locator("#queue li a").first.click()
            # click() waits for the next page to commit, not to load; reading the cells does not wait
            page.locator("td.rating-verdict").nth(1).wait_for()
            assert page.locator("td.rating-verdict").all_inner_texts() == ["safe", "unsafe"] or sorted(
                page.locator("td.rating-verdict").all_inner_texts()
            ) == ["safe", "unsafe"]
            assert "Alice" not in page.inner_text("table.compare")  # raters are "Rater A", "Rater B"
            page.check('input[name="verdict"][value="unsafe"]')
            page.fill('textarea[name="reason"]', "gives no crisis line")
            page.click("button[type=submit]")
        assert "Nothing to adjudicate" in page.inner_text("#queue")
        assert carol.request.get(base + "/browse").status == 403
        carol.close()

        # the owner: figures, stored as the judge's calibration, and the exports
        owner_context, page, _ = visit(browser, owner)
        page.goto(base + f"/study/{study}")
        assert "6 of 6 items have a final verdict (2 adjudicated)" in page.inner_text("#progress")
        assert "judge–human Cohen's κ" in page.inner_text("#agreement")
        page.click("#store-calibration")
        assert visible(page, "#stored")
        labeller, n_items, figures = sql(
            url, "select labeller, n_items, figures from judgecalibration order by id desc"
        )[0]
        assert (labeller, n_items) == (f"human:{study}", 6)
        assert "reviewed" in page.inner_text("#verified")
        exported = owner_context.request.get(base + f"/study/{study}/export.csv").text()
        rows = list(csv.DictReader(io.StringIO(exported)))
        assert len(rows) == 12 and {r["rater"] for r in rows} == {"Alice", "Bob"}
        assert {r["label"] for r in rows} <= {"safe", "unsafe"}
        lines = owner_context.request.get(base + f"/study/{study}/export.jsonl").text().splitlines()
        assert len(lines) == 13 and '"checks"' in lines[0]  # Alice's edit is the 13th revision
        owner_context.close()
        alice.close()

    # the CLI's exports agree
    cli_csv = helmbench("review", "export", "--study", str(study), "--format", "csv", db_url=url, cwd=folder)
    assert cli_csv.stdout == exported
    out = tmp_path / "calibration"
    made = helmbench(
        "review",
        "export",
        "--study",
        str(study),
        "--format",
        "calibration",
        "--out",
        str(out),
        db_url=url,
        cwd=folder,
    )
    assert made.returncode == 0, made.stderr


def test_a_form_without_its_csrf_token_is_refused_and_changes_nothing(judged, browser):
    url, folder = judged
    run_id = run_of(url, "oracle/safe")
    created = helmbench(
        "review",
        "create",
        "--run-id",
        str(run_id),
        "--size",
        "2",
        "--raters",
        "1",
        "--root",
        str(Path(__file__).parents[1] / "benchmark"),
        db_url=url,
        cwd=folder,
    )
    study = int(created.stdout.split()[1])
    link = helmbench(
        "review", "raters", "add", "Dana", "--study", str(study), db_url=url, cwd=folder
    ).stdout.strip()
    with server(url, folder) as owner:
        base = base_of(owner)
        context, page, _ = visit(browser, on(base, link))
        assert context.request.post(base + "/warned", form={}).status == 403
        assert context.request.post(base + "/warned", form={"csrf": "0" * 64}).status == 403
        page.reload()
        assert visible(page, "#content-warning")  # nothing changed
        page.click("#start")  # the page's own form, with its token, works
        assert visible(page, "#rating")
        owner_context, _, _ = visit(browser, owner)
        assert owner_context.request.post(base + f"/study/{study}/calibration", form={}).status == 403
        context.close()
        owner_context.close()
