"""A Result row and what it adds to its run's counters, as statements built once (outcome -> storage).

The recorder decides when and in which transaction; this module says what is written: the row's
columns, the counter increments (never values read before: other processes of a run key add too),
and PostgreSQL's one-statement form of both.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy import Executable, bindparam, insert, update
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.exc import DBAPIError

from ..execution.outcome import Outcome
from ..status import Status
from .content import ContentIds
from .pgtext import nul_free, nul_free_cursor
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


@dataclass(frozen=True)
class DriverStatement:
    """A PostgreSQL statement compiled once, with native $n placeholders, sent on psycopg's RawCursor.

    SQLAlchemy does not cache the compiled form of a multi-row INSERT (compiling one cost ~1 ms per
    Result), and psycopg converts %(name)s placeholders again for every statement longer than 4 KB
    (~10 ms for 50 Results). Parameters named r<i>_<column> are row i's column; others are shared."""

    sql: str
    slots: tuple[tuple[int, str], ...]  # what each $n takes: (row, column), or (-1, name) for a shared one
    processors: tuple[tuple[int, Callable[[Any], Any]], ...]  # each $n's conversion (JSON, ...)

    @classmethod
    def compile(cls, statement: Executable, dialect: Dialect) -> DriverStatement:
        compiled = statement.compile(dialect=dialect)
        numbers: dict[str, int] = {}  # each name's $n, in order of first appearance

        def number(match: re.Match[str]) -> str:
            return f"${numbers.setdefault(match.group(1), len(numbers) + 1)}"

        sql = re.sub(r"%\((\w+)\)s", number, compiled.string).replace("%%", "%")
        binds = compiled.binds  # type: ignore[attr-defined]
        processors = []
        for position, name in enumerate(numbers):
            process = binds[name].type.bind_processor(dialect)
            if process is not None:
                processors.append((position, _none_once(process)))
        return cls(sql, tuple(map(_slot, numbers)), tuple(processors))

    def execute(self, connection: Connection, rows: Sequence[dict[str, Any]], shared: dict[str, Any]) -> None:
        from psycopg import Error

        values = [shared[name] if row < 0 else rows[row][name] for row, name in self.slots]
        for position, process in self.processors:
            values[position] = process(values[position])
        try:
            with nul_free_cursor(connection.connection.driver_connection) as cursor:
                cursor.execute(self.sql, nul_free(values))
        except Error as exc:  # as SQLAlchemy's own execution raises it: the recorder handles that
            connection.invalidate()  # it may be broken: the pool must not hand it out again
            raise DBAPIError.instance(self.sql, None, exc, Error) from exc


def _slot(name: str) -> tuple[int, str]:
    found = re.fullmatch(r"r(\d+)_(\w+)", name)
    return (int(found[1]), found[2]) if found else (-1, name)


def _none_once(process: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`process`, with None's conversion worked out once (a JSON column's None is serialised)."""
    converted_none = process(None)
    return lambda value: converted_none if value is None else process(value)


# PostgreSQL: Results of one run and their run's counters in one statement (a data-modifying WITH),
# sent in autocommit: one round trip, and still one transaction.
@lru_cache(maxsize=128)  # a run uses one dialect and at most EARLY_BATCH + 1 sizes
def store_results(count: int, dialect: Dialect) -> DriverStatement:
    """The statement for `count` Results (one per group size, compiled once)."""
    columns = [c for c in _RESULTS.c if c.name != "id"]
    rows = [{c.name: bindparam(f"r{i}_{c.name}", type_=c.type) for c in columns} for i in range(count)]
    stored = insert(_RESULTS).values(rows).returning(_RESULTS.c.id).cte("stored")
    return DriverStatement.compile(ADD_COUNTERS.add_cte(stored), dialect)


def store_results_now(
    connection: Connection, rows: Sequence[tuple[Outcome, ContentIds]], run_id: int
) -> None:
    """Store Results of one run and add them to its counters: one statement (store_results)."""
    shared: dict[str, Any] = {
        "run_id": run_id,
        **summed_deltas((run_id, outcome) for outcome, _ in rows)[run_id],
    }
    columns = [result_values(outcome, run_id, ids) for outcome, ids in rows]
    store_results(len(rows), connection.dialect).execute(connection, columns, shared)


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


def summed_deltas(results: Iterable[tuple[int, Outcome]]) -> dict[int, dict[str, float]]:
    """What several Results add to their runs' counters: one UPDATE per run, not per Result."""
    summed: dict[int, dict[str, float]] = {}
    for run_id, outcome in results:
        into = summed.setdefault(run_id, {})
        for name, value in deltas(outcome).items():
            into[name] = into.get(name, 0) + value
    return summed
