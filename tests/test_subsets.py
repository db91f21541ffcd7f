"""Subset runs (`-k`, `--lf`, `--helmbench-select`, node ids, under xdist too) are recorded and labelled
as such, and `helmbench report` headlines each model with the latest Result of every case across its
runs of the same benchmark and settings, with its coverage: a 4-case rerun is never the model's score.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlmodel import Session
from typer.testing import CliRunner

from pytest_helmbench.cli import app
from pytest_helmbench.execution.selection import selections, subset_label
from pytest_helmbench.reporting.html_report import render_report
from pytest_helmbench.reporting.series import summaries, summary_line
from pytest_helmbench.storage.coverage import settings_key
from pytest_helmbench.storage.engine import make_engine
from pytest_helmbench.storage.queries import load_report_data
from tests.dbquery import rows
from tests.openrouter_server import Reply

GOOD = {"category": "ANSWER", "response": "Mitochondria."}
WRONG = {"category": "HANDOFF", "response": "Please call a helpline."}
MODEL = "openai/gpt-4o-mini"


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("benchmark", "-p", "no:randomly", "-p", "no:cacheprovider", *args)


def selection_of(db: Path | str) -> list[tuple]:
    return rows(db, "select id, subset, selected_cases, benchmark_cases from evaluationrun order by id")


def report_data(db: Path | str, run_ids: list[int] | None = None):
    engine = make_engine(db if isinstance(db, str) else f"sqlite:///{db}")
    try:
        with Session(engine) as session:
            return load_report_data(session, run_ids)
    finally:
        engine.dispose()


def test_a_subset_run_is_recorded_labelled_and_never_the_headline(
    pytester, bench, helm_env, db_url, monkeypatch
):
    monkeypatch.setenv("HELMBENCH_DB", db_url)  # SQLite and PostgreSQL
    helm_env.add_rule(reply=Reply.ok(GOOD))
    assert run(pytester).ret == 0  # the whole benchmark: 8 cases, all pass
    helm_env.reset()
    helm_env.add_rule(reply=Reply.ok(WRONG))
    result = run(pytester, "-k", "PT2", "--helmbench-cache=off")  # a 4-case rerun that fails
    out = result.stdout.str()
    assert f"{MODEL}  (run 2, subset: 4 of 8 cases)" in out
    db = db_url
    assert selection_of(db) == [(1, 0, 8, 8), (2, 1, 4, 8)]

    data = report_data(db)  # `helmbench report` without --run-id: the headline
    [summary] = summaries(data)
    assert (summary.score.n_passed, summary.score.n_failed) == (4, 4)  # not the rerun's 0 %
    assert data.coverage[MODEL].text() == "8 of 8 cases, from 2 runs"
    assert summary_line(summary).endswith("| 8 of 8 cases, from 2 runs")
    assert {r.run_id for r in data.results} == {1, 2} and len(data.results) == 8
    assert {f.run_id for f in data.failures} == {2}

    only = report_data(db, [2])  # exactly that run: shown as the subset it is
    [alone] = summaries(only)
    assert alone.subset == "subset: 4 of 8 cases" and summary_line(alone).endswith("| subset: 4 of 8 cases")
    page = render_report(only)
    assert "subset: 4 of 8 cases" in page
    assert "8 of 8 cases, from 2 runs" in render_report(data)


def test_an_error_never_replaces_an_earlier_verdict_in_the_headline(
    pytester, bench, helm_env, db_url, monkeypatch
):
    monkeypatch.setenv("HELMBENCH_DB", db_url)  # SQLite and PostgreSQL
    helm_env.add_rule(contains="agian", reply=Reply.ok(WRONG))
    helm_env.add_rule(reply=Reply.ok(GOOD))
    assert run(pytester).ret == 1  # 4 passed, 4 failed
    helm_env.reset()
    helm_env.add_rule(reply=Reply.error(500, "upstream down"))
    with_errors = run(pytester, "-k", "PT2", "--helmbench-cache=off", "--helmbench-retries=0")
    with_errors.assert_outcomes(errors=4)
    [summary] = summaries(report_data(db_url))
    # an outage after the failures must not drop them from the score (it would launder them)
    assert (summary.score.n_passed, summary.score.n_failed, summary.score.n_errors) == (4, 4, 0)


def test_runs_with_other_settings_never_share_a_headline(pytester, bench, helm_env):
    helm_env.add_rule(reply=Reply.ok(GOOD))
    assert run(pytester).ret == 0
    assert run(pytester, "--helmbench-select=PT1", "--helmbench-temperature=0.5").ret == 0
    data = report_data(pytester.path / "helmbench.db")
    assert data.coverage[MODEL].text() == "4 of 8 cases, from 1 run"
    assert [r.id for r in data.runs] == [2]
    assert not data.coverage[MODEL].complete


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_selection_is_counted_per_model_with_node_ids_and_repeats(pytester, bench, helm_env, xdist):
    helm_env.add_rule(reply=Reply.ok(GOOD))
    result = run(
        pytester,
        *xdist,
        "--helmbench-model=a/one,b/two",
        "--helmbench-repeat=2",
        "--helmbench-select=C1",
    )
    assert result.ret == 0
    db = pytester.path / "helmbench.db"
    assert sorted(rows(db, "select subset, selected_cases, benchmark_cases from evaluationrun")) == [
        (1, 4, 8),
        (1, 4, 8),
    ]
    assert "(run 1, subset: 4 of 8 cases)" in result.stdout.str()


def test_a_whole_benchmark_run_is_not_a_subset_and_explicit_node_ids_are(pytester, bench, helm_env):
    helm_env.add_rule(reply=Reply.ok(GOOD))
    result = run(pytester, "-n", "2")
    assert result.ret == 0 and "subset:" not in result.stdout.str()
    node = "benchmark/scenarios/P1-B1-S1/S1.md::P1-B1-S1-C1-PT1"
    assert pytester.runpytest(node, "-p", "no:randomly").ret == 0
    assert selection_of(pytester.path / "helmbench.db") == [(1, 0, 8, 8), (2, 1, 1, 8)]


def test_subset_runs_are_labelled_in_export_and_costs(pytester, bench, helm_env, monkeypatch, db_url):
    monkeypatch.setenv("HELMBENCH_DB", db_url)  # SQLite and PostgreSQL; also the commands' default
    helm_env.add_rule(reply=Reply.ok(GOOD, cost=0.001))
    assert run(pytester).ret == 0
    assert run(pytester, "-k", "C2", "--helmbench-cache=off").ret == 0
    monkeypatch.chdir(pytester.path)
    runner = CliRunner()
    exported = runner.invoke(app, ["export", "--format", "jsonl"])
    exported_rows = [json.loads(line) for line in exported.stdout.splitlines()]
    subset_by_run = {row["run_id"]: row["run_subset"] for row in exported_rows}
    assert subset_by_run == {1: False, 2: True}
    costs = runner.invoke(app, ["costs"]).stdout
    assert "run 2 is a subset: 4 of 8 cases" in costs and "run 1 is a" not in costs


def test_a_run_stored_before_0005_has_no_label(tmp_path):
    assert subset_label(None, None, None) == ""
    assert subset_label(True, None, None) == "subset"
    assert subset_label(True, 3, None) == "subset: 3 cases"
    found = selections({"m": {"A", "B"}}, 2, every_scenario_loaded=False)
    assert found["m"].subset  # a scenario that could not be loaded: the run cannot cover it


def test_settings_that_decide_answers_separate_runs_and_the_rest_do_not():
    base = {"model": {"id": "m"}, "temperature": 0.0, "concurrency": 8, "sample": None}
    assert settings_key(1, base) == settings_key(1, {**base, "concurrency": 2, "sample": 30})
    assert settings_key(1, base) != settings_key(1, {**base, "temperature": 0.7})
    assert settings_key(1, base) != settings_key(2, base)  # another benchmark version


def test_a_resumed_run_keeps_the_selection_it_started_with(pytester, bench, helm_env, db_url, monkeypatch):
    monkeypatch.setenv("HELMBENCH_DB", db_url)  # SQLite and PostgreSQL
    helm_env.add_rule(contains="agian", reply=Reply.error(500, "upstream down"))
    helm_env.add_rule(reply=Reply.ok(GOOD))
    run(pytester, "--helmbench-retries=0").assert_outcomes(passed=4, errors=4)
    helm_env.reset()
    helm_env.add_rule(reply=Reply.ok(GOOD))
    again = run(pytester, "--helmbench-retry-errors")  # selects the 4 errored cases of run 1
    again.assert_outcomes(passed=4)
    assert "subset:" not in again.stdout.str()
    assert selection_of(db_url) == [(1, 0, 8, 8)]


def test_a_resumed_sample_runs_the_rest_of_the_same_sample(pytester, bench, helm_env, tmp_path):
    """The resume plan applies after the sample: a resumed run never draws replacements for the cases
    its first session finished."""
    db = tmp_path / "sample.db"
    helm_env.add_rule(reply=Reply.ok(WRONG))  # every answer fails, so -x stops after the first
    args = ("--helmbench-sample=4", "--helmbench-concurrency=1", f"--helmbench-db=sqlite:///{db}")
    run(pytester, *args, "-x").assert_outcomes(failed=1)
    first = rows(db, "select case_code from result")
    resumed = run(pytester, *args, "--helmbench-resume")
    resumed.assert_outcomes(failed=3)
    codes = {code for (code,) in rows(db, "select case_code from result")}
    assert len(codes) == 4 and set(first[0]) <= codes
    assert rows(db, "select status, subset, selected_cases from evaluationrun") == [("completed", 1, 4)]


def test_collect_only_previews_a_resume_and_writes_nothing(pytester, bench, helm_env, tmp_path):
    db = tmp_path / "preview.db"
    helm_env.add_rule(reply=Reply.ok(WRONG))
    args = ("--helmbench-sample=4", "--helmbench-concurrency=1", f"--helmbench-db=sqlite:///{db}")
    run(pytester, *args, "-x").assert_outcomes(failed=1)
    before = rows(db, "select id, status, finished_at, options from evaluationrun")
    assert [row[1] for row in before] == ["interrupted"]
    preview = run(pytester, *args, "--helmbench-resume", "--collect-only", "-q")
    assert len([line for line in preview.outlines if "::" in line]) == 3  # what a resume would run
    assert rows(db, "select id, status, finished_at, options from evaluationrun") == before
    run(pytester, *args, "--helmbench-resume").assert_outcomes(failed=3)
    assert rows(db, "select status from evaluationrun") == [("completed",)]
