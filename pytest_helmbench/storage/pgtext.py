"""PostgreSQL stores no U+0000 (NUL) in text or jsonb; a model's reply may hold one anyway.

Left alone, one such reply would be a storage failure, which stops the whole session (exit 12): a model
could end a benchmark run by answering with a NUL. So on PostgreSQL every string written (text columns
and the strings inside JSON values) has each NUL replaced by U+FFFD, the Unicode replacement character.
The verdict was given on the reply as received; only the stored copy differs. SQLite stores NUL as is.
A response-cache entry whose text holds a NUL is not written on PostgreSQL (cache.py): replaying the
altered text could give another verdict than the reply it stands for.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

NUL = "\x00"
REPLACEMENT = "\ufffd"


def without_nul(value: Any) -> Any:
    """The value with NUL replaced in every string, dict keys and nested values included."""
    if isinstance(value, str):
        return value.replace(NUL, REPLACEMENT) if NUL in value else value
    if isinstance(value, dict):
        return {without_nul(key): without_nul(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [without_nul(item) for item in value]
    return value


def dumps(value: Any) -> str:
    """SQLAlchemy's JSON serializer for PostgreSQL: json.dumps of the value without NUL."""
    return json.dumps(without_nul(value))


def _dumpers() -> tuple[type, type]:
    from psycopg.types.string import StrBinaryDumper, StrDumperUnknown

    class NulFreeBinary(StrBinaryDumper):
        def dump(self, obj: str) -> Any:
            return super().dump(obj.replace(NUL, REPLACEMENT))

    class NulFreeText(StrDumperUnknown):
        def dump(self, obj: str) -> Any:
            return super().dump(obj.replace(NUL, REPLACEMENT))

    return NulFreeBinary, NulFreeText


def store_nul_as_replacement(engine: Engine) -> None:
    """Every psycopg connection of the engine writes strings without NUL (see the module's doc)."""
    binary, text = _dumpers()

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        adapters = getattr(dbapi_connection, "adapters", None)
        if adapters is not None:  # psycopg 3 (another driver keeps its own behaviour)
            adapters.register_dumper(str, binary)
            adapters.register_dumper(str, text)  # registered last: the default, as psycopg's own


def nul_free_cursor(connection: Any) -> Any:
    """A psycopg RawCursor ($n placeholders) on `connection` that dumps strings with psycopg's own
    compiled dumpers, for parameters already made NUL-free by nul_free: store_nul_as_replacement's
    Python dumpers cost a call per string (~1 us each, a tenth of what storing a Result costs)."""
    import psycopg
    from psycopg.adapt import PyFormat

    cursor = psycopg.RawCursor(connection)
    for format_ in (PyFormat.BINARY, PyFormat.TEXT):  # text last: the default, as psycopg's own
        cursor.adapters.register_dumper(str, psycopg.adapters.get_dumper(str, format_))
    return cursor


def nul_free(values: list[Any]) -> list[Any]:
    """Statement parameters with NUL replaced in each string (JSON ones are serialised already)."""
    return [
        value.replace(NUL, REPLACEMENT) if type(value) is str and NUL in value else value for value in values
    ]
