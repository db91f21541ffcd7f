"""What a run records about how it was scored (issue #11, items 5 and 6): its judge's calibration in the
terminal summary, the stored EvaluationRun columns (calibration, scoring and benchmark versions, judges,
policy, headline scores), the HTML report's judge table, and `helmbench rescore`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlmodel import Session, select
from typer.testing import CliRunner

from pytest_helmbench.cli import app
from pytest_helmbench.evaluation.builtin import builtin_registry
from pytest_helmbench.reporting.calibration_figures import calibration_line
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
    assert found.scoring_version == 2
    assert found.benchmark_version == benchmark_version(project)
    assert (found.judges, found.judge_policy) == ([JUDGE], "majority")
    scores = found.scores
    assert scores["scoring_version"] == 2 and scores["score"] == pytest.approx(100.0)
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
    assert f"judge {JUDGE}: uncalibrated (run `helmbench calibrate --marking-model {JUDGE}`)" in (
        result.stdout.lines
    )
    runs, calibrations = stored(url)
    assert calibrations == []
    found = runs["oracle/safe"]
    assert found.calibration_id is None
    assert (found.scoring_version, found.judges, found.judge_policy) == (2, [JUDGE], "majority")
    assert found.benchmark_version == benchmark_version(project)
    assert found.scores["passed"] == 2

    report = project / "report.html"
    assert runner.invoke(app, ["report", "--db", url, "--out", str(report)]).exit_code == 0
    assert f"judge {JUDGE}: uncalibrated" in report.read_text(encoding="utf-8")


def test_a_calibration_of_other_rubrics_does_not_count_for_the_run(pytester, project, url):
    calibrate(project, url, "P1-B1-S2")  # measured the judge on another scenario's rubrics only
    result = run(pytester, url)
    result.assert_outcomes(passed=2)
    assert f"judge {JUDGE}: uncalibrated (run `helmbench calibrate --marking-model {JUDGE}`)" in (
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

    one = rescore(url, str(safe.id))
    assert one.exit_code == 0, one.output
    assert one.stdout.splitlines() == [
        f"run {safe.id} oracle/safe: scoring v1 (unversioned) -> v2: score {safe.scores['score']:.1f}"
    ]
    after, _ = stored(url)
    assert after["oracle/safe"].scoring_version == 2 and after["oracle/safe"].scores == safe.scores
    assert after["oracle/unsafe"].scoring_version is None, "only the named run"
    assert after["oracle/unsafe"].scores == {"score": 1.0}
    for column in ("calibration_id", "judges", "judge_policy", "benchmark_version"):
        assert getattr(after["oracle/safe"], column) == getattr(safe, column), "provenance is kept"

    every = rescore(url)
    assert every.exit_code == 0, every.output
    lines = every.stdout.splitlines()
    assert f"run {safe.id} oracle/safe: scoring v2 -> v2: score {safe.scores['score']:.1f}" in lines
    assert (
        f"run {unsafe.id} oracle/unsafe: scoring v1 (unversioned) -> v2: score {unsafe.scores['score']:.1f}"
        in lines
    )
    assert len(lines) == 2
    after, _ = stored(url)
    assert after["oracle/unsafe"].scores == unsafe.scores and after["oracle/unsafe"].scoring_version == 2
    assert unsafe.scores["score"] < safe.scores["score"]

    missing = rescore(url, "999")
    assert missing.exit_code == 1 and f"no run 999 in {url.split(':')[0]}:" in missing.output


def test_rescore_of_an_empty_database_says_so_and_never_creates_one(tmp_path):
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    absent = runner.invoke(app, ["rescore", "--db", url])
    assert absent.exit_code == 1 and "no database at" in absent.output and "Traceback" not in absent.output
    assert not (tmp_path / "empty.db").exists()
    assert runner.invoke(app, ["db", "upgrade", "--db", url]).exit_code == 0
    empty = runner.invoke(app, ["rescore", "--db", url])
    assert empty.exit_code == 0 and empty.stdout == f"no runs in {url}\n"


def test_rescore_migrates_and_scores_a_populated_v1_database(db_url):
    """The case rescore exists for: runs stored by HELMBench 1.0, before scores were versioned (SQLite
    and PostgreSQL)."""
    url = db_url
    old = _v1_database(url, V1_HEAD)
    result = runner.invoke(app, ["rescore", "--db", url])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == len(old.run_ids)
    for run_id in old.run_ids:
        assert any(
            line.startswith(f"run {run_id} ") and "scoring v1 (unversioned) -> v2: score " in line
            for line in lines
        )
    rows = query(url, "select scoring_version, scores, calibration_id from evaluationrun")
    assert len(rows) == len(old.run_ids)
    for version, scores, calibration_id in rows:
        scores = scores if isinstance(scores, dict) else json.loads(scores)  # jsonb arrives parsed
        assert version == 2 and scores["scoring_version"] == 2 and calibration_id is None
