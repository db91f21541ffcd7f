"""`--helmbench-mlflow`: each run a session stored, logged as one MLflow run (the `mlflow` extra).

At the end of a session whose results were stored, each of its runs becomes one run in MLflow's
active tracking URI (`MLFLOW_TRACKING_URI`, else MLflow's default), in the experiment named by
`MLFLOW_EXPERIMENT_ID` or `MLFLOW_EXPERIMENT_NAME`, else `helmbench` (created when missing):

- params: model, HELMBench run id, layout, benchmark version, judges and their policy, scoring version,
  HELMBench version;
- metrics: every stored headline figure (`harm_rate`, … each with `.ci_low` and `.ci_high`), the counts,
  the panel's agreement, tokens and cost, and each behaviour's `behaviour.P1-B1.harm_rate` and
  `behaviour.P1-B1.care_score`;
- tags: `helmbench.run_id`, `helmbench.session_id`, `helmbench.status`, `helmbench.gate` (the critical
  gate: passed, failed or incomplete; absent without critical cases) and MLflow's own source tags;
- the run's HTML report (`helmbench report --run-id N`) as the artifact `report.html`.

The figures are read back from the database after they were stored, so MLflow holds exactly what
`helmbench report` shows. MLflow is imported here lazily; what it raises is one line
(`MlflowLogError`), never a traceback: the results are in the database whatever MLflow does.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import tempfile
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import HelmbenchError
from ..redaction import redact

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

    from ..execution.outcome import CaseResult
    from ..storage.queries import ReportData, RunInfo

INSTALL = "pip install 'pytest-helmbench[mlflow]'"
#: The experiment used when neither MLFLOW_EXPERIMENT_ID nor MLFLOW_EXPERIMENT_NAME names one.
EXPERIMENT = "helmbench"
REPORT = "report.html"
#: The headline's counts, logged as metrics under the same names.
COUNTS = (
    "passed",
    "failed",
    "errors",
    "skipped",
    "harmed",
    "harm_unknown",
    "critical_failed_raw",
    "critical_failed_confirmed",
)
#: The figures logged per behaviour (the breakdown has no intervals).
BEHAVIOUR_FIGURES = ("harm_rate", "care_score")
#: A HELMBench run's status as the MLflow run's.
STATUS = {"completed": "FINISHED", "interrupted": "KILLED"}
MESSAGE_AT_MOST = 1000  # MLflow names its remedy at the end of a long first line


class MlflowLogError(HelmbenchError):
    """MLflow could not take a run (unreachable server, refused store, deleted experiment)."""


def missing_mlflow() -> str | None:
    """Why --helmbench-mlflow cannot work here (MLflow not installed), or None. Not imported yet."""
    if importlib.util.find_spec("mlflow") is None:
        return f"--helmbench-mlflow needs MLflow, which is not installed: {INSTALL}"
    return None


@dataclass(frozen=True)
class Logged:
    """One HELMBench run as MLflow now holds it."""

    run_id: int
    model: str
    mlflow_run_id: str


@dataclass
class MlflowOutcome:
    """What the end of a session logged: the runs logged, where, and the first failure."""

    logged: list[Logged] = field(default_factory=list)
    not_logged: list[tuple[int, str]] = field(default_factory=list)  # (run id, model)
    experiment: str = EXPERIMENT
    tracking_uri: str = ""
    error: str | None = None

    def lines(self) -> list[str]:
        """One line per logged run and one warning line when MLflow failed (the results are stored)."""
        found = [
            f"MLflow: run {run.run_id} ({run.model}) logged as {run.mlflow_run_id} in experiment "
            f"{self.experiment!r} at {self.tracking_uri}"
            for run in self.logged
        ]
        if self.error is not None:
            runs = ", ".join(f"{run_id} ({model})" for run_id, model in self.not_logged) or "none"
            found.append(
                f"warning: MLflow: run(s) {runs} not logged: {self.error}; the results are stored as usual"
            )
        return found


def one_line(exc: BaseException) -> str:
    """An exception as one line without credentials: its class and the first line of its message."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    if len(first) > MESSAGE_AT_MOST:
        first = first[: MESSAGE_AT_MOST - 1] + "…"
    return redact(f"{exc.__class__.__name__}: {first}" if first else exc.__class__.__name__)


def _ms(moment: datetime | None) -> int | None:
    if moment is None:
        return None
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return int(aware.timestamp() * 1000)


def run_params(run: RunInfo) -> dict[str, str]:
    """What the run was: its model and settings (MLflow params are strings)."""
    from .. import __version__

    scores = run.scores or {}
    found = {
        "model": run.model,
        "helmbench_run_id": str(run.id),
        "layout": str(scores.get("layout") or ""),
        "benchmark_version": run.benchmark_version or "",
        "judges": ",".join(run.judges),
        "judge_policy": run.judge_policy or "",
        "scoring_version": str(run.scoring_version or ""),
        "helmbench_version": __version__,
    }
    return {key: value for key, value in found.items() if value}


def run_metrics(run: RunInfo, results: Sequence[CaseResult]) -> dict[str, float]:
    """The run's stored headline figures with their intervals, its counts, panel agreement, tokens and
    cost, and the harm rate and care score of each behaviour (figures with nothing scored are left out)."""
    from .harm_care import FIGURES, by

    scores = run.scores or {}
    found: dict[str, float] = {}
    for name in FIGURES:
        figure = scores.get(name)
        if isinstance(figure, dict):
            for part, key in (("value", name), ("ci_low", f"{name}.ci_low"), ("ci_high", f"{name}.ci_high")):
                if figure.get(part) is not None:
                    found[key] = float(figure[part])
    found |= {name: float(scores[name]) for name in COUNTS if scores.get(name) is not None}
    panel = scores.get("panel") or {}
    found |= {
        f"panel.{k}": float(panel[k]) for k in ("kappa", "ac1", "items", "judges") if panel.get(k) is not None
    }
    found |= {
        "cost_usd": run.cost_usd,
        "judge_cost_usd": run.judge_cost_usd,
        "prompt_tokens": float(run.prompt_tokens),
        "completion_tokens": float(run.completion_tokens),
    }
    for behaviour, figures in by(results, "behaviour").items():
        for name in BEHAVIOUR_FIGURES:
            figure = figures.figure(name)
            if figure is not None:
                found[f"behaviour.{behaviour}.{name}"] = figure.value
    return found


def run_tags(run: RunInfo) -> dict[str, str]:
    """Which HELMBench run and session this is, how it ended, and its critical gate (when it had one)."""
    found = {
        "helmbench.run_id": str(run.id),
        "helmbench.session_id": run.session_id,
        "helmbench.status": str(run.status),
    }
    gate = (run.scores or {}).get("gate")
    return found | ({"helmbench.gate": str(gate)} if gate else {})


def experiment_id(client: MlflowClient) -> tuple[str, str]:
    """(id, name) of the experiment to log to: MLFLOW_EXPERIMENT_ID's, else MLFLOW_EXPERIMENT_NAME's or
    `helmbench`, created when it does not exist (by another process at the same time too)."""
    from mlflow.exceptions import MlflowException

    wanted = os.environ.get("MLFLOW_EXPERIMENT_ID", "").strip()
    if wanted:
        experiment = client.get_experiment(wanted)
        return experiment.experiment_id, experiment.name
    name = os.environ.get("MLFLOW_EXPERIMENT_NAME", "").strip() or EXPERIMENT
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        try:
            return client.create_experiment(name), name
        except MlflowException:
            experiment = client.get_experiment_by_name(name)  # created by another process meanwhile
            if experiment is None:
                raise
    if experiment.lifecycle_stage != "active":
        raise MlflowLogError(f"the MLflow experiment {name!r} is deleted: restore it or name another")
    return experiment.experiment_id, name


def log_run(client: MlflowClient, experiment: str, data: ReportData) -> str:
    """One HELMBench run (`data` holds it alone) as a new MLflow run; its id. A failure after the run
    was created marks it FAILED (as far as MLflow still answers) and is raised."""
    from mlflow.entities import Metric, Param
    from mlflow.tracking.context.registry import resolve_tags

    from .html_report import render_report

    run = data.runs[0]
    created = client.create_run(
        experiment,
        start_time=_ms(run.started_at),
        tags=resolve_tags(run_tags(run)),
        run_name=f"{run.model} (run {run.id})",
    )
    mlflow_id = created.info.run_id
    try:
        now = int(time.time() * 1000)
        metrics = [
            Metric(key, value, now, 0) for key, value in sorted(run_metrics(run, data.results).items())
        ]
        params = [Param(key, value) for key, value in run_params(run).items()]
        client.log_batch(mlflow_id, metrics=metrics, params=params)
        with tempfile.TemporaryDirectory(prefix="helmbench-mlflow-") as folder:
            page = Path(folder) / REPORT
            page.write_text(render_report(data), encoding="utf-8")
            client.log_artifact(mlflow_id, str(page))
        client.set_terminated(mlflow_id, STATUS.get(str(run.status), "FINISHED"), _ms(run.finished_at))
    except BaseException:
        try:
            client.set_terminated(mlflow_id, "FAILED")
        except Exception:  # noqa: BLE001 - the first failure is the one to say
            pass
        raise
    return mlflow_id


def _report_data(db_url: str, run_id: int) -> ReportData:
    from sqlmodel import Session

    from ..storage.engine import make_engine, safe_url
    from ..storage.queries import load_report_data

    engine = make_engine(db_url)
    try:
        with Session(engine) as session:
            return load_report_data(session, [run_id], source=safe_url(db_url))
    finally:
        engine.dispose()


def log_runs(db_url: str, runs: dict[str, int]) -> MlflowOutcome:
    """Each stored run (model -> run id) as an MLflow run, in run id order; stops at the first failure
    (an unreachable server would make every run wait out MLflow's retries), which is said, not raised."""
    ordered = sorted((run_id, model) for model, run_id in runs.items())
    outcome = MlflowOutcome(not_logged=list(ordered))
    try:
        import mlflow  # noqa: F401 - configures its loggers (on first import), which quiet_mlflow then quiets
    except ImportError as exc:
        outcome.error = one_line(exc)
        return outcome
    with quiet_mlflow():
        _log_each(db_url, ordered, outcome)
    return outcome


@contextmanager
def quiet_mlflow() -> Iterator[None]:
    """MLflow's own chatter kept out of the session's output: its INFO lines (`Creating initial MLflow
    database tables...`) and the warnings its libraries raise inside it (SQLAlchemy's deprecations)
    say nothing a HELMBench user can act on; what its log says at WARNING and above still shows."""
    logger = logging.getLogger("mlflow")
    level = logger.level
    logger.setLevel(max(level, logging.WARNING))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def _log_each(db_url: str, ordered: list[tuple[int, str]], outcome: MlflowOutcome) -> None:
    try:
        import mlflow
        from mlflow.tracking import MlflowClient

        outcome.tracking_uri = redact(str(mlflow.get_tracking_uri()))
        client = MlflowClient()
        experiment, outcome.experiment = experiment_id(client)
        for run_id, model in ordered:
            data = _report_data(db_url, run_id)
            outcome.logged.append(Logged(run_id, model, log_run(client, experiment, data)))
            outcome.not_logged.remove((run_id, model))
    except Exception as exc:  # noqa: BLE001 - MLflow, its store or its server: one line, never a traceback
        outcome.error = one_line(exc)
