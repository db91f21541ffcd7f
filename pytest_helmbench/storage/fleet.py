"""One run across processes and machines (--helmbench-run-key, --helmbench-shard): the database is
what they share, so every decision they must agree on is one atomic statement in it.

- Each shard's progress is its RunShard row; the shard that finishes last (whichever it is) finds
  every shard completed and marks the run completed. Finishing locks the run's row first (an UPDATE),
  so two shards finishing at once are ordered and the second sees the first's row.
- FleetSpend: the USD spent by every process of a key, grown by `spent_usd = spent_usd + x`.
- FleetStop: a model stopped in one process of a key, read by every process before each call.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from ..errors import HelmbenchError
from ..status import RunStatus
from ..suite.shards import FleetRole
from .coverage import SETTINGS
from .engine import StorageError, describe_error, safe_url
from .tables import EvaluationRun, FleetSpend, FleetStop, RunShard, utcnow

_INSERTS = {"sqlite": sqlite_insert, "postgresql": postgresql_insert}
_RUNS, _SHARDS = EvaluationRun.__table__, RunShard.__table__  # type: ignore[attr-defined]
_SPEND, _STOPS = FleetSpend.__table__, FleetStop.__table__  # type: ignore[attr-defined]


class FleetError(HelmbenchError):
    """A process cannot join the run of its key (another shard count, a database without upserts)."""


def _insert(connection: Connection):  # noqa: ANN202 - a dialect's insert with ON CONFLICT
    found = _INSERTS.get(connection.dialect.name)
    if found is None:
        raise FleetError(
            "--helmbench-run-key needs SQLite or PostgreSQL (INSERT … ON CONFLICT), "
            f"not {connection.dialect.name}"
        )
    return found


def _refused(run_id: int, role: FleetRole, started: str, fix: str) -> FleetError:
    """The one wording of every refusal to join a keyed run: what the run was started with, the fix."""
    return FleetError(f"run {run_id} (--helmbench-run-key {role.run_key}) was started with {started}: {fix}")


def check_shard_count(run_id: int, stored: int | None, role: FleetRole) -> None:
    """A run started with N shards is joined only by shards of N."""
    if stored != role.shard_count:
        started = f"{stored} shard(s)" if stored else "no --helmbench-shard"
        given = f"--helmbench-shard K/{role.shard_count}" if role.shard_count else "no --helmbench-shard"
        fix = "give every process of a key the same N, or use another key"
        raise _refused(run_id, role, f"{started}, this process has {given}", fix)


def check_same_benchmark(run_id: int, stored: int, given: int, role: FleetRole) -> None:
    """A keyed run is joined only on its benchmark (benchmark.yml's version and content): else one run
    would mix Results of two measurements. (Each Result names its scenario's content row anyway.)"""
    if stored != given:
        started = "another benchmark.yml (version or content) than this process's"
        fix = "run every process of a key on the same commit, or use another key"
        raise _refused(run_id, role, started, fix)


#: What every process of a key must share besides coverage.SETTINGS: the layouts its cases are sent in.
FLEET_SETTINGS = (*SETTINGS, "layouts")


def check_same_settings(
    run_id: int, stored: dict[str, Any] | None, given: dict[str, Any], role: FleetRole
) -> None:
    """A keyed run is joined (or a shard of it resumed) only with the settings that decide its answers
    and verdicts (FLEET_SETTINGS) and with its selection (check_same_selection). Other options
    (concurrency, cache, ceilings, pytest's arguments) may differ; the run keeps the first process's."""
    theirs, ours = _plain(stored or {}), _plain(given)
    differ = [name for name in FLEET_SETTINGS if theirs.get(name) != ours.get(name)]
    if differ:
        shown = "; ".join(f"{name} {theirs.get(name)!r} there, {ours.get(name)!r} here" for name in differ)
        fix = "give every process of a key the same settings, or use another key"
        raise _refused(run_id, role, f"other settings ({shown})", fix)


def check_same_selection(
    run_id: int, stored: dict[str, Any] | None, given: dict[str, Any], role: FleetRole
) -> None:
    """A keyed run is joined only by processes that selected the same cases (before their shard) with
    the same content (scenario, condition, user context and perturbation hashes): else shards would
    run some cases twice and others never, or one run would mix two measurements. A side that has
    not selected yet (a resume planned before collection, a run stored before this check) is
    checked again once it has."""
    theirs, ours = (stored or {}).get("selection"), given.get("selection")
    if not theirs or not ours:
        return
    if theirs.get("cases_sha256") != ours.get("cases_sha256"):
        started = (
            f"another selection of cases ({theirs.get('items')} item(s) there, {ours.get('items')} here, "
            "before --helmbench-shard)"
        )
        fix = (
            "give every process of a key the same selection (-k, -m, --helmbench-select, "
            "--helmbench-sample, paths, --helmbench-layout), or use another key"
        )
        raise _refused(run_id, role, started, fix)
    if theirs.get("content_sha256") != ours.get("content_sha256"):
        started = "other benchmark content (an edited scenario, rubric, persona, condition or perturbation)"
        raise _refused(
            run_id, role, started, "run every process of a key on the same commit, or use another key"
        )


def _plain(options: dict[str, Any]) -> dict[str, Any]:
    """As stored (JSON): tuples are lists, every key a string."""
    return json.loads(json.dumps(options, default=str))


def start_shard(connection: Connection, run_id: int, role: FleetRole, session_id: str) -> None:
    """This shard is running in `run_id` (again, when resumed), in the caller's transaction."""
    if role.shard is None:
        return
    values = dict(
        run_id=run_id, shard=role.shard, status=RunStatus.RUNNING, session_id=session_id, started_at=utcnow()
    )
    statement = _insert(connection)(_SHARDS).values(**values)
    connection.execute(
        statement.on_conflict_do_update(
            index_elements=["run_id", "shard"],
            set_={"status": RunStatus.RUNNING, "session_id": session_id, "finished_at": None},
        )
    )


def finish_shard(connection: Connection, run_id: int, role: FleetRole, status: str) -> str:
    """Mark this shard `status` and return the run's: completed once all N shards completed,
    interrupted when one was, else running (other shards still at work). In the caller's transaction."""
    now = utcnow()
    # First a write to the run's row: it locks the row (PostgreSQL) or the database (SQLite) until
    # commit, so a shard finishing at the same time waits and then sees this shard's row.
    connection.execute(update(_RUNS).where(_RUNS.c.id == run_id).values(finished_at=now))
    if role.shard is not None:
        statement = _insert(connection)(_SHARDS).values(
            run_id=run_id, shard=role.shard, status=status, session_id="", started_at=now, finished_at=now
        )
        connection.execute(
            statement.on_conflict_do_update(
                index_elements=["run_id", "shard"], set_={"status": status, "finished_at": now}
            )
        )
    count = connection.execute(select(_RUNS.c.shard_count).where(_RUNS.c.id == run_id)).scalar()
    shards = shard_progress(connection, run_id)
    if role.shard is None or not count:
        run_status = status
    elif len(shards) == count and set(shards.values()) == {RunStatus.COMPLETED}:
        run_status = RunStatus.COMPLETED
    elif RunStatus.INTERRUPTED in shards.values():
        run_status = RunStatus.INTERRUPTED
    else:
        run_status = RunStatus.RUNNING
    connection.execute(
        update(_RUNS)
        .where(_RUNS.c.id == run_id)
        .values(status=run_status, finished_at=None if run_status == RunStatus.RUNNING else now)
    )
    return str(run_status)


def shard_progress(connection: Connection, run_id: int) -> dict[int, str]:
    """Each shard of the run that has started, with its status."""
    rows = connection.execute(select(_SHARDS.c.shard, _SHARDS.c.status).where(_SHARDS.c.run_id == run_id))
    return {shard: status for shard, status in rows}


def clear_stops(connection: Connection, run_key: str, models: list[str]) -> None:
    """A resume starts again what was stopped (the key fixed, the credit topped up)."""
    connection.execute(_STOPS.delete().where(_STOPS.c.run_key == run_key, _STOPS.c.model_id.in_(models)))


class FleetSpendLedger:
    """The shared spend of a run key, for execution.budget.CostLedger (one ceiling for every process)."""

    def __init__(self, engine_factory: Callable[[], Engine], run_key: str) -> None:
        self._factory = engine_factory
        self.run_key = run_key
        self._engine: Engine | None = None
        self._lock = threading.Lock()

    def _connect(self) -> Connection:
        with self._lock:
            if self._engine is None:
                self._engine = self._factory()
            return self._engine.connect()

    def add(self, amount: float) -> None:
        """spent_usd = spent_usd + amount, atomically (INSERT … ON CONFLICT DO UPDATE)."""
        try:
            with self._connect() as connection, connection.begin():
                statement = _insert(connection)(_SPEND).values(run_key=self.run_key, spent_usd=amount)
                connection.execute(
                    statement.on_conflict_do_update(
                        index_elements=["run_key"], set_={"spent_usd": _SPEND.c.spent_usd + amount}
                    )
                )
        except SQLAlchemyError as exc:
            raise StorageError(f"cannot record spend in {self._where()}: {describe_error(exc)}") from None

    def spent(self) -> float:
        try:
            with self._connect() as connection:
                found = connection.execute(
                    select(func.coalesce(func.sum(_SPEND.c.spent_usd), 0.0)).where(
                        _SPEND.c.run_key == self.run_key
                    )
                ).scalar()
        except SQLAlchemyError as exc:
            raise StorageError(f"cannot read spend from {self._where()}: {describe_error(exc)}") from None
        return float(found or 0.0)

    def _where(self) -> str:
        return safe_url(str(self._engine.url)) if self._engine is not None else "the database"

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None


class FleetStopList:
    """The models stopped in any process of a run key, for execution.budget.StopBoard. Read at most
    every `refresh` seconds per process (a stop is permanent, so a stop found is kept)."""

    def __init__(self, engine_factory: Callable[[], Engine], run_key: str, refresh: float = 0.2) -> None:
        self._spend = FleetSpendLedger(engine_factory, run_key)  # its engine and connection handling
        self.run_key = run_key
        self.refresh = refresh
        self._known: dict[str, str] = {}  # replaced whole, never changed in place: read without the lock
        self._read_at = float("-inf")
        self._lock = threading.Lock()  # one reader (or stop) at a time

    def stop(self, model: str, reason: str) -> None:
        try:
            with self._spend._connect() as connection, connection.begin():
                statement = _insert(connection)(_STOPS).values(
                    run_key=self.run_key, model_id=model, reason=reason, created_at=utcnow()
                )
                connection.execute(statement.on_conflict_do_nothing())
        except SQLAlchemyError as exc:
            raise StorageError(f"cannot record a stop: {describe_error(exc)}") from None
        with self._lock:
            self._known = {model: reason} | self._known  # the first reason found stays

    def stopped(self, *, fresh: bool = False) -> dict[str, str]:
        return dict(self._current(fresh=fresh))

    def reason(self, model: str) -> str | None:
        return self._current().get(model)

    def _current(self, *, fresh: bool = False) -> dict[str, str]:
        """Asked before every call. Until the first read, threads wait for it: a thread must never take
        "not read yet" for "not stopped" (the first calls of a process start together). After it, a
        thread never waits for another's read: it answers from the last one, at most a read old."""
        if fresh or self._read_at == float("-inf"):
            with self._lock:
                if fresh or self._stale():  # not if the read waited for has just been made
                    self._read()
        elif self._stale() and self._lock.acquire(blocking=False):
            try:
                self._read()
            finally:
                self._lock.release()
        return self._known

    def _stale(self) -> bool:
        return time.monotonic() - self._read_at >= self.refresh

    def _read(self) -> None:
        """Called with the lock held."""
        try:
            with self._spend._connect() as connection:
                rows = connection.execute(
                    select(_STOPS.c.model_id, _STOPS.c.reason).where(_STOPS.c.run_key == self.run_key)
                ).all()
        except SQLAlchemyError as exc:
            raise StorageError(f"cannot read stops: {describe_error(exc)}") from None
        known = dict(self._known)
        for model, reason in rows:
            known.setdefault(model, reason)
        self._known = known
        self._read_at = time.monotonic()

    def close(self) -> None:
        self._spend.close()


def shared_stops(role: FleetRole | None, db_url: str) -> FleetStopList | None:
    """The key's stops for the session's StopBoard (None without a run key)."""
    if role is None:
        return None
    from .engine import make_engine

    return FleetStopList(lambda: make_engine(db_url), role.run_key)


def shared_spend(role: FleetRole | None, db_url: str) -> FleetSpendLedger | None:
    """The key's spend for the session's CostLedger: one ceiling for every process (None without a key)."""
    if role is None:
        return None
    from .engine import make_engine

    return FleetSpendLedger(lambda: make_engine(db_url), role.run_key)
