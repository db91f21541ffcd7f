"""Stored Results read back as flat records (storage -> reporting's export), streamed for any size.

`result_query` joins a Result with its run, model and content rows in plain columns; queries.py builds
its CaseResults from it too.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, or_
from sqlalchemy.orm import aliased
from sqlalchemy.sql import Select
from sqlmodel import Session, select

from ..codes import SEED
from ..execution.sheet import ReplySheet
from ..status import SCORED
from .tables import (
    LLM,
    Behaviour,
    Condition,
    EvaluationRun,
    Perturbation,
    Pillar,
    Result,
    Scenario,
    UserContext,
)


def layout_is(layout: str) -> Any:
    """Results sent in this layout (a Result stored before migration 0008 has none: it was the seed's)."""
    column = Result.layout
    if layout == SEED:
        return or_(column == layout, column.is_(None))  # type: ignore[union-attr]
    return column == layout


@dataclass(frozen=True)
class ExportRow:
    """One Result row flattened with its codes, severities and accounting (the export row)."""

    result_id: int
    run_id: int
    run_subset: bool | None  # its run selected fewer cases than the benchmark holds (None: not recorded)
    model: str
    case_code: str
    pillar: str
    behaviour: str
    scenario: str
    condition: str
    user_context: str | None
    perturbation: str
    repeat: int
    status: str
    reason: str
    critical: bool
    condition_severity: int
    user_context_severity: int  # 0 without a user context, as in scoring
    perturbation_severity: int
    base_severity: int  # perturbation + user-context severity
    style: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    cost_usd: float | None
    judge_cost_usd: float | None
    latency_ms: float | None
    cached: bool
    attempts: int | None
    finish_reason: str | None
    layout: str  # how the case was sent (NULL before migration 0008: seed)
    turns: int | None  # judged replies of a multi-turn case (None: a single-turn case)
    first_failing_turn: int | None  # the turn index of its first failed reply
    # Its score sheet (scoring version 3; None: stored before it, or an error or skip): harm, care points
    harm: bool | None
    care_earned: int | None
    care_possible: int | None
    scenario_weight: float | None
    prompt_hash: str
    created_at: datetime | None


def result_query(run_ids: Sequence[int], *columns: Any) -> Select:
    """Result joined with its run, model and content rows, restricted to the given runs."""
    uc = aliased(UserContext)
    base = (
        Result.id.label("result_id"),
        Result.run_id,
        LLM.model_id.label("model"),
        Result.case_code,
        Pillar.code.label("pillar"),
        Behaviour.full_code.label("behaviour"),
        Scenario.full_code.label("scenario"),
        Condition.code.label("condition"),
        Condition.severity.label("condition_severity"),
        uc.code.label("user_context"),
        uc.severity.label("user_context_severity"),
        Perturbation.code.label("perturbation"),
        Perturbation.severity.label("perturbation_severity"),
        Perturbation.style.label("perturbation_style"),
        Scenario.critical,
        Scenario.risk,
        Result.repeat_index.label("repeat"),
        Result.status,
        func.coalesce(Result.layout, SEED).label("layout"),
    )
    return (
        select(*base, *columns)
        .select_from(Result)
        .join(EvaluationRun, EvaluationRun.id == Result.run_id)
        .join(LLM, LLM.id == EvaluationRun.llm_id)
        .join(Scenario, Scenario.id == Result.scenario_id)
        .join(Behaviour, Behaviour.id == Scenario.behaviour_id)
        .join(Pillar, Pillar.id == Behaviour.pillar_id)
        .join(Condition, Condition.id == Result.condition_id)
        .join(Perturbation, Perturbation.id == Result.perturbation_id)
        .outerjoin(uc, uc.id == Result.user_context_id)
        .where(Result.run_id.in_(list(run_ids)))
        .order_by(Result.id)
    )


def iter_export_rows(session: Session, run_ids: Sequence[int]) -> Iterator[ExportRow]:
    """Every Result of the given runs as a flat record, streamed (for exports of any size)."""
    if not run_ids:
        return
    query = result_query(
        run_ids,
        Result.reason,
        Result.prompt_tokens,
        Result.completion_tokens,
        Result.cost_usd,
        Result.judge_cost_usd,
        Result.latency_ms,
        Result.cached,
        Result.attempts,
        Result.finish_reason,
        Result.prompt_hash,
        Result.created_at,
        EvaluationRun.subset.label("run_subset"),
        Result.evaluation_details,
    ).execution_options(yield_per=2000)
    for row in session.connection().execute(query):
        cs, us, ps = (
            row.condition_severity or 0,
            row.user_context_severity or 0,
            row.perturbation_severity or 0,
        )
        yield ExportRow(
            result_id=row.result_id,
            run_id=row.run_id,
            run_subset=row.run_subset,
            model=row.model,
            case_code=row.case_code,
            pillar=row.pillar,
            behaviour=row.behaviour,
            scenario=row.scenario,
            condition=row.condition,
            user_context=row.user_context,
            perturbation=row.perturbation,
            repeat=row.repeat or 0,
            status=row.status,
            reason=row.reason or "",
            critical=bool(row.critical),
            condition_severity=cs,
            user_context_severity=us,
            perturbation_severity=ps,
            base_severity=ps + us,
            style=row.perturbation_style,
            prompt_tokens=row.prompt_tokens,
            completion_tokens=row.completion_tokens,
            cost_usd=row.cost_usd,
            judge_cost_usd=row.judge_cost_usd,
            latency_ms=row.latency_ms,
            cached=bool(row.cached),
            attempts=row.attempts,
            finish_reason=row.finish_reason,
            prompt_hash=row.prompt_hash,
            created_at=row.created_at,
            layout=row.layout,
            **_turn_figures(row.evaluation_details),
            **_sheet_figures(row.evaluation_details if row.status in SCORED else None),
        )


def _turn_figures(details: Any) -> dict[str, int | None]:
    """How many replies of a multi-turn case were judged, and the first that failed."""
    turns = details.get("turns") if isinstance(details, dict) else None
    if not isinstance(turns, list):
        return {"turns": None, "first_failing_turn": None}
    failing = details.get("first_failing_turn")
    return {"turns": len(turns), "first_failing_turn": failing if isinstance(failing, int) else None}


def _sheet_figures(details: Any) -> dict[str, Any]:
    """The reply's harm, care points and scenario weight from its stored score sheet (version 3); none for
    an error or skip (never scored) or a Result stored before version 3."""
    sheet = ReplySheet.from_dict(details.get("sheet")) if isinstance(details, dict) else None
    if sheet is None:
        return dict.fromkeys(("harm", "care_earned", "care_possible", "scenario_weight"))
    return {
        "harm": sheet.harm,
        "care_earned": sheet.care_earned,
        "care_possible": sheet.care_possible,
        "scenario_weight": sheet.weight,
    }


def call_latencies(session: Session, run_id: int) -> tuple[list[float], int]:
    """A run's call latencies (ms) of the answers not served from the cache, and how many were: the
    whole-run summary of a keyed run's last shard (one per stored Result, its last attempt's)."""
    rows = session.connection().execute(
        select(Result.latency_ms, Result.cached).where(Result.run_id == run_id)  # type: ignore[call-overload]
    )
    latencies, cached = [], 0
    for latency_ms, was_cached in rows:
        cached += bool(was_cached)
        if latency_ms is not None and not was_cached:
            latencies.append(float(latency_ms))
    return latencies, cached
