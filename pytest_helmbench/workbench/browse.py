"""The browse pages' reads: runs side by side, and stored cases filtered and paged on the server.

A page of cases is one indexed query with LIMIT/OFFSET (and one count), never the whole run in
Python: 50 cases of a 20,000-Result database render in milliseconds. Filters are SQL: run, model,
behaviour, condition, user context, layout, verdict (status), critical; the judges' disagreement reads
`resultflag` (filled once per run from the Results' details, on first use); the search is a
case-insensitive substring of the replies (LIKE / ILIKE with its wildcards escaped).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import aliased
from sqlmodel import Session, col

from ..codes import code_sort_key
from ..storage.tables import (
    LLM,
    Behaviour,
    Condition,
    EvaluationRun,
    Perturbation,
    Result,
    ResultFlag,
    Scenario,
    UserContext,
)
from .replies import judges_disagree, unknown_numbers, was_judged

PAGE_SIZE = 50
FILTERS = (
    "run",
    "model",
    "behaviour",
    "condition",
    "user_context",
    "layout",
    "verdict",
    "disagreement",
    "critical",
    "q",
)
VERDICTS = ("passed", "failed", "error", "skipped")
SEARCH_MAX = 200


@dataclass(frozen=True)
class Filters:
    values: dict[str, str]

    @classmethod
    def from_query(cls, query: Any) -> Filters:
        found = {}
        for name in FILTERS:
            value = str(query.get(name) or "").strip()[:SEARCH_MAX]
            if value:
                found[name] = value
        return cls(found)

    def get(self, name: str) -> str:
        return self.values.get(name, "")


@dataclass(frozen=True)
class CaseRow:
    result_id: int
    run_id: int
    model: str
    case_code: str
    behaviour: str
    condition: str
    user_context: str | None
    layout: str
    status: str
    critical: bool


def _like(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _filtered(query: Any, filters: Filters, uc: Any) -> Any:
    equal = {
        "model": LLM.model_id,
        "behaviour": Behaviour.full_code,
        "condition": Condition.code,
        "user_context": uc.code,
    }
    for name, column in equal.items():
        if filters.get(name):
            query = query.where(column == filters.get(name))
    if filters.get("run").isdigit():
        query = query.where(Result.run_id == int(filters.get("run")))
    if filters.get("layout") == "seed":
        query = query.where((Result.layout == "seed") | col(Result.layout).is_(None))
    elif filters.get("layout"):
        query = query.where(Result.layout == filters.get("layout"))
    if filters.get("verdict") in VERDICTS:
        query = query.where(Result.status == filters.get("verdict"))
    if filters.get("critical") == "yes":
        query = query.where(col(Scenario.critical).is_(True))
    if filters.get("disagreement") == "yes":
        query = query.join(ResultFlag, ResultFlag.result_id == Result.id)
        query = query.where(col(ResultFlag.disagreement).is_(True))
    if filters.get("q"):
        query = query.where(col(Result.raw_response).ilike(_like(filters.get("q")), escape="\\"))
    return query


def _cases() -> tuple[Any, Any]:
    uc = aliased(UserContext)
    query = (
        select(
            Result.id,
            Result.run_id,
            LLM.model_id,
            Result.case_code,
            Behaviour.full_code,
            Condition.code,
            uc.code,
            func.coalesce(Result.layout, "seed"),
            Result.status,
            Scenario.critical,
        )
        .select_from(Result)
        .join(EvaluationRun, EvaluationRun.id == Result.run_id)
        .join(LLM, LLM.id == EvaluationRun.llm_id)
        .join(Scenario, Scenario.id == Result.scenario_id)
        .join(Behaviour, Behaviour.id == Scenario.behaviour_id)
        .join(Condition, Condition.id == Result.condition_id)
        .outerjoin(uc, uc.id == Result.user_context_id)
    )
    return query, uc


def case_page(session: Session, filters: Filters, page: int) -> tuple[list[CaseRow], int]:
    """One page of cases matching the filters, and how many match."""
    if filters.get("disagreement") == "yes":
        index_flags(session, [int(filters.get("run"))] if filters.get("run").isdigit() else None)
    query, uc = _cases()
    query = _filtered(query, filters, uc)
    connection = session.connection()
    total = connection.execute(query.with_only_columns(func.count(Result.id)).order_by(None)).scalar_one()
    rows = connection.execute(query.order_by(Result.id).limit(PAGE_SIZE).offset(max(0, page - 1) * PAGE_SIZE))
    return [CaseRow(*row) for row in rows], int(total)


def choices(session: Session) -> dict[str, list[str]]:
    """The values each filter offers (codes in benchmark order)."""
    connection = session.connection()

    def distinct(column: Any) -> list[str]:
        found = {str(v) for v in connection.execute(select(column).distinct()).scalars() if v is not None}
        return sorted(found, key=code_sort_key)

    return {
        "run": [str(v) for v in sorted(connection.execute(select(EvaluationRun.id)).scalars())],
        "model": sorted(distinct(LLM.model_id)),
        "behaviour": distinct(Behaviour.full_code),
        "condition": distinct(Condition.code),
        "user_context": distinct(UserContext.code),
        "layout": ["seed", "deployed"],
        "verdict": list(VERDICTS),
    }


def index_flags(session: Session, run_ids: Sequence[int] | None = None) -> int:
    """Fill `resultflag` for the Results that have none yet (of these runs; default all); returns how
    many were added. Committed here."""
    missing = (
        select(Result.id, Result.run_id, Result.evaluation_details)
        .outerjoin(ResultFlag, ResultFlag.result_id == Result.id)
        .where(col(ResultFlag.result_id).is_(None))
    )
    if run_ids is not None:
        missing = missing.where(col(Result.run_id).in_(list(run_ids)))
    added = 0
    batch = []
    for result_id, run_id, details in session.connection().execute(missing).all():
        batch.append(
            {
                "result_id": result_id,
                "run_id": run_id,
                "judged": was_judged(details),
                "disagreement": judges_disagree(details),
                "unknown_numbers": unknown_numbers(details),
            }
        )
        added += 1
    if batch:
        session.connection().execute(ResultFlag.__table__.insert(), batch)  # type: ignore[attr-defined]
        session.commit()
    return added


def case_detail(session: Session, result_id: int) -> Any:
    """One Result with its run, model and content codes (None: no such Result)."""
    uc = aliased(UserContext)
    query = (
        select(
            Result,
            LLM.model_id,
            Scenario.full_code.label("scenario"),
            Scenario.title.label("scenario_title"),
            Scenario.critical,
            Behaviour.full_code.label("behaviour"),
            Condition.code.label("condition"),
            uc.code.label("user_context"),
            Perturbation.code.label("perturbation"),
        )
        .join(EvaluationRun, EvaluationRun.id == Result.run_id)
        .join(LLM, LLM.id == EvaluationRun.llm_id)
        .join(Scenario, Scenario.id == Result.scenario_id)
        .join(Behaviour, Behaviour.id == Scenario.behaviour_id)
        .join(Condition, Condition.id == Result.condition_id)
        .join(Perturbation, Perturbation.id == Result.perturbation_id)
        .outerjoin(uc, uc.id == Result.user_context_id)
        .where(Result.id == result_id)
    )
    return session.exec(query).first()  # type: ignore[call-overload]
