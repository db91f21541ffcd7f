"""Stored results as pandas DataFrames, for analysis: `runs(db)`, `results(db)` and `scores(db)`.

    from pytest_helmbench.results import results
    df = results("sqlite:///helmbench.db")

`db` is a SQLAlchemy URL (a SQLite file or PostgreSQL). The database must exist: a missing SQLite
file, a URL naming no known database or one without HELMBench tables raises HelmbenchError with a
one-line message, and nothing is created (a database behind the schema is migrated, as every
`helmbench` command does). `results(db)` has exactly `helmbench export`'s columns; the column sets and
their dtypes are storage/columns.py's, documented in docs/reference/results-api.md. pandas is the
`pandas` extra (`pip install 'pytest-helmbench[pandas]'`), imported only when a function is called.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas
    from sqlmodel import Session

__all__ = ["results", "runs", "scores"]


def _read(
    db: str, run_ids: Sequence[int] | None, build: Callable[[Session, Sequence[int] | None], pandas.DataFrame]
) -> pandas.DataFrame:
    """`build` on a session of the existing database `db` (never created), disposed of afterwards."""
    from sqlmodel import Session

    from .reporting.frames import require_pandas
    from .storage.engine import open_existing

    require_pandas()  # before the database is opened: the missing extra is the first thing to fix
    engine = open_existing(db)
    try:
        with Session(engine) as session:
            return build(session, run_ids)
    finally:
        engine.dispose()


def runs(db: str, run_ids: Sequence[int] | None = None) -> pandas.DataFrame:
    """One row per EvaluationRun (default: every run), by run id: status, times, counters, tokens,
    cost, what it selected and what it was scored with. An unknown run id raises DatasetError."""
    from .reporting.frames import runs_frame

    return _read(db, run_ids, runs_frame)


def results(db: str, run_ids: Sequence[int] | None = None) -> pandas.DataFrame:
    """One row per stored Result (default: every run): the rows and columns of `helmbench export`."""
    from .reporting.frames import results_frame

    return _read(db, run_ids, results_frame)


def scores(db: str, run_ids: Sequence[int] | None = None) -> pandas.DataFrame:
    """One row per run (default: every run) with its score, pass rate, their 95% intervals, counts,
    critical gate, cost and subset label, as the summary and `helmbench report` give them."""
    from .reporting.frames import scores_frame

    return _read(db, run_ids, scores_frame)
