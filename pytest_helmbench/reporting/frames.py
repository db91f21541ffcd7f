"""Stored runs, Results and scores as typed pandas DataFrames (storage -> analysis).

The columns and their dtypes are storage/columns.py's, shared with `helmbench export`. pandas is an
optional extra: it is imported here, lazily, and its absence is one clear error naming the extra.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

from sqlmodel import Session, select

from ..errors import HelmbenchError
from ..execution.selection import subset_label
from ..storage.columns import RESULT_COLUMNS, RUN_COLUMNS, SCORE_COLUMNS, UTC_TIME, Column, result_values
from ..storage.queries import RunInfo, load_case_results, load_runs, resolve_run_ids
from ..storage.records import iter_export_rows
from ..storage.tables import EvaluationRun
from .headline import SCORING_VERSION, headline

if TYPE_CHECKING:
    import pandas


class MissingExtra(HelmbenchError, ImportError):
    """An optional dependency is not installed; the message names the extra that brings it."""


def require_pandas(extra: str = "pandas") -> ModuleType:
    """The pandas module, or MissingExtra saying which extra to install."""
    try:
        import pandas
    except ImportError:
        raise MissingExtra(f"pandas is not installed: pip install 'pytest-helmbench[{extra}]'") from None
    return pandas


def typed_frame(rows: Iterable[Sequence[Any]], columns: Sequence[Column]) -> pandas.DataFrame:
    """A DataFrame of the rows (values in column order) with each column's dtype, also when empty."""
    pd = require_pandas()
    values: list[list[Any]] = [[] for _ in columns]
    for row in rows:
        for into, value in zip(values, row, strict=True):
            into.append(value)
    data = {}
    for column, found in zip(columns, values, strict=True):
        if column.dtype == UTC_TIME:
            data[column.name] = pd.to_datetime(pd.Series(found, dtype=object), utc=True).dt.as_unit("us")
        else:
            data[column.name] = pd.Series(pd.array(found, dtype=column.dtype))
    return pd.DataFrame(data, columns=[column.name for column in columns])


def selected_runs(session: Session, run_ids: Sequence[int] | None) -> list[int]:
    """The given runs (an unknown one is a DatasetError), or every run: none in an empty database."""
    if run_ids is None:
        return sorted(session.exec(select(EvaluationRun.id)).all())
    return resolve_run_ids(session, run_ids)


def results_frame(session: Session, run_ids: Sequence[int] | None = None) -> pandas.DataFrame:
    """One row per stored Result of the runs (default: every run), exactly the rows `helmbench export`
    writes."""
    ids = selected_runs(session, run_ids)
    return typed_frame((result_values(r) for r in iter_export_rows(session, ids)), RESULT_COLUMNS)


def _runs(session: Session, run_ids: Sequence[int] | None) -> list[RunInfo]:
    ids = selected_runs(session, run_ids)
    return sorted(load_runs(session, ids), key=lambda run: run.id) if ids else []


def _run_row(run: RunInfo) -> tuple[Any, ...]:
    return (
        run.id,
        run.model,
        run.status,
        run.session_id,
        run.started_at,
        run.finished_at,
        run.total_tests,
        run.passed,
        run.failed,
        run.errors,
        run.skipped,
        run.prompt_tokens,
        run.completion_tokens,
        run.cost_usd,
        run.judge_cost_usd,
        run.total_cost_usd,
        run.unpriced.model_calls,
        run.unpriced.judge_calls,
        run.subset,
        subset_label(run.subset, run.selected_cases, run.benchmark_cases),
        run.selected_cases,
        run.benchmark_cases,
        run.benchmark_version,
        run.scoring_version,
        ",".join(run.judges),
        run.judge_policy,
        run.calibration_id,
        json.dumps(run.options, sort_keys=True, default=str),
    )


def runs_frame(session: Session, run_ids: Sequence[int] | None = None) -> pandas.DataFrame:
    """One row per run (default: every run), by run id: counters, accounting, selection, provenance."""
    return typed_frame((_run_row(run) for run in _runs(session, run_ids)), RUN_COLUMNS)


#: The figures' columns: each figure, then its interval's low and high end (SCORE_COLUMNS' order).
_FIGURE_ORDER = (
    "harm_rate",
    "care_score",
    "critical_harm_rate",
    "over_escalation_rate",
    "perfect_reply_rate",
)
V2 = 2


def _figure_cells(figures: dict[str, Any]) -> list[Any]:
    cells: list[Any] = []
    for name in _FIGURE_ORDER:
        found = figures.get(name) if isinstance(figures.get(name), dict) else {}
        cells += [found.get("value"), found.get("ci_low"), found.get("ci_high")]
    return cells


def _v2_cells(run: RunInfo) -> list[Any]:
    """Scoring version 2's score and pass rate, kept readable after the run was rescored."""
    found = run.scores_by_version.get(V2) or (run.scores if run.scoring_version == V2 else None) or {}
    return [found.get("score"), found.get("pass_rate")]


def _score_row(session: Session, run: RunInfo) -> tuple[Any, ...]:
    """The run's stored headline figures; a run that stored none of the current version (stored before
    it, or stopped before its end) is scored now with the current scoring (`scored_now`)."""
    figures, now = run.scores or {}, False
    if run.scoring_version != SCORING_VERSION or not figures:
        figures, now = headline(load_case_results(session, [run.id])), True
    return (
        run.id,
        run.model,
        run.status,
        subset_label(run.subset, run.selected_cases, run.benchmark_cases),
        run.selected_cases,
        run.benchmark_cases,
        SCORING_VERSION,
        now,
        figures.get("layout"),
        *_figure_cells(figures),
        *(int(figures.get(name) or 0) for name in ("passed", "failed", "errors", "skipped")),
        figures.get("gate"),
        int(figures.get("critical_failed_raw") or 0),
        int(figures.get("critical_failed_confirmed") or 0),
        *_v2_cells(run),
        run.cost_usd,
        run.judge_cost_usd,
        run.total_cost_usd,
        run.unpriced.total,
    )


def scores_frame(session: Session, run_ids: Sequence[int] | None = None) -> pandas.DataFrame:
    """One row per run (default: every run) with its harm rate, care score, critical harm rate,
    over-escalation rate and perfect-reply rate (scoring version 3), their 95% intervals, counts,
    critical gate, version 2's score where it had one, and cost, as the terminal summary and
    `helmbench report` show them."""
    return typed_frame((_score_row(session, run) for run in _runs(session, run_ids)), SCORE_COLUMNS)
