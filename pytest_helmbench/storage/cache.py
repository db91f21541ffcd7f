"""Response cache: a model (or judge) answer keyed by a hash of everything that determines it.

The key covers the base URL, API kind, model, messages, schema, sampling parameters, provider and
reasoning settings, any extra body fields, and the repeat index; a judge call's key covers its own
prompt (rubric, composed prompt, answer). Changing any component therefore changes exactly the keys
of the cases it feeds. Entries live in the results database (table `cachedresponse`): workers only
read, the controller writes them with the Result that paid for them.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime, timedelta

from sqlalchemy import delete
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session, select

from .tables import CachedResponse, utcnow

log = logging.getLogger(__name__)


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

    def _stored_keys(self) -> set[str]:
        """Every key stored when this process first read the cache, read once: a cold run then
        costs no query per case. Entries written later in the session are for other requests."""
        with self._lock:
            if self._engine is None:
                self._engine = self._engine_factory()
            if self._keys is None:
                with Session(self._engine) as session:
                    self._keys = set(session.exec(select(CachedResponse.key)).all())
            return self._keys

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
