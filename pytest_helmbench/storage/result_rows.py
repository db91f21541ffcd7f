"""A Result row and what it adds to its run's counters, as statements built once (outcome -> storage).

The recorder decides when and in which transaction; this module says what is written: the row's
columns, the counter increments (never values read before: other processes of a run key add too),
and PostgreSQL's one-statement form of both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, insert, update

from ..execution.outcome import Outcome
from ..status import Status
from .content import ContentIds
from .tables import EvaluationRun, Result, utcnow


def result_values(outcome: Outcome, run_id: int, ids: ContentIds) -> dict[str, Any]:
    """The Result row's columns (every one given: a Core insert applies no model defaults)."""
    return dict(
        run_id=run_id,
        scenario_id=ids["scenario"],
        condition_id=ids["condition"],
        user_context_id=ids["user_context"],
        perturbation_id=ids["perturbation"],
        case_code=outcome.case_code,
        nodeid=outcome.nodeid,
        status=outcome.status,
        reason=outcome.reason,
        prompt=outcome.prompt,
        prompt_hash=outcome.prompt_hash,
        raw_response=outcome.raw_response,
        parsed_answer=outcome.answer,
        expected=outcome.expected,
        actual=outcome.actual,
        evaluation_details=outcome.details,
        latency_ms=outcome.latency_ms,
        prompt_tokens=outcome.prompt_tokens,
        completion_tokens=outcome.completion_tokens,
        cost_usd=outcome.cost_usd,
        judge_cost_usd=outcome.judge_cost_usd,
        judge_prompt_tokens=outcome.judge_prompt_tokens,
        judge_completion_tokens=outcome.judge_completion_tokens,
        finish_reason=outcome.finish_reason,
        attempts=outcome.attempts,
        repeat_index=outcome.repeat,
        cached=outcome.cached,
        request_hash=outcome.request_hash,
        created_at=utcnow(),
        layout=outcome.layout,
        messages=outcome.messages,
    )


COUNTERS = (
    "total_tests",
    "passed_tests",
    "failed_tests",
    "error_tests",
    "skipped_tests",
    "cost_usd",
    "judge_cost_usd",
    "prompt_tokens",
    "completion_tokens",
)

# Built once: SQLAlchemy then reuses their compiled form (building them per Result cost ~0.1 ms each).
_RUNS, _RESULTS = EvaluationRun.__table__, Result.__table__
INSERT_RESULT = insert(_RESULTS)
ADD_COUNTERS = (  # increments, never values read before: other processes of a run key add too
    update(_RUNS)
    .where(_RUNS.c.id == bindparam("run_id"))
    .values({name: _RUNS.c[name] + bindparam(f"add_{name}") for name in COUNTERS})
)

# PostgreSQL: the Result and its run's counters in one statement (a data-modifying WITH), sent in
# autocommit: one round trip, and still one transaction.
_STORED = (
    insert(_RESULTS)
    .values({c.name: bindparam(f"r_{c.name}", type_=c.type) for c in _RESULTS.c if c.name != "id"})
    .returning(_RESULTS.c.id)
    .cte("stored")
)
STORE_RESULT = ADD_COUNTERS.add_cte(_STORED)


def store_values(outcome: Outcome, run_id: int, ids: ContentIds) -> dict[str, Any]:
    """STORE_RESULT's parameters: the Result's columns (as r_<column>) and the counter deltas."""
    values = {f"r_{name}": value for name, value in result_values(outcome, run_id, ids).items()}
    return {**values, "run_id": run_id, **deltas(outcome)}


@dataclass
class RunCounters:
    """One EvaluationRun's id and its counters (COUNTERS) in a plain dict: an ORM object's attribute
    events cost more than the arithmetic."""

    id: int
    counts: dict[str, float]


def deltas(outcome: Outcome | Result, sign: int = 1) -> dict[str, float]:
    """What one Result adds to (sign -1: takes from) its run's counters, as `add_<counter>` values.

    total_tests = passed + failed (the evaluated cases); errors and skips are counted apart. Cost and
    tokens are what was paid: a replaced Result's spend stays in the run's totals.
    """
    counts: dict[str, float] = dict.fromkeys(COUNTERS, 0)
    status_counter = {
        Status.PASSED: "passed_tests",
        Status.FAILED: "failed_tests",
        Status.ERROR: "error_tests",
        Status.SKIPPED: "skipped_tests",
    }.get(outcome.status)
    if status_counter is not None:
        counts[status_counter] = sign
    counts["total_tests"] = counts["passed_tests"] + counts["failed_tests"]
    if sign > 0:
        counts["cost_usd"] = outcome.cost_usd or 0.0
        counts["judge_cost_usd"] = outcome.judge_cost_usd or 0.0
        counts["prompt_tokens"] = outcome.prompt_tokens or 0
        counts["completion_tokens"] = outcome.completion_tokens or 0
    return {f"add_{name}": value for name, value in counts.items()}
