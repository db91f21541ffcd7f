"""Which Results make a model's headline, and what a run selected (storage -> reports).

A run may be a subset (`--lf`, `-k`, `-m`, `--helmbench-select`, `--helmbench-sample`, node ids,
`--deselect`): shown alone as "the latest run" it would describe 25 reruns as the model's score. So
`helmbench report` headlines each model with the latest Result of every case across the model's runs
of the same benchmark and settings (the latest run's), and says how much of the benchmark that covers.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import case, false, func
from sqlmodel import Session, select

from ..execution.unpriced import Unpriced
from ..status import Status
from .tables import EvaluationRun, Result

#: The recorded options that decide the answers and verdicts: runs differing in any of them (or in
#: their benchmark) never share a headline. Concurrency, cache, retries, ceilings and selection do not.
SETTINGS = (
    "model",
    "marking_model",
    "marking_models",
    "judge_policy",
    "critical_votes",
    "base_url",
    "api",
    "temperature",
    "max_tokens",
    "seed",
    "repeat",
    "user_model",
)


@dataclass(frozen=True)
class Coverage:
    """How much of the benchmark a model's headline stands on: N of M cases, from K runs."""

    model: str
    cases: int  # distinct case codes with a Result in the headline
    benchmark_cases: int | None  # what the benchmark holds for the model (the latest run's count)
    run_ids: tuple[int, ...]  # the runs that gave at least one of those Results

    @property
    def complete(self) -> bool:
        return self.benchmark_cases is not None and self.cases >= self.benchmark_cases

    def text(self) -> str:
        """`16346 of 16346 cases, from 2 runs` (`25 cases, from 1 run` when the total is unknown)."""
        of = f" of {self.benchmark_cases}" if self.benchmark_cases is not None else ""
        runs = len(self.run_ids)
        return f"{self.cases}{of} cases, from {runs} run{'s' if runs != 1 else ''}"


def settings_key(benchmark_id: int, options: dict[str, Any] | None) -> str:
    """Runs with equal keys measured the same thing: their Results may make one headline."""
    chosen = {name: (options or {}).get(name) for name in SETTINGS}
    return json.dumps([benchmark_id, chosen], sort_keys=True, default=str)


def headline_run_ids(session: Session) -> dict[int, list[int]]:
    """For the latest run of each model: it and the earlier runs of that model with its benchmark and
    settings (oldest first), keyed by the latest run's id."""
    rows = session.exec(
        select(EvaluationRun.id, EvaluationRun.llm_id, EvaluationRun.benchmark_id, EvaluationRun.options)
    ).all()
    latest: dict[int, Any] = {}
    for row in rows:
        if row[1] not in latest or row[0] > latest[row[1]][0]:
            latest[row[1]] = row
    found: dict[int, list[int]] = {}
    for llm_id, anchor in latest.items():
        key = settings_key(anchor[2], anchor[3])
        found[anchor[0]] = sorted(
            row[0] for row in rows if row[1] == llm_id and settings_key(row[2], row[3]) == key
        )
    return dict(sorted(found.items()))


def _rank(row: Any) -> tuple[bool, int, int]:
    """A verdict (passed/failed) beats an error or skip, then the latest run, then the latest row: an
    error or skip says nothing about the answer, so it never hides an earlier pass or failure."""
    return (Status(row.status).scored, row.run_id, row.result_id)


def pick_headline(rows: Iterable[Any]) -> list[Any]:
    """The one Result per (model, case, repeat) a headline counts (rows carry model, case_code,
    repeat, status, run_id and result_id), in storage order."""
    best: dict[tuple[str, str, int, str], Any] = {}
    for row in rows:
        key = (row.model, row.case_code, row.repeat or 0, getattr(row, "layout", None) or "seed")
        if key not in best or _rank(row) > _rank(best[key]):
            best[key] = row
    return sorted(best.values(), key=lambda row: row.result_id)


def coverage_of(model: str, kept: Sequence[Any], benchmark_cases: int | None, anchor_run: int) -> Coverage:
    runs = sorted({row.run_id for row in kept} | {anchor_run})
    return Coverage(model, len({row.case_code for row in kept}), benchmark_cases, tuple(runs))


def unpriced_calls(session: Session, run_ids: Sequence[int]) -> dict[int, Unpriced]:
    """Per run: answered model calls stored without a cost (cached answers cost nothing now), and
    Results whose judge answered (tokens known) without a cost."""
    if not run_ids:
        return {}
    model = func.sum(
        case(
            (Result.cost_usd.is_(None) & Result.latency_ms.is_not(None) & (Result.cached == false()), 1),
            else_=0,
        )
    )
    judge = func.sum(
        case((Result.judge_cost_usd.is_(None) & Result.judge_prompt_tokens.is_not(None), 1), else_=0)
    )
    query = (
        select(Result.run_id, model, judge).where(Result.run_id.in_(list(run_ids))).group_by(Result.run_id)
    )
    return {
        int(run_id): Unpriced(int(m or 0), int(j or 0))
        for run_id, m, j in session.connection().execute(query)
        if m or j
    }
