"""Read a results database in tests, whatever its kind (SQLite file or PostgreSQL)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlalchemy import text

from pytest_helmbench.storage.engine import make_engine


def query(url: str, sql: str, **params: object) -> list[tuple]:
    """Rows of one SQL query (`:name` parameters bound from params) as plain tuples; the engine is
    disposed (no connection left open)."""
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(row) for row in conn.execute(text(sql), params)]
    finally:
        engine.dispose()


def rows(db: Path | str, sql: str, *args: object) -> list[tuple]:
    """Rows from a SQLite file (a Path) or any database URL (a str: SQLite or PostgreSQL, `?` bound)."""
    if isinstance(db, Path):
        with sqlite3.connect(db) as conn:
            return conn.execute(sql, args).fetchall()
    for index in range(len(args)):
        sql = sql.replace("?", f":p{index}", 1)
    return query(db, sql, **{f"p{index}": value for index, value in enumerate(args)})
