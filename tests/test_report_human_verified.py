"""Issue #27: the human-verified figure in `helmbench report` (its text lines and the HTML page): on the
replies a review study reached a final verdict on (adjudicated, or agreed by every assigned rater),
that verdict replaces the judge's, and the report says how many replies that covers. One rule decides
a final verdict for the workbench and the report (storage/review_verdicts.final_verdict)."""

from __future__ import annotations

import html
import re

import pytest
from sqlmodel import Session

from pytest_helmbench.execution.outcome import CaseResult
from pytest_helmbench.execution.sheet import ReplySheet
from pytest_helmbench.reporting.human_verified import human_verified
from pytest_helmbench.status import Status
from pytest_helmbench.storage.engine import make_engine
from pytest_helmbench.storage.review_verdicts import final_verdict, human_verdicts
from pytest_helmbench.workbench.store import save_adjudication
from tests.workbench_helpers import BENCHMARK, helmbench, judged_run, run_of, sql, two_raters_rate


@pytest.mark.parametrize(
    ("adjudicated", "verdicts", "assigned", "expected"),
    [
        ("unsafe", ["safe", "safe"], 2, ("unsafe", "adjudicated")),  # an adjudication overrides
        (None, ["safe", "unsafe"], 2, (None, "disagreement")),
        (None, ["safe", "safe"], 2, ("safe", "agreed")),
        (None, ["safe"], 2, (None, "pending")),  # the second rater has not rated yet
        (None, ["unsafe"], 0, ("unsafe", "agreed")),  # no assignment: one rating decides
        (None, [], 2, (None, "pending")),
    ],
)
def test_final_verdict_rule(adjudicated, verdicts, assigned, expected):
    assert final_verdict(adjudicated, verdicts, assigned) == expected


def result(case: str, status: Status, harm: bool, run_id: int = 1) -> CaseResult:
    return CaseResult(
        model="m", run_id=run_id, case_code=case, pillar="P1", behaviour="P1-B1", scenario="P1-B1-S1",
        condition="C1", condition_severity=0, user_context=None, user_context_severity=0,
        perturbation="PT1", perturbation_severity=0, perturbation_style=None, status=status,
        sheet=ReplySheet(harm, ("x",) if harm else (), 1, 2),
    )  # fmt: skip


def test_human_verified_replaces_reviewed_verdicts_and_counts_coverage():
    results = [
        result("P1-B1-S1-C1-PT1", Status.PASSED, False),
        result("P1-B1-S1-C1-PT2", Status.PASSED, False),
        result("P1-B1-S1-C1-PT3", Status.FAILED, True),
        result("P1-B1-S1-C1-PT4", Status.ERROR, False),  # not scored: never counted
    ]
    verdicts = {
        1: {
            ("P1-B1-S1-C1-PT1", "seed", 0): "unsafe",  # overturned
            ("P1-B1-S1-C1-PT3", "seed", 0): "unsafe",  # confirmed
            ("P1-B1-S1-C1-PT4", "seed", 0): "safe",  # an error stays an error
        },
        2: {("P1-B1-S1-C1-PT2", "seed", 0): "unsafe"},  # another run's review
    }
    found = human_verified(results, verdicts)
    assert found is not None
    assert (found.reviewed, found.replies, found.overturned) == (2, 3, 1)
    assert found.figures.n_harmed == 2 and found.figures.n_scored == 3
    assert found.text().startswith("human-verified: harm ")
    assert found.text().endswith("(2 of 3 replies human-reviewed, 1 overturned)")
    assert human_verified(results, {2: verdicts[2]}) is None


def _figure(line: str, name: str) -> str:
    return re.search(rf"{name} (\S+)", line).group(1)


@pytest.mark.e2e  # a pytest run and the helmbench command in subprocesses
def test_the_report_shows_the_human_verified_figure_beside_the_judges(tmp_path):
    url = f"sqlite:///{tmp_path / 'results.db'}"
    judged_run(url, tmp_path, sample=8)
    run_id = run_of(url, "oracle/borderline-unsafe")
    created = helmbench(
        "review", "create", "--run-id", str(run_id), "--root", str(BENCHMARK), "--size", "4",
        db_url=url, cwd=tmp_path,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    study = int(created.stdout.split()[1])
    runs = ("--run-id", str(run_id), "--run-id", str(run_of(url, "oracle/safe")))
    before = helmbench("report", *runs, "--out", "before.html", db_url=url, cwd=tmp_path)
    assert before.returncode == 0 and "human-verified" not in before.stdout
    assert "human-verified" not in (tmp_path / "before.html").read_text()

    engine = make_engine(url)
    try:
        # every reviewed reply called unsafe by both raters, except the first: a split, adjudicated safe
        state = two_raters_rate(
            engine,
            study,
            lambda s, rater, raters: "safe" if s.item.position == 1 and rater == raters[0] else "unsafe",
        )
        items = sorted(state.items, key=lambda s: s.item.position)
        save_adjudication(engine, items[0].item.id, "safe", "a careful reply", None)
        with Session(engine) as session:
            verdicts = human_verdicts(session, [run_id])[run_id]
    finally:
        engine.dispose()
    reviewed = len({s.item.result_id for s in items})
    assert len(verdicts) == reviewed and sorted(verdicts.values()).count("safe") >= 1
    scored = sql(
        url, "select count(*) from result where run_id = :r and status in ('passed', 'failed')", r=run_id
    )
    replies = scored[0][0]
    # the judge's verdicts on the reviewed replies: an overturned one is one whose pass/fail changed
    judged = dict(
        ((case, layout, repeat), status)
        for case, layout, repeat, status in sql(
            url,
            "select case_code, coalesce(layout, 'seed'), repeat_index, status from result where run_id = :r",
            r=run_id,
        )
    )
    overturned = sum(
        1 for key, verdict in verdicts.items() if (judged[key] == "passed") != (verdict == "safe")
    )

    after = helmbench("report", *runs, "--out", "after.html", db_url=url, cwd=tmp_path)
    assert after.returncode == 0, after.stderr
    [line] = [line for line in after.stdout.splitlines() if line.startswith("oracle/borderline-unsafe")]
    assert overturned >= 1, "some reviewed reply changed verdict: the figure differs from the judge's"
    tail = f"({reviewed} of {replies} replies human-reviewed, {overturned} overturned)"
    assert re.search(r"\| human-verified: harm \S+%, care \S+/100 " + re.escape(tail) + "$", line), line
    [other] = [line for line in after.stdout.splitlines() if line.startswith("oracle/safe")]
    assert "human-verified" not in other  # the other model's replies were not reviewed
    verified_harm = line.split("human-verified: harm ")[1].split(",")[0]
    verified_care = line.split("human-verified: harm ")[1].split("care ")[1].split("/100")[0]

    page = (tmp_path / "after.html").read_text()
    assert '<h3 id="human-verified">Human-verified</h3>' in page
    table = page.split('id="human-verified-table"')[1].split("</table>")[0]
    cells = [
        html.unescape(re.sub("<[^>]+>", "", c)).strip() for c in re.findall(r"<t[hd][^>]*>.*?</t[hd]>", table)
    ]
    row = cells[cells.index("oracle/borderline-unsafe") :]
    assert row[1].startswith(_figure(line, "harm")) and row[2].startswith(verified_harm)
    assert row[4].startswith(verified_care)
    assert row[5] == f"{reviewed} of {replies} replies human-reviewed" and row[6] == str(overturned)
    assert "oracle/safe" not in cells
