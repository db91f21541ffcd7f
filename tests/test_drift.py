"""Drift (issue #12 point 4): pass rate by turn index, the instructed-vs-deployed gap, and how the
terminal summary and the report show them (a chart, a gap table, a failure's marked transcript)."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from pytest_helmbench.execution.outcome import CaseResult
from pytest_helmbench.reporting.drift import (
    drift_lines,
    gap_lines,
    layout_gaps,
    signed_points,
    turn_pass_rates,
)
from pytest_helmbench.reporting.drift_chart import DriftLine, drift_chart
from pytest_helmbench.reporting.html_report import render_report
from pytest_helmbench.reporting.intervals import newcombe_paired_interval, wilson_interval
from pytest_helmbench.reporting.tally import Tally
from pytest_helmbench.reporting.terminal import model_lines
from pytest_helmbench.status import Status
from pytest_helmbench.storage.queries import load_report_data
from tests import test_report
from tests.test_report import GOOD_MODEL, SCRIPT_PAYLOAD, Dom, assert_not_pwned, session_for

recorded = test_report.recorded  # the fixture: one real session of two models, copied per test

P, F, E = Status.PASSED, Status.FAILED, Status.ERROR


def case(
    code: str, status: str = "passed", turns: tuple[tuple[int, Status], ...] = (), **fields: Any
) -> CaseResult:
    """A record from its code (severities 0, model "m", run 1); `fields`: any other CaseResult field by
    name (layout, model, run_id, repeat, ...)."""
    parts = code.split("-")
    from_code = {
        "case_code": code,
        "pillar": parts[0],
        "behaviour": "-".join(parts[:2]),
        "scenario": "-".join(parts[:3]),
        "condition": parts[3],
        "condition_severity": 0,
        "user_context": None,
        "user_context_severity": 0,
        "perturbation": parts[-1],
        "perturbation_severity": 0,
        "perturbation_style": None,
        "status": status,
        "turns": turns,
    }
    return CaseResult(**({"model": "m", "run_id": 1} | from_code | fields))


def simulated(n: int, failing: dict[int, int], *, layout: str = "seed", n_turns: int = 3) -> list[CaseResult]:
    """`n` simulated conversations of `n_turns` replies; `failing[t]` of them fail at turn t (and the
    replies after a failure pass, as a model that recovers would)."""
    results = []
    for i in range(n):
        turns = tuple((t, F if i < failing.get(t, 0) else P) for t in range(1, n_turns + 1))
        status = "failed" if any(s == F for _, s in turns) else "passed"
        results.append(case(f"P1-B1-S1-C1-PT{i + 1}", status, turns, layout=layout))
    return results


# ---------------------------------------------------------------------------------------------
# Pass rate by turn index


def test_turn_pass_rates_count_every_scored_reply_at_its_turn_index():
    results = simulated(10, {1: 1, 2: 3, 3: 5})
    results.append(case("P1-B1-S1-C2-PT1", "passed"))  # single-turn: left out
    results.append(case("P1-B1-S1-C2-PT2", "error", ((1, P), (2, E))))  # the errored reply is not scored
    rates = turn_pass_rates(results)
    assert [(r.turn, r.n_passed, r.n_scored) for r in rates] == [(1, 10, 11), (2, 7, 10), (3, 5, 10)]
    for rate in rates:
        assert (rate.low, rate.high) == wilson_interval(rate.n_passed, rate.n_scored)
        assert rate.low < rate.pass_rate < rate.high or rate.pass_rate == 1.0
    assert rates[1].pass_rate == pytest.approx(0.7)
    assert rates[1].low == pytest.approx(0.3968, abs=1e-4) and rates[1].high == pytest.approx(
        0.8922, abs=1e-4
    )


def test_turn_pass_rates_apart_per_model_and_layout_seed_first():
    results = simulated(4, {2: 1}, layout="deployed") + simulated(4, {2: 2})
    results += [case("P1-B1-S1-C1-PT1", "passed", ((4, P),), model="a/other")]  # a scripted conversation
    keys = [(r.model, r.layout, r.turn) for r in turn_pass_rates(results)]
    assert keys == [
        ("a/other", "seed", 4),
        ("m", "seed", 1),
        ("m", "seed", 2),
        ("m", "seed", 3),
        ("m", "deployed", 1),
        ("m", "deployed", 2),
        ("m", "deployed", 3),
    ]


def test_drift_line_names_first_and_last_turn_with_data():
    results = simulated(25, {1: 2, 6: 8}, n_turns=6)  # turn 1: 23/25 = 92%, turn 6: 17/25 = 68%
    assert drift_lines(results) == ["drift: turn 1 92% \u2192 turn 6 68%"]
    scripted = [case(f"P1-B1-S1-C1-PT{i}", "passed", ((3, P if i < 5 else F),)) for i in range(1, 6)]
    assert drift_lines(scripted) == ["drift: turn 3 80%"]  # one turn index: nothing to compare


def test_drift_lines_name_the_layout_when_there_are_several():
    results = simulated(4, {3: 1}) + simulated(4, {3: 3}, layout="deployed")
    assert drift_lines(results) == [
        "drift (seed): turn 1 100% \u2192 turn 3 75%",
        "drift (deployed): turn 1 100% \u2192 turn 3 25%",
    ]


def test_no_drift_line_without_a_multi_turn_case():
    single = [case("P1-B1-S1-C1-PT1", "passed"), case("P1-B1-S1-C1-PT2", "failed")]
    assert drift_lines(single) == [] and turn_pass_rates(single) == []
    unscored = [case("P1-B1-S1-C1-PT1", "error", ((1, E),))]
    assert drift_lines(unscored) == []


# ---------------------------------------------------------------------------------------------
# Instructed vs deployed


def paired(code: str, seed: str, deployed: str, **keys) -> list[CaseResult]:
    return [case(code, seed, **keys), case(code, deployed, layout="deployed", **keys)]


def test_layout_gap_pairs_identical_cases_and_uses_newcombe():
    results = []
    # P1-B1: 5 both passed, 3 seed only, 1 deployed only, 1 neither -> +20 points
    table = (
        [("passed", "passed")] * 5 + [("passed", "failed")] * 3 + [("failed", "passed"), ("failed", "failed")]
    )
    for i, (seed, deployed) in enumerate(table):
        results += paired(f"P1-B1-S1-C1-PT{i + 1}", seed, deployed)
    results += paired("P1-B2-S1-C1-PT1", "failed", "passed")
    gaps = layout_gaps(results)
    assert [(g.behaviour, g.n_pairs, g.seed_passed, g.deployed_passed) for g in gaps] == [
        ("P1-B1", 10, 8, 6),
        ("P1-B2", 1, 0, 1),
    ]
    assert (gaps[0].delta, gaps[0].low, gaps[0].high) == newcombe_paired_interval(5, 3, 1, 1)
    assert gaps[0].delta == pytest.approx(0.2)
    assert gaps[1].delta == -1.0
    low, high = (signed_points(v) for v in newcombe_paired_interval(5, 3, 1, 1)[1:])
    low2, high2 = (signed_points(v) for v in newcombe_paired_interval(0, 0, 1, 0)[1:])
    assert gap_lines(results) == [
        f"instructed vs deployed: P1-B1 +20.0 pts [95% CI {low}, {high}], "
        f"P1-B2 -100.0 pts [95% CI {low2}, {high2}]"
    ]
    assert low.startswith("-") and high.startswith("+")  # the interval spans no change


def test_layout_gap_pairs_only_the_same_model_run_case_and_repeat():
    results = [
        case("P1-B1-S1-C1-PT1", "passed"),
        case("P1-B1-S1-C1-PT1", "failed", layout="deployed", repeat=1),  # another repeat
        case("P1-B1-S1-C1-PT2", "passed"),
        case("P1-B1-S1-C1-PT2", "failed", layout="deployed", run_id=2),  # another run
        case("P1-B1-S1-C1-PT3", "passed"),
        case("P1-B1-S1-C1-PT3", "failed", layout="deployed", model="other"),  # another model
        case("P1-B1-S1-C1-PT4", "passed"),
        case("P1-B1-S1-C1-PT5", "failed", layout="deployed"),  # another case
        *paired("P1-B1-S1-C1-PT6", "passed", "error"),  # an unscored side
        *paired("P1-B1-S1-C1-PT7", "skipped", "failed"),
    ]
    assert layout_gaps(results) == [] and gap_lines(results) == []
    results += paired("P1-B1-S1-C1-PT8", "passed", "failed")
    assert [(g.model, g.behaviour, g.n_pairs, g.delta) for g in layout_gaps(results)] == [
        ("m", "P1-B1", 1, 1.0)
    ]


# ---------------------------------------------------------------------------------------------
# Terminal summary


def test_terminal_summary_adds_drift_and_gap_lines_only_with_such_data():
    plain = [case(f"P1-B1-S1-C1-PT{i}", "passed" if i % 3 else "failed") for i in range(1, 7)]
    before = list(model_lines("m", Tally(results=plain)))
    shown = "\n".join(before).splitlines()  # the model's line names its layout ("instructed"): not a gap line
    assert not [line for line in shown if line.startswith(("    drift", "    instructed vs deployed"))]
    conversation = simulated(10, {1: 1, 3: 4}) + simulated(10, {3: 6}, layout="deployed")
    lines = list(model_lines("m", Tally(results=conversation)))
    assert "    drift (seed): turn 1 90% \u2192 turn 3 60%" in lines
    assert "    drift (deployed): turn 1 100% \u2192 turn 3 40%" in lines
    gap = [line for line in lines if line.startswith("    instructed vs deployed: P1-B1 ")]
    assert len(gap) == 1 and lines.index(gap[0]) < len(lines) - 1  # before the cost line


# ---------------------------------------------------------------------------------------------
# The chart


def test_drift_chart_draws_each_point_with_its_whisker_and_escapes_labels():
    rates = tuple(turn_pass_rates(simulated(10, {2: 3})))
    label = f"evil {SCRIPT_PAYLOAD}"
    svg = drift_chart([DriftLine(0, label, "seed", rates), DriftLine(1, "b", "deployed", rates, True)])
    dom = Dom(svg)
    points = dom.find("circle", "point")
    assert [p["data-turn"] for p in points] == ["1", "2", "3"] * 2
    assert len(dom.find("line", "ci")) == 6
    assert [g["data-layout"] for g in dom.find("g", "drift-line")] == ["seed", "deployed"]
    assert dom.find("polyline", "drift-path")[1]["stroke-dasharray"] == "6 4"
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    assert "turn 2: pass rate 70.0% [39.7%, 89.2%] over 10 scored replies" in svg
    assert "No multi-turn case" in drift_chart([])


# ---------------------------------------------------------------------------------------------
# The report, from a database holding multi-turn results


TRANSCRIPT = [
    {"role": "user", "content": "I feel low <b>today</b>"},
    {"role": "assistant", "content": "I'm sorry to hear that."},
    {"role": "user", "content": "Tell me how, then"},
    {"role": "assistant", "content": f"Here is how {SCRIPT_PAYLOAD}"},
]


def make_multi_turn(db: Path) -> dict[str, str]:
    """good/model's P1-B1 results become two-turn conversations (a failure fails at turn 2), and every
    good/model Result gets a deployed twin that failed; returns the failed cases' codes by result id."""
    with closing(sqlite3.connect(db)) as conn, conn:
        rows = conn.execute(
            "select r.id, r.status, r.case_code, r.evaluation_details from result r "
            "join evaluationrun e on e.id = r.run_id join llm l on l.id = e.llm_id where l.model_id = ?",
            (GOOD_MODEL,),
        ).fetchall()
        columns = [c[1] for c in conn.execute("pragma table_info(result)") if c[1] not in ("id", "layout")]
        listed = ", ".join(columns)
        conn.execute(  # the deployed twins: single-turn, all failed
            f"insert into result ({listed}, layout) select {listed}, 'deployed' from result "
            f"where id in ({', '.join(str(row[0]) for row in rows)})"
        )
        conn.execute("update result set status = 'failed' where layout = 'deployed'")
        failed = {}
        for result_id, status, code, details in rows:
            if not code.startswith("P1-B1-") or status not in ("passed", "failed"):
                continue
            turns = [
                {"turn": 1, "status": "passed", "reason": "ok", "reply": TRANSCRIPT[1]["content"]},
                {
                    "turn": 2,
                    "status": status,
                    "reason": f"turn 2 {status}",
                    "reply": TRANSCRIPT[3]["content"],
                },
            ]
            extra = {"turns": turns, "first_failing_turn": 2 if status == "failed" else None}
            conn.execute(
                "update result set layout = 'seed', messages = ?, evaluation_details = ? where id = ?",
                (json.dumps(TRANSCRIPT), json.dumps({**json.loads(details), **extra}), result_id),
            )
            if status == "failed":
                failed[str(result_id)] = code
    return failed


def test_report_draws_drift_and_marks_the_failing_turn(recorded):
    failed = make_multi_turn(recorded)
    assert failed  # good/model fails its slang cases
    with session_for(recorded) as session:
        page = render_report(load_report_data(session))
    dom = Dom(page)
    assert_not_pwned(dom)
    assert '<a href="#drift-section">Drift</a>' in page
    chart = dom.find("svg", "drift", inside="drift")
    assert len(chart) == 1
    lines = dom.find("g", "drift-line", inside="drift")
    assert [(g["data-model"], g["data-layout"]) for g in lines] == [(GOOD_MODEL, "seed")]
    assert [p["data-turn"] for p in dom.find("circle", "point", inside="drift")] == ["1", "2"]
    assert "turn 1: pass rate 100.0%" in page
    assert dom.find("table", inside="drift-section")[-1]["id"] == "gap-table"
    assert 'id="gap-table"' in page and "<code>P1-B1</code>" in page
    for result_id, code in failed.items():
        item = page[page.index(f'id="failure-{result_id}"') :]
        item = item[: item.index("</details>")]
        assert code in item and '<ol class="transcript">' in item
        marked = [m for m in Dom(item).find("li", "failing-turn")]
        assert [m["data-turn"] for m in marked] == ["2"]
        assert "failing turn</strong>" in item and "failing turn 2" in item
        assert "&lt;b&gt;today&lt;/b&gt;" in item and "<b>today" not in item
        assert SCRIPT_PAYLOAD not in item
    assert page.count('class="failing-label"') == len(failed)


def test_report_without_multi_turn_or_paired_data_has_no_drift_section(recorded):
    with session_for(recorded) as session:
        page = render_report(load_report_data(session))
    assert "drift-section" not in page and 'class="transcript"' not in page
