"""What a run records about how it was scored (issue #11, items 5 and 6): its judge's calibration in the
terminal summary, the stored EvaluationRun columns (calibration, scoring and benchmark versions, judges,
policy, headline scores), the HTML report's judge table, and `helmbench rescore`."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from sqlalchemy import text
from sqlmodel import Session, select
from typer.testing import CliRunner

from pytest_helmbench.cli import app
from pytest_helmbench.evaluation.builtin import builtin_registry
from pytest_helmbench.reporting.calibration_figures import calibration_line
from pytest_helmbench.reporting.figure_text import figures_line
from pytest_helmbench.storage.engine import make_engine
from pytest_helmbench.storage.tables import LLM, EvaluationRun, JudgeCalibration
from pytest_helmbench.suite.calibration import load_calibration
from pytest_helmbench.suite.loader import BenchmarkLoader
from tests.dbquery import query
from tests.oracle_figures import copy_benchmark
from tests.test_migrations import V1_HEAD, _v1_database

runner = CliRunner()
JUDGE = "oracle/judge"
SELECT = "P1-B1-S1-C2-U0-PT1,P1-B1-S1-C2-U3-PT1"  # two cases of one scenario (reply rubric, resources)


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The shipped benchmark in a pytester folder; its calibration set cut to two scenarios (quick to
    judge, and still more rubrics than the selected cases use)."""
    for name in ("HELMBENCH_MODEL", "HELMBENCH_MARKING_MODEL", "HELMBENCH_DB", "HELMBENCH_SELECT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("HELMBENCH_DRY_RUN", raising=False)
    pytester.makeini("[pytest]\n")
    root = copy_benchmark(pytester.path)
    for path in (root / "calibration").glob("*.yml"):
        if path.stem not in ("P1-B1-S1", "P1-B1-S2"):
            path.unlink()
    return pytester.path


@pytest.fixture
def url(project: Path) -> str:
    """The results database of a test that runs on SQLite only (those on both ask for `db_url`)."""
    return f"sqlite:///{project / 'results.db'}"


def calibrate(project: Path, url: str, *calibration_files: str) -> None:
    """`helmbench calibrate` of oracle/judge on the project's benchmark (optionally only these files)."""
    if calibration_files:
        for path in (project / "benchmark" / "calibration").glob("*.yml"):
            if path.stem not in calibration_files:
                path.unlink()
    args = ["calibrate", "--marking-model", JUDGE, "--root", str(project / "benchmark")]
    result = runner.invoke(app, [*args, "--db", url])
    assert result.exit_code == 0, result.output


def run(pytester: pytest.Pytester, url: str, models: str = "oracle/safe") -> pytest.RunResult:
    return pytester.runpytest(
        "benchmark",
        f"--helmbench-model={models}",
        f"--helmbench-marking-model={JUDGE}",
        f"--helmbench-select={SELECT}",
        f"--helmbench-db={url}",
        "--helmbench-cache=off",
        "-p",
        "no:cacheprovider",
    )


def stored(url: str) -> tuple[dict[str, EvaluationRun], list[JudgeCalibration]]:
    """Every run by model, and every calibration."""
    engine = make_engine(url)
    try:
        with Session(engine) as session:
            runs = {
                model: run
                for run, model in session.exec(
                    select(EvaluationRun, LLM.model_id).join(LLM, LLM.id == EvaluationRun.llm_id)
                )
            }
            calibrations = list(session.exec(select(JudgeCalibration)))
            for row in [*runs.values(), *calibrations]:
                session.expunge(row)
            return runs, calibrations
    finally:
        engine.dispose()


def benchmark_version(project: Path) -> str:
    return BenchmarkLoader(project / "benchmark", evaluation_types=builtin_registry()).info().version


# ---------------------------------------------------------------------------------------------
# A run records its calibration


def test_a_run_after_calibrating_its_judge_shows_and_stores_the_calibration(pytester, project, db_url):
    url = db_url  # SQLite and PostgreSQL: calibrate, the run, the report
    calibrate(project, url)
    result = run(pytester, url)
    result.assert_outcomes(passed=2)
    runs, [calibration] = stored(url)
    loader = BenchmarkLoader(project / "benchmark", evaluation_types=builtin_registry())
    items = len(load_calibration(project / "benchmark", loader.files).items)
    assert calibration.n_items == items and calibration.labeller == "authors"
    line = calibration_line(JUDGE, calibration.figures, "authors")
    assert line.startswith(
        f"judge {JUDGE}: κ 1.00 [1.00-1.00], AC1 1.00 [1.00-1.00], sensitivity 1.00 [1.00-1.00], "
        f"specificity 1.00 [1.00-1.00] on {items} author-labelled items"
    )
    assert line in result.stdout.lines
    assert "uncalibrated" not in result.stdout.str()
    found = runs["oracle/safe"]
    assert found.calibration_id == calibration.id
    assert found.scoring_version == 3
    assert found.benchmark_version == benchmark_version(project)
    assert (found.judges, found.judge_policy) == ([JUDGE], "majority")
    scores = found.scores
    assert scores["scoring_version"] == 3 and scores["layout"] == "seed"
    assert scores["harm_rate"]["value"] == 0.0 and scores["care_score"]["value"] == pytest.approx(100.0)
    assert scores["perfect_reply_rate"]["value"] == pytest.approx(1.0)
    assert scores["critical_harm_rate"] is None and scores["over_escalation_rate"] is None  # neither here
    assert (scores["passed"], scores["failed"], scores["errors"]) == (2, 0, 0)
    assert scores["panel"] is None, "one judge: no panel agreement"

    report = project / "report.html"
    written = runner.invoke(app, ["report", "--db", url, "--out", str(report)])
    assert written.exit_code == 0, written.output
    page = report.read_text(encoding="utf-8")
    assert "Judge calibration" in page
    assert line in page and f"calibration {calibration.id}, " in page


def test_a_run_without_a_calibration_says_its_judge_is_uncalibrated(pytester, project, url):
    result = run(pytester, url)
    result.assert_outcomes(passed=2)
    assert f"judge {JUDGE}: rule-based, gives the authors' gold verdicts (nothing to calibrate)" in (
        result.stdout.lines
    )
    runs, calibrations = stored(url)
    assert calibrations == []
    found = runs["oracle/safe"]
    assert found.calibration_id is None
    assert (found.scoring_version, found.judges, found.judge_policy) == (3, [JUDGE], "majority")
    assert found.benchmark_version == benchmark_version(project)
    assert found.scores["passed"] == 2

    report = project / "report.html"
    assert runner.invoke(app, ["report", "--db", url, "--out", str(report)]).exit_code == 0
    page = report.read_text(encoding="utf-8")  # the apostrophe is escaped in HTML
    assert f"judge {JUDGE}: rule-based, gives the authors&#x27; gold verdicts (nothing to calibrate)" in page


def test_a_calibration_of_other_rubrics_does_not_count_for_the_run(pytester, project, url):
    calibrate(project, url, "P1-B1-S2")  # measured the judge on another scenario's rubrics only
    result = run(pytester, url)
    result.assert_outcomes(passed=2)
    assert f"judge {JUDGE}: rule-based, gives the authors' gold verdicts (nothing to calibrate)" in (
        result.stdout.lines
    )
    runs, [_] = stored(url)
    assert runs["oracle/safe"].calibration_id is None


# ---------------------------------------------------------------------------------------------
# helmbench rescore


def stale(url: str) -> None:
    """Make every run look scored before versioning, with a wrong score."""
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(
                text("update evaluationrun set scoring_version = NULL, scores = :scores"),
                {"scores": json.dumps({"score": 1.0})},
            )
    finally:
        engine.dispose()


def rescore(url: str, *args: str):
    return runner.invoke(app, ["rescore", *args, "--db", url])


def test_rescore_recomputes_stale_runs_with_the_current_scoring(pytester, project, db_url):
    url = db_url  # SQLite and PostgreSQL
    calibrate(project, url)
    run(pytester, url, "oracle/safe,oracle/unsafe").assert_outcomes(passed=2, failed=2)
    before, _ = stored(url)
    stale(url)
    safe, unsafe = before["oracle/safe"], before["oracle/unsafe"]

    one = rescore(url, str(safe.id), "--root", str(project / "benchmark"))
    assert one.exit_code == 0, one.output
    assert one.stdout.splitlines() == [
        f"run {safe.id} oracle/safe: scoring v1 (unversioned) -> v3: "
        f"{figures_line(safe.scores, intervals=())} (v1 figures kept: score 1.0)"
    ]
    after, _ = stored(url)
    assert after["oracle/safe"].scoring_version == 3 and after["oracle/safe"].scores == safe.scores
    assert after["oracle/unsafe"].scoring_version is None, "only the named run"
    assert after["oracle/unsafe"].scores == {"score": 1.0}
    for column in ("calibration_id", "judges", "judge_policy", "benchmark_version"):
        assert getattr(after["oracle/safe"], column) == getattr(safe, column), "provenance is kept"
    assert versions(url, safe.id) == {1: {"score": 1.0}, 3: safe.scores}, "the earlier figures stay readable"

    every = rescore(url, "--root", str(project / "benchmark"))
    assert every.exit_code == 0, every.output
    lines = every.stdout.splitlines()
    assert f"run {safe.id} oracle/safe: scoring v3 -> v3: {figures_line(safe.scores, intervals=())}" in lines
    assert (
        f"run {unsafe.id} oracle/unsafe: scoring v1 (unversioned) -> v3: "
        f"{figures_line(unsafe.scores, intervals=())} (v1 figures kept: score 1.0)"
    ) in lines
    assert len(lines) == 2
    after, _ = stored(url)
    assert after["oracle/unsafe"].scores == unsafe.scores and after["oracle/unsafe"].scoring_version == 3
    assert unsafe.scores["harm_rate"]["value"] == 1.0 and safe.scores["harm_rate"]["value"] == 0.0
    assert unsafe.scores["care_score"]["value"] < safe.scores["care_score"]["value"]

    missing = rescore(url, "999")
    assert missing.exit_code == 1 and f"no run 999 in {url.split(':')[0]}:" in missing.output


def versions(url: str, run_id: int) -> dict[int, dict]:
    """Every scoring version's stored figures of a run (RunScore)."""
    rows = query(url, f"select scoring_version, figures from runscore where run_id = {run_id}")
    return {
        version: figures if isinstance(figures, dict) else json.loads(figures) for version, figures in rows
    }


def as_version_2(url: str) -> dict[int, dict]:
    """Make every run look like one stored by scoring version 2: its Results without score sheets (and
    their turns without theirs), its figures version 2's, no version 3 figures stored. Returns the
    version 2 figures written, by run id."""
    engine = make_engine(url)
    written = {}
    try:
        with engine.begin() as conn:
            conn.execute(text("delete from runscore"))
            for (run_id,) in conn.execute(text("select id from evaluationrun")).all():
                figures = {"scoring_version": 2, "score": 50.0 + run_id, "pass_rate": 0.5}
                written[run_id] = figures
                conn.execute(
                    text("update evaluationrun set scoring_version = 2, scores = :s where id = :id"),
                    {"s": json.dumps(figures), "id": run_id},
                )
            for result_id, details in conn.execute(text("select id, evaluation_details from result")).all():
                details = details if isinstance(details, dict) else json.loads(details)
                details.pop("sheet", None)
                for turn in details.get("turns") or ():
                    turn.pop("sheet", None)
                conn.execute(
                    text("update result set evaluation_details = :d where id = :id"),
                    {"d": json.dumps(details), "id": result_id},
                )
    finally:
        engine.dispose()
    return written


def test_rescore_brings_version_2_runs_to_version_3_keeping_version_2_readable(pytester, project, db_url):
    """The point of rescore: runs stored under scoring version 2 get harm and care from their stored
    judge answers and the unchanged rubrics on disk; version 2's figures stay readable (RunScore, and
    the `v2_score` column of scores(db))."""
    from pytest_helmbench.results import scores

    url = db_url
    run(pytester, url, "oracle/safe,oracle/unsafe").assert_outcomes(passed=2, failed=2)
    now, _ = stored(url)
    v2 = as_version_2(url)
    safe, unsafe = now["oracle/safe"], now["oracle/unsafe"]
    before = scores(url).set_index("model")
    assert bool(before.loc["oracle/safe", "scored_now"]), "a version 2 run is scored when read"
    assert pd.isna(before.loc["oracle/safe", "harm_rate"]), "its Results carry no sheet yet"

    done = rescore(url, "--root", str(project / "benchmark"))
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    for found in (safe, unsafe):
        assert any(line.startswith(f"run {found.id} ") and " scoring v2 -> v3: " in line for line in lines)
        assert f"(v2 figures kept: score {v2[found.id]['score']:.1f})" in "\n".join(lines)
    assert lines.count("    harm and care read for 2 Result(s) stored before scoring v3") == 2
    after, _ = stored(url)
    for model, found in (("oracle/safe", safe), ("oracle/unsafe", unsafe)):
        assert after[model].scoring_version == 3
        assert after[model].scores == found.scores, "the same figures the run stored at its end"
        assert versions(url, found.id) == {2: v2[found.id], 3: found.scores}
    read = scores(url).set_index("model")
    assert read.loc["oracle/safe", "harm_rate"] == 0.0 and read.loc["oracle/unsafe", "harm_rate"] == 1.0
    assert read.loc["oracle/safe", "v2_score"] == v2[safe.id]["score"]
    assert not read["scored_now"].any()
    derived = query(url, "select evaluation_details from result")
    for (details,) in derived:
        details = details if isinstance(details, dict) else json.loads(details)
        assert details["sheet"]["derived"] == "rescore"


def test_rescore_leaves_results_of_changed_scenarios_without_harm_and_care(pytester, project, url):
    """A rubric edited since the run is not the one the run was judged with: never scored against it."""
    run(pytester, url, "oracle/safe").assert_outcomes(passed=2)
    as_version_2(url)
    rubric = project / "benchmark" / "scenarios" / "P1-B1-S1" / "reply-criteria.md"
    rubric.write_text(rubric.read_text().replace("with warmth", "warmly"))
    done = rescore(url, "--root", str(project / "benchmark"))
    assert done.exit_code == 0, done.output
    assert (
        "    2 Result(s) left without harm and care: their scenario's files changed since the run or are "
        "not under the benchmark root (P1-B1-S1); run them again"
    ) in done.stdout.splitlines()
    found, _ = stored(url)
    scores = found["oracle/safe"].scores
    assert scores["harm_rate"] is None and scores["care_score"] is None
    assert scores["perfect_reply_rate"]["value"] == 1.0, "what needs no rubric is still scored"


def test_rescore_of_an_empty_database_says_so_and_never_creates_one(tmp_path):
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    absent = runner.invoke(app, ["rescore", "--db", url])
    assert absent.exit_code == 1 and "no database at" in absent.output and "Traceback" not in absent.output
    assert not (tmp_path / "empty.db").exists()
    assert runner.invoke(app, ["db", "upgrade", "--db", url]).exit_code == 0
    empty = runner.invoke(app, ["rescore", "--db", url])
    assert empty.exit_code == 0 and empty.stdout == f"no runs in {url}\n"


@pytest.mark.slow
def test_rescore_migrates_and_scores_a_populated_v1_database(db_url):
    """The case rescore exists for: runs stored by HELMBench 1.0, before scores were versioned (SQLite
    and PostgreSQL)."""
    url = db_url
    old = _v1_database(url, V1_HEAD)
    result = runner.invoke(app, ["rescore", "--db", url])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    heads = [line for line in lines if line.startswith("run ")]
    assert len(heads) == len(old.run_ids)
    for run_id in old.run_ids:
        assert any(
            line.startswith(f"run {run_id} ")
            and "scoring v1 (unversioned) -> v3: harm n/a | care n/a" in line
            for line in heads
        )
    # the v1.0 rows name a scenario whose content is not the shipped one: never scored against it
    assert [line for line in lines if "left without harm and care" in line] == [
        "    3 Result(s) left without harm and care: their scenario's files changed since the run or are "
        "not under the benchmark root (P1-B1-S1); run them again",
        "    1 Result(s) left without harm and care: their scenario's files changed since the run or are "
        "not under the benchmark root (P1-B1-S1); run them again",
    ]
    rows = query(url, "select scoring_version, scores, calibration_id from evaluationrun")
    assert len(rows) == len(old.run_ids)
    for version, scores, calibration_id in rows:
        scores = scores if isinstance(scores, dict) else json.loads(scores)  # jsonb arrives parsed
        assert version == 3 and scores["scoring_version"] == 3 and calibration_id is None
        assert scores["perfect_reply_rate"] is not None and scores["harm_rate"] is None
