"""Read a results database in tests, whatever its kind (SQLite file or PostgreSQL)."""

from __future__ import annotations

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
