"""The browse pages' reads: runs side by side, and stored cases filtered and paged on the server.

A page of cases is two queries, never the Results' rows in Python: the ids that match (from an index
when no search reads the replies; their number is the count) and the page's 50 rows by id: 50 cases
of a 20,000-Result database in tens of milliseconds (bench/workbench.py). Filters are SQL: run,
model, behaviour, condition, user context, layout, verdict (status), critical; the judges'
disagreement reads `resultflag` (filled once per run from the Results' details, on first use); the
search is a case-insensitive substring of the replies (LIKE / ILIKE with its wildcards escaped).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import aliased
from sqlmodel import Session, col

from ..codes import code_sort_key
from ..storage.records import result_query
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


def _search(column: Any, text: str, dialect: str) -> Any:
    """A case-insensitive substring test. SQLite's LIKE already ignores ASCII case, as its lower() is
    ASCII-only: the same matches without a lowered copy of every reply (ILIKE elsewhere)."""
    if dialect == "sqlite":
        return col(column).like(_like(text), escape="\\")
    return col(column).ilike(_like(text), escape="\\")


def _matching(filters: Filters, dialect: str) -> Any:
    """The ids of the Results that match, joined only to the tables a filter names: with no filter on
    them, SQLite answers from an index (ix_result_run_id, ix_result_browse) without reading a row."""
    query = select(Result.id, Result.run_id).select_from(Result)
    if filters.get("model"):
        query = query.join(EvaluationRun, EvaluationRun.id == Result.run_id).join(
            LLM, LLM.id == EvaluationRun.llm_id
        )
        query = query.where(LLM.model_id == filters.get("model"))
    if filters.get("behaviour") or filters.get("critical") == "yes":
        query = query.join(Scenario, Scenario.id == Result.scenario_id)
    if filters.get("behaviour"):
        query = query.join(Behaviour, Behaviour.id == Scenario.behaviour_id)
        query = query.where(Behaviour.full_code == filters.get("behaviour"))
    if filters.get("critical") == "yes":
        query = query.where(col(Scenario.critical).is_(True))
    if filters.get("condition"):
        query = query.join(Condition, Condition.id == Result.condition_id)
        query = query.where(Condition.code == filters.get("condition"))
    if filters.get("user_context"):
        query = query.join(UserContext, UserContext.id == Result.user_context_id)
        query = query.where(UserContext.code == filters.get("user_context"))
    return _on_result(query, filters, dialect)


def _on_result(query: Any, filters: Filters, dialect: str) -> Any:
    """The filters on the Result's own columns (and its flags)."""
    if filters.get("run").isdigit():
        query = query.where(Result.run_id == int(filters.get("run")))
    if filters.get("layout") == "seed":
        query = query.where((Result.layout == "seed") | col(Result.layout).is_(None))
    elif filters.get("layout"):
        query = query.where(Result.layout == filters.get("layout"))
    if filters.get("verdict") in VERDICTS:
        query = query.where(Result.status == filters.get("verdict"))
    if filters.get("disagreement") == "yes":
        query = query.join(ResultFlag, ResultFlag.result_id == Result.id)
        query = query.where(col(ResultFlag.disagreement).is_(True))
    if filters.get("q"):
        query = query.where(_search(Result.raw_response, filters.get("q"), dialect))
    return query


def case_page(session: Session, filters: Filters, page: int) -> tuple[list[CaseRow], int]:
    """One page of cases matching the filters, and how many match.

    One pass finds the matching ids (the count is their number; a search reads each reply once, not
    once to count and again to page), then the page's 50 rows are read by id with the storage layer's
    joined query (storage/records.result_query)."""
    if filters.get("disagreement") == "yes":
        index_flags(session, [int(filters.get("run"))] if filters.get("run").isdigit() else None)
    connection = session.connection()
    found = sorted(tuple(row) for row in connection.execute(_matching(filters, connection.dialect.name)))
    start = max(0, page - 1) * PAGE_SIZE
    shown = found[start : start + PAGE_SIZE]
    if not shown:
        return [], len(found)
    runs = sorted({run_id for _, run_id in shown})
    query = result_query(runs).where(col(Result.id).in_([result_id for result_id, _ in shown]))
    return [_case_row(row) for row in connection.execute(query)], len(found)


def _case_row(row: Any) -> CaseRow:
    return CaseRow(
        row.result_id,
        row.run_id,
        row.model,
        row.case_code,
        row.behaviour,
        row.condition,
        row.user_context,
        row.layout,
        row.status,
        bool(row.critical),
    )


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
