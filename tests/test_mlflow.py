"""`--helmbench-mlflow` (issue #29, point 4): each stored run logged as one MLflow run, read back with
MLflow's own client from a local file store under tmp_path, and compared with what the database holds.

MLflow is in the dev extra, so these tests require it (never a silent skip). Nothing here leaves the
machine: the tracking URI is a `file:` store (MLflow 3 asks for MLFLOW_ALLOW_FILE_STORE to use one), an
unreachable server is a closed port on 127.0.0.1, and MLflow's usage telemetry is off.
"""

from __future__ import annotations

import re
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from sqlmodel import Session

from pytest_helmbench import __version__
from pytest_helmbench.reporting.harm_care import FIGURES, by
from pytest_helmbench.reporting.html_report import render_report
from pytest_helmbench.storage.engine import make_engine, safe_url
from pytest_helmbench.storage.queries import ReportData, load_report_data
from tests.benchfiles import MODELS, write_benchmark
from tests.openrouter_server import Reply
from tests.oracle_figures import copy_benchmark

if TYPE_CHECKING:
    from mlflow.entities import Run
    from mlflow.tracking import MlflowClient


@pytest.fixture(scope="module", autouse=True)
def _mlflow_imported_first() -> None:
    """Import MLflow at module scope, before any in-process pytester run snapshots sys.modules (see
    tests/conftest.py), yet only in the worker that runs these tests: importing it at collection cost
    every worker of every tier seconds."""
    import mlflow.entities  # noqa: F401
    import mlflow.tracking  # noqa: F401


def client_for(uri: str) -> MlflowClient:
    from mlflow.tracking import MlflowClient

    return MlflowClient(uri)


GOOD = {"category": "ANSWER", "response": "It is the mitochondria."}
# an ordinary scenario, a critical one, a control (as tests/test_report_json.py)
ORACLE_CASES = "P1-B1-S1-C2-U0-PT1,P1-B1-S3-C1-U0-PT1,P1-B3-S1-C2-U0-PT1,P1-B3-S1-C2-U1-PT2"
TWO_MODELS = MODELS + "  - id: anthropic/claude-haiku\n"


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """A local MLflow file store under tmp_path as the active tracking URI."""
    uri = (tmp_path / "mlruns").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    for name in ("MLFLOW_EXPERIMENT_NAME", "MLFLOW_EXPERIMENT_ID", "HELMBENCH_MLFLOW"):
        monkeypatch.delenv(name, raising=False)
    return uri


def _bench(pytester: pytest.Pytester, models: str = MODELS) -> None:
    pytester.makeini("[pytest]\n")
    write_benchmark(pytester.path / "benchmark", scenarios=("P1-B1-S1", "P1-B2-S1"), models=models)


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("benchmark", "-p", "no:randomly", "--helmbench-cache=off", *args)


def _stored(pytester: pytest.Pytester, run_id: int) -> ReportData:
    url = f"sqlite:///{pytester.path / 'helmbench.db'}"
    engine = make_engine(url)
    try:
        with Session(engine) as session:
            return load_report_data(session, [run_id], source=safe_url(url))
    finally:
        engine.dispose()


def _no_timestamp(page: str) -> str:
    return re.sub(r"Generated \d{4}-\d\d-\d\d \d\d:\d\d UTC", "Generated -", page)


def _oracle_run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *args: str) -> pytest.RunResult:
    """oracle/safe and oracle/unsafe on the shipped benchmark's four cases (an ordinary scenario, a
    critical one, a control; behaviours P1-B1 and P1-B3), judged by oracle/judge: offline, and every
    figure has something to stand on."""
    for name in ("HELMBENCH_MODEL", "HELMBENCH_MARKING_MODEL", "HELMBENCH_DB", "HELMBENCH_SELECT"):
        monkeypatch.delenv(name, raising=False)
    pytester.makeini("[pytest]\n")
    copy_benchmark(pytester.path)
    return pytester.runpytest(
        "benchmark",
        "--helmbench-model=oracle/safe,oracle/unsafe",
        "--helmbench-marking-model=oracle/judge",
        f"--helmbench-select={ORACLE_CASES}",
        "--helmbench-cache=off",
        "-p",
        "no:cacheprovider",
        *args,
    )


def test_each_stored_run_is_an_mlflow_run_with_the_stored_figures_and_its_report(
    pytester, monkeypatch, store, tmp_path
):
    result = _oracle_run(pytester, monkeypatch, "--helmbench-mlflow")
    result.assert_outcomes(passed=4, failed=4)
    out = result.stdout.str()
    assert "Traceback" not in out

    client = client_for(store)
    experiment = client.get_experiment_by_name("helmbench")
    assert experiment is not None
    logged = {r.data.params["model"]: r for r in client.search_runs([experiment.experiment_id])}
    assert sorted(logged) == ["oracle/safe", "oracle/unsafe"]
    for run_id, model in ((1, "oracle/safe"), (2, "oracle/unsafe")):
        mlflow_run = logged[model]
        assert (
            f"MLflow: run {run_id} ({model}) logged as {mlflow_run.info.run_id} in experiment 'helmbench' "
            f"at {store}" in out
        )
        _check_logged(client, mlflow_run, _stored(pytester, run_id), tmp_path / model)
    unsafe = logged["oracle/unsafe"].data.metrics
    assert unsafe["harm_rate"] > 0 and unsafe["behaviour.P1-B1.harm_rate"] > 0  # not vacuous
    assert logged["oracle/safe"].data.metrics["care_score"] == 100.0
    assert [logged[m].data.tags["helmbench.gate"] for m in ("oracle/safe", "oracle/unsafe")] == [
        "passed",
        "failed",
    ]


def _check_logged(client: MlflowClient, logged: Run, data: ReportData, folder: Path) -> None:
    """The MLflow run holds the stored run's params, tags, figures and report."""
    (run,) = data.runs
    scores = run.scores
    assert scores is not None and run.scoring_version == 3
    assert logged.info.status == "FINISHED" and logged.info.run_name == f"{run.model} (run {run.id})"
    assert logged.data.params == {
        "model": run.model,
        "helmbench_run_id": str(run.id),
        "layout": "seed",
        "benchmark_version": run.benchmark_version,
        "judges": "oracle/judge",
        "judge_policy": "majority",
        "scoring_version": "3",
        "helmbench_version": __version__,
    }
    tags = logged.data.tags
    assert tags["helmbench.run_id"] == str(run.id) and tags["helmbench.status"] == "completed"
    assert tags["helmbench.session_id"] == run.session_id and tags["helmbench.gate"] == scores["gate"]

    expected: dict[str, float] = {}
    for name in FIGURES:
        assert scores[name] is not None, name  # every figure stands on something here
        expected[name] = scores[name]["value"]
        expected[f"{name}.ci_low"] = scores[name]["ci_low"]
        expected[f"{name}.ci_high"] = scores[name]["ci_high"]
    for name in ("passed", "failed", "errors", "skipped", "harmed", "harm_unknown"):
        expected[name] = scores[name]
    expected |= {"cost_usd": run.cost_usd, "prompt_tokens": run.prompt_tokens}
    behaviours = by(data.results, "behaviour")
    assert sorted(behaviours) == ["P1-B1", "P1-B3"]
    for behaviour, figures in behaviours.items():
        for name in ("harm_rate", "care_score"):
            figure = figures.figure(name)
            assert figure is not None
            expected[f"behaviour.{behaviour}.{name}"] = figure.value
    metrics = logged.data.metrics
    assert {key: metrics.get(key) for key in expected} == pytest.approx(expected)

    (artifact,) = client.list_artifacts(logged.info.run_id)
    assert artifact.path == "report.html"
    folder.mkdir(parents=True)
    page = Path(client.download_artifacts(logged.info.run_id, "report.html", str(folder))).read_text()
    assert _no_timestamp(page) == _no_timestamp(render_report(data))  # the report of that run alone


def test_under_xdist_only_the_controller_logs_one_mlflow_run_per_model(
    pytester, helm_env, store, monkeypatch
):
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "safety nightly")
    _bench(pytester, TWO_MODELS)
    helm_env.add_rule(reply=Reply.ok(GOOD))
    result = _run(pytester, "--helmbench-mlflow", "-n", "2")
    result.assert_outcomes(passed=32)
    client = client_for(store)
    assert client.get_experiment_by_name("helmbench") is None
    experiment = client.get_experiment_by_name("safety nightly")
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id])
    found = sorted((r.data.params["model"], r.data.tags["helmbench.run_id"]) for r in runs)
    assert len(found) == 2 and [model for model, _ in found] == [
        "anthropic/claude-haiku",
        "openai/gpt-4o-mini",
    ]
    assert sorted(run_id for _, run_id in found) == ["1", "2"]
    assert result.stdout.str().count("MLflow: run ") == 2


def test_the_environment_twin_and_a_new_sqlite_store_with_nothing_of_mlflow_s_chatter(
    pytester, helm_env, store, monkeypatch, tmp_path
):
    """MLFLOW_TRACKING_URI=sqlite:///… (MLflow 3's recommended local store): MLflow creates its tables
    without its INFO lines in pytest's output, and SQLAlchemy's warnings inside MLflow stay out of the
    warnings summary."""
    sqlite = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", sqlite)
    monkeypatch.setenv("HELMBENCH_MLFLOW", "1")
    _bench(pytester)
    helm_env.add_rule(reply=Reply.ok(GOOD))
    result = _run(pytester, "--helmbench-select=P1-B1")
    result.assert_outcomes(passed=8)
    out = result.stdout.str() + result.stderr.str()
    assert "mlflow.store" not in out and "SADeprecationWarning" not in out
    assert f"in experiment 'helmbench' at {sqlite}" in out
    client = client_for(sqlite)
    experiment = client.get_experiment_by_name("helmbench")
    assert experiment is not None and len(client.search_runs([experiment.experiment_id])) == 1


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_server_is_one_warning_line_and_the_results_are_stored(
    pytester, helm_env, store, monkeypatch
):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{_closed_port()}")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    _bench(pytester)
    helm_env.add_rule(reply=Reply.ok(GOOD))
    result = _run(pytester, "--helmbench-mlflow", "--helmbench-fail-under=50")
    result.assert_outcomes(passed=16)
    assert result.ret == 0  # the verdict stands: MLflow never changes the exit status
    out = result.stdout.str()
    warnings = [line for line in out.splitlines() if "MLflow" in line]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("warning: MLflow: run(s) 1 (openai/gpt-4o-mini) not logged: ")
    assert warnings[0].endswith("the results are stored as usual")
    assert "Traceback" not in out and "Traceback" not in result.stderr.str()
    (run,) = _stored(pytester, 1).runs
    assert run.status == "completed" and run.scores is not None and run.scores["passed"] == 16


def test_without_mlflow_installed_the_flag_is_a_usage_error_before_anything_is_sent(
    pytester, helm_env, store, monkeypatch
):
    monkeypatch.setitem(sys.modules, "mlflow", None)  # `import mlflow` fails, find_spec finds nothing
    _bench(pytester)
    result = _run(pytester, "--helmbench-mlflow")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert (
        "--helmbench-mlflow needs MLflow, which is not installed: pip install 'pytest-helmbench[mlflow]'"
        in result.stderr.str()
    )
    assert helm_env.chat_requests == []


def test_without_the_flag_nothing_is_logged(pytester, helm_env, store):
    import mlflow

    _bench(pytester)
    helm_env.add_rule(reply=Reply.ok(GOOD))
    result = _run(pytester)
    result.assert_outcomes(passed=16)
    assert "MLflow" not in result.stdout.str()
    assert mlflow.get_tracking_uri() == store
    assert client_for(store).get_experiment_by_name("helmbench") is None


def test_a_keyed_run_is_logged_once_whole_by_the_shard_that_completes_it(pytester, helm_env, store):
    _bench(pytester)
    helm_env.add_rule(reply=Reply.ok(GOOD))
    keyed = ("--helmbench-mlflow", "--helmbench-run-key=ci-7")
    first = _run(pytester, *keyed, "--helmbench-shard=1/2")
    first.assert_outcomes(passed=8)
    said = "MLflow: run 1 (openai/gpt-4o-mini) is still running in other shards: the shard that completes it"
    assert said in first.stdout.str()
    client = client_for(store)
    assert client.get_experiment_by_name("helmbench") is None  # nothing logged yet
    last = _run(pytester, *keyed, "--helmbench-shard=2/2")
    last.assert_outcomes(passed=8)
    assert "MLflow: run 1 (openai/gpt-4o-mini) logged as " in last.stdout.str()
    experiment = client.get_experiment_by_name("helmbench")
    assert experiment is not None
    (logged,) = client.search_runs([experiment.experiment_id])
    assert logged.data.metrics["passed"] == 16  # the whole run, every shard's results
    assert logged.data.tags["helmbench.run_id"] == "1"


def test_an_interrupted_run_is_logged_as_killed(pytester, helm_env, store):
    _bench(pytester)
    helm_env.add_rule(reply=Reply.ok({"category": "HANDOFF", "response": "Please call a helpline."}))
    _run(pytester, "--helmbench-mlflow", "-x").assert_outcomes(failed=1)
    client = client_for(store)
    experiment = client.get_experiment_by_name("helmbench")
    assert experiment is not None
    (logged,) = client.search_runs([experiment.experiment_id])
    assert logged.info.status == "KILLED" and logged.data.tags["helmbench.status"] == "interrupted"
    assert logged.data.metrics["failed"] == 1 and logged.data.metrics["perfect_reply_rate"] == 0.0
