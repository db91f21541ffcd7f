"""Response cache: a model (or judge) answer keyed by a hash of everything that determines it.

The key covers the base URL, API kind, model, messages, schema, sampling parameters, provider and
reasoning settings, any extra body fields, and the repeat index; a judge call's key covers its own
prompt (rubric, composed prompt, answer). Changing any component therefore changes exactly the keys
of the cases it feeds. Entries live in the results database (table `cachedresponse`): the controller
writes them with the Result that paid for them, except a conversation's, which the process that paid
for each call keeps at once (ResponseCache.keep): a kill mid-conversation loses none of its turns.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import bindparam, delete, insert
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session, select

from .pgtext import NUL
from .tables import CachedResponse, utcnow

log = logging.getLogger(__name__)

_CACHED = CachedResponse.__table__
_DELETE_CACHED = delete(_CACHED).where(_CACHED.c.key.in_(bindparam("keys", expanding=True)))
_INSERT_CACHED = insert(_CACHED)


def _upsert_cached(dialect_insert: Any) -> Any:
    statement = dialect_insert(_CACHED)
    return statement.on_conflict_do_update(
        index_elements=[_CACHED.c.key],
        set_={c.name: statement.excluded[c.name] for c in _CACHED.columns if c.name != "key"},
    )


# One statement where the dialect has INSERT .. ON CONFLICT (safe against another session writing the key).
_UPSERT_CACHED = {"sqlite": _upsert_cached(sqlite_insert), "postgresql": _upsert_cached(postgresql_insert)}


def write_entries(db: Any, dialect: str, entries: list[dict[str, Any]]) -> None:
    """Store fresh answers (CacheEntry dicts), each replacing any older entry of its key (one that
    expired, or was not read), in the caller's transaction: the recorder writes them with a Result.
    Written in key order, so two sessions writing at once never wait on each other in a cycle."""
    if dialect == "postgresql":  # a NUL would be stored altered: its replay could judge otherwise
        entries = [entry for entry in entries if NUL not in entry["raw_response"]]
    fresh = {entry["key"]: {**entry, "created_at": utcnow()} for entry in entries}
    rows = [fresh[key] for key in sorted(fresh)]
    upsert = _UPSERT_CACHED.get(dialect)
    if upsert is not None:
        db.execute(upsert, rows)
    else:
        db.execute(_DELETE_CACHED, {"keys": sorted(fresh)})
        db.execute(_INSERT_CACHED, rows)


class ResponseCache:
    """Read side of the cache (any process); `mode` says whether reads and writes are allowed."""

    def __init__(self, engine_factory, mode: str, ttl_seconds: float | None) -> None:
        self.mode = mode
        self.ttl_seconds = ttl_seconds
        self._engine_factory = engine_factory
        self._engine = None
        self._keys: set[str] | None = None
        self._lock = threading.Lock()

    @property
    def readable(self) -> bool:
        return self.mode in ("read", "on")

    @property
    def writable(self) -> bool:
        return self.mode in ("write", "on")

    def _opened(self) -> Any:
        with self._lock:
            if self._engine is None:
                self._engine = self._engine_factory()
            return self._engine

    def _stored_keys(self) -> set[str]:
        """Every key stored when this process first read the cache, read once: a cold run then
        costs no query per case. Entries written later in the session are for other requests."""
        engine = self._opened()
        with self._lock:
            if self._keys is None:
                with Session(engine) as session:
                    self._keys = set(session.exec(select(CachedResponse.key)).all())
            return self._keys

    def keep(self, entry: dict[str, Any]) -> bool:
        """Store one fresh answer (a CacheEntry dict) now, in its own short transaction, from the
        process that paid for it: a conversation's turns survive a kill before its Result. False when
        it cannot be written (the Result then carries it, as every other answer)."""
        if not self.writable:
            return False
        try:
            engine = self._opened()
            with engine.begin() as connection:
                write_entries(connection, engine.dialect.name, [entry])
        except SQLAlchemyError as exc:
            log.warning(
                "cannot cache an answer now (%s); it is stored with its result", exc.__class__.__name__
            )
            return False
        return True

    def get(self, key: str) -> CachedResponse | None:
        if not self.readable:
            return None
        try:
            if key not in self._stored_keys():
                return None
            with Session(self._engine) as session:
                entry = session.get(CachedResponse, key)
        except SQLAlchemyError as exc:
            log.warning("response cache unreadable (%s); calling the model", exc.__class__.__name__)
            return None
        if entry is None:
            return None
        if self.ttl_seconds is not None:
            created = entry.created_at if entry.created_at.tzinfo else entry.created_at.replace(tzinfo=UTC)
            if datetime.now(UTC) - created > timedelta(seconds=self.ttl_seconds):
                return None
        return entry

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()


def prune(
    session: Session,
    older_than_seconds: float | None = None,
    model_id: str | None = None,
    now: datetime | None = None,
) -> int:
    """Delete the entries older than the age and/or of one model (neither: every entry); return how many.

    Entries are only ever read by key, so deleting one costs at most one repeated call; the age is
    measured from when the entry was written, in the same UTC clock the recorder writes with."""
    statement = delete(CachedResponse)
    if older_than_seconds is not None:
        cutoff = (now or utcnow()) - timedelta(seconds=older_than_seconds)
        statement = statement.where(CachedResponse.created_at < cutoff)
    if model_id is not None:
        statement = statement.where(CachedResponse.model_id == model_id)
    removed = session.exec(statement).rowcount
    session.commit()
    return removed
