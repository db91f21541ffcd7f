"""Write outcomes to the database (outcome -> storage). Only the controller process writes.

Each Result is committed in its own transaction together with its run's counters, so the counters
always agree with the rows and a crash loses nothing that finished. Two sessions may write into one
database at once: each has its own runs, content rows are upserted atomically (content.py), and the
cache entries of a batch are written in key order, so neither waits on the other in a cycle.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session, select

from ..execution.outcome import Outcome
from ..execution.selection import RunSelection
from ..status import RunStatus
from ..suite.shards import FleetRole
from .cache import write_entries
from .content import ContentRows
from .early import EarlyResults, Row, result_key
from .engine import StorageError, describe_error, has_counter_triggers, make_engine, safe_url, upgrade
from .fleet import (
    FleetError,
    check_same_benchmark,
    check_same_selection,
    check_same_settings,
    check_shard_count,
    clear_stops,
    finish_shard,
    start_shard,
)
from .records import layout_is
from .result_rows import (
    ADD_COUNTERS,
    COUNTERS,
    INSERT_RESULT,
    RunCounters,
    deltas,
    result_values,
    store_results_now,
    summed_deltas,
)
from .tables import LLM, EvaluationRun, Result, utcnow

log = logging.getLogger(__name__)

CACHE_BATCH = 32
# A rerun case's evaluation details: its earlier attempts in this session (pytest-rerunfailures).
RERUNS = "earlier_attempts"
CACHE_BATCH_SECONDS = 2.0


class Recorder:
    """Stores the outcomes of one pytest session: one EvaluationRun per model, one Result per case."""

    def __init__(self, db_url: str, session_id: str, fleet: FleetRole | None = None) -> None:
        self.db_url = db_url
        self.session_id = session_id
        self.fleet = fleet  # --helmbench-run-key (and shard): join the key's run of each model
        self.refused = False  # the key's run did not take this process (fleet.FleetError)
        self.run_statuses: dict[str, str] = {}  # each run's status once finish() stored it
        self._benchmark_id: int | None = None
        upgrade(db_url)
        self.engine = make_engine(db_url)
        self.runs: dict[str, int] = {}
        # What the session selected per model (set once collection is done): stored on each new run.
        self.selection: dict[str, RunSelection] = {}
        self._adopted: set[int] = set()  # runs continued from an earlier session: may hold older Results
        self._resumed: set[int] = set()  # adopted runs marked running again by this session (_resume)
        self._written: set[tuple[int, str, int, str]] = set()  # (run, case, repeat, layout) this session
        self._early = EarlyResults()  # stored before their items reported them (record's `ahead`)
        self._run_rows: dict[str, RunCounters] = {}  # each model's run and its counters: no SELECT per Result
        self.content = ContentRows(self.engine.dialect.name)
        self._conn: Connection | None = None
        self._auto: Connection | None = None  # PostgreSQL: the one-statement Results (_autocommit)
        # Fresh answers for the response cache are written with every CACHE_BATCH-th Result (or after
        # CACHE_BATCH_SECONDS), in that Result's transaction, and at finish: one statement per Result
        # fewer. A kill -9 loses at most that batch of cache entries, never a Result: a resume still
        # pays for nothing twice (it goes by the Results), a fresh rerun may ask those few again.
        self._pending_cache: list[dict[str, Any]] = []
        self._cache_written = 0
        self._cache_flushed = time.monotonic()
        # SQLite keeps a run's counters with triggers (tables.RUN_COUNTER_TRIGGERS); other databases
        # get them from one UPDATE per Result.
        self._counted_by_triggers = has_counter_triggers(self.engine)

    def _close_connections(self) -> None:
        for connection in (self._conn, self._auto):
            if connection is not None:
                connection.close()
        self._conn = self._auto = None

    def unreported(self) -> list[Outcome]:
        """Results stored ahead of their items that no item reported (an interrupted session)."""
        return self._early.unreported()

    def close(self) -> None:
        self._close_connections()
        self.engine.dispose()

    def _forget(self) -> None:
        """After a failed transaction: ids and counters kept in memory may name rows rolled back."""
        self._close_connections()  # they may be unusable: the next Result opens others
        self._run_rows.clear()
        self._resumed.clear()  # a run marked running in a rolled-back transaction is marked again
        self.content.forget()

    def _connection(self) -> Connection:
        """One connection for every Result of the session (a pool checkout per Result cost more
        than the insert); each record() still commits its own transaction on it."""
        if self._conn is None or self._conn.invalidated or self._conn.closed:
            self._conn = self.engine.connect()
        return self._conn

    def _autocommit(self) -> Connection:
        """PostgreSQL's second connection, in autocommit: a Result and its run's counters go in one
        statement there, which is its own transaction (one round trip where BEGIN, INSERT, UPDATE and
        COMMIT took four)."""
        if self._auto is None or self._auto.invalidated or self._auto.closed:
            self._auto = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        return self._auto

    def _run(self, session: Session, model: str, benchmark_id: int, options: dict[str, Any]) -> RunCounters:
        """`model`'s run (created, or with a run key joined, before the first call by start_runs, else
        on its first Result). Where no trigger keeps the counters (databases other than SQLite) each
        Result adds to them in one UPDATE (`col = col + n`: other processes of a run key may add at
        the same time)."""
        self._benchmark_id = benchmark_id
        known = self._run_rows.get(model)
        if known is not None:
            return known
        if model in self.runs:
            run_id = self.runs[model]
            if run_id in self._adopted and run_id not in self._resumed:
                self._resume(session, run_id, options)
        else:
            llm_id = self.content.upsert(session, LLM, {"model_id": model}, {})
            selected = self.selection.get(model)
            fields: dict[str, Any] = dict(
                benchmark_id=benchmark_id,
                llm_id=llm_id,
                session_id=self.session_id,
                options=options,
                subset=selected.subset if selected else None,
                selected_cases=selected.selected if selected else None,
                benchmark_cases=selected.total if selected else None,
            )
            if self.fleet is None:
                run = EvaluationRun(**fields)
                session.add(run)
                session.flush()
                assert run.id is not None
                run_id = run.id
            else:
                run_id = self._join(session, fields)
        return RunCounters(run_id, dict.fromkeys(COUNTERS, 0))

    def _join(self, session: Session, fields: dict[str, Any]) -> int:
        """The run of this key and model: inserted unless it exists (INSERT … ON CONFLICT DO NOTHING,
        then SELECT), so processes starting at once end with one run; this shard marked running."""
        assert self.fleet is not None
        role = self.fleet
        match = {"llm_id": fields.pop("llm_id"), "run_key": role.run_key}
        run_id = self.content.upsert(
            session, EvaluationRun, match, {**fields, "shard_count": role.shard_count}
        )
        stored = (
            session.connection()
            .execute(
                select(EvaluationRun.shard_count, EvaluationRun.benchmark_id, EvaluationRun.options).where(
                    EvaluationRun.id == run_id
                )
            )
            .one()
        )
        try:
            check_shard_count(run_id, stored[0], role)
            check_same_benchmark(run_id, stored[1], fields["benchmark_id"], role)
            check_same_settings(run_id, stored[2], fields["options"], role)
            check_same_selection(run_id, stored[2], fields["options"], role)
        except FleetError:
            self.refused = True  # finish() must not try to join again
            raise
        start_shard(session.connection(), run_id, role, self.session_id)
        return run_id

    def join_missing(self, models: list[str], options: dict[str, dict[str, Any]]) -> None:
        """A shard that drew no case of a model still joins its run, so the run knows this shard
        finished (else it would never be completed)."""
        if self.fleet is not None and self.fleet.shard is not None and not self.refused:
            self.start_runs(models, options)

    def start_runs(self, models: list[str], options: dict[str, dict[str, Any]]) -> None:
        """Start each model's run (with a run key, join the key's run) before the first call: a
        process that does not fit a keyed run (_join) is refused before it pays for anything, and a
        session killed before its first Result leaves a run that --helmbench-resume continues (the
        conversations' paid answers replayed from the cache). Needs the benchmark's row
        (prepare_content, or a Result stored); else the first Result starts them."""
        if self._benchmark_id is None:
            return
        started: dict[str, int] = {}
        try:
            with Session(self.engine) as session:
                for model in models:
                    started[model] = self._run(session, model, self._benchmark_id, options[model]).id
                session.commit()
        except SQLAlchemyError as exc:
            self._resumed.clear()  # rolled back
            raise StorageError(f"cannot write to {safe_url(self.db_url)}: {describe_error(exc)}") from None
        except FleetError:
            self._resumed.clear()
            raise
        self.runs.update(started)  # only once committed: a refused process finishes no run

    def prepare_content(self, provenances: Iterable[dict[str, Any]]) -> None:
        """The content rows of every selected case, before the first call (ContentRows.prepare).

        In autocommit: every statement is an idempotent upsert, atomic alone, so none holds a lock
        past itself, and shards preparing at once (each meets the rows in its own order) cannot
        deadlock on each other."""
        try:
            with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
                self._benchmark_id = self.content.prepare(connection, provenances) or self._benchmark_id
        except SQLAlchemyError as exc:
            self.content.forget()
            raise StorageError(f"cannot write to {safe_url(self.db_url)}: {describe_error(exc)}") from None

    def adopt(self, model: str, run_id: int, options: dict[str, Any]) -> None:
        """Continue an earlier run of `model` (resume / retry errors) instead of starting a new one.

        Only checked here (before collection); the run is marked running again when the session starts
        its runs (_resume), so a process refused once its cases are selected leaves it untouched."""
        with Session(self.engine) as session:
            run = session.get(EvaluationRun, run_id)
            if run is None:
                raise StorageError(f"run {run_id} does not exist")
            if self.fleet is not None:  # other shards' Results stay: this one must answer as they did
                check_same_settings(run_id, run.options, options, self.fleet)
        self.runs[model] = run_id
        self._adopted.add(run_id)

    def _resume(self, session: Session, run_id: int, options: dict[str, Any]) -> None:
        """An adopted run, before this session's first call or Result: with a run key, the selection
        checked against the run's (check_same_selection), then marked running with this session's
        options (keeping the selection the run was started with), and this shard running."""
        run = session.get(EvaluationRun, run_id)
        if run is None:
            raise StorageError(f"run {run_id} does not exist")
        if self.fleet is not None:
            try:
                check_same_selection(run_id, run.options, options, self.fleet)
            except FleetError:
                self.refused = True
                raise
            start_shard(session.connection(), run_id, self.fleet, self.session_id)
        kept = {"selection": run.options["selection"]} if run.options and "selection" in run.options else {}
        run.status = RunStatus.RUNNING
        run.finished_at = None
        run.options = {**options, **kept, "resumed_in_session": self.session_id}
        session.add(run)
        session.flush()
        self._resumed.add(run_id)

    def lift_stops(self, models: list[str]) -> None:
        """A resume with a run key starts these models again in every process of the key."""
        if self.fleet is None:
            return
        try:
            with self.engine.begin() as connection:
                clear_stops(connection, self.fleet.run_key, models)
        except SQLAlchemyError as exc:
            raise StorageError(f"cannot write to {safe_url(self.db_url)}: {describe_error(exc)}") from None

    def record(self, outcome: Outcome, options: dict[str, Any], ahead: Iterable[Outcome] = ()) -> int:
        """Store one outcome and update its run's counters in one transaction; returns the run id.

        `ahead`: answers of cases not reported yet (prefetched calls already finished). Those that
        fit the fast path below go in the same transaction, and their own record() then finds them
        stored: one commit for many Results when storage is the run's bottleneck.

        In a resumed run, the case's earlier Result (an error, a skip, or a stale answer) is replaced,
        so a run always holds one Result per case and repeat.
        """
        run = self._run_rows.get(outcome.model)
        early = None if run is None else self._early.take(run.id, outcome)
        if early:
            return run.id  # type: ignore[union-attr]
        if early is False:  # cannot happen (an answer is reported as it was made): it is replaced
            log.warning("HELMBench: %s was stored before it was reported, otherwise", outcome.nodeid)
        try:
            connection = self._connection()
            row = self._fits(outcome)
            if row is not None:
                # Every row it points at is known and nothing is replaced: Core statements on the
                # connection, without an ORM session (which cost as much as the writes themselves).
                run = row[1]
                rows = [row, *self._early.rows(ahead, result_key(run.id, outcome), self._fits)]
                if self._one_statement(rows):
                    store_results_now(self._autocommit(), [(answer, ids) for answer, _, ids in rows], run.id)
                    for answer, _, _ in rows:  # written with a later batch
                        self._pending_cache.extend(answer.cache_writes)
                else:
                    with connection.begin():
                        self._write(connection, rows)
                self._written.update(self._early.stored(rows[1:]))
            else:
                with Session(connection, expire_on_commit=False) as session:
                    ids = self.content.ids(session.connection(), outcome.provenance)
                    run = self._run(session, outcome.model, ids["benchmark"], options)
                    rerun = result_key(run.id, outcome) in self._written
                    if run.id in self._adopted or rerun:
                        earlier = self._replace_earlier(session, run, outcome)
                        if rerun:  # pytest-rerunfailures: the last attempt stands, the earlier ones listed
                            outcome = replace(outcome, details={**outcome.details, RERUNS: earlier})
                    self._write(session, [(outcome, run, ids)])
                    session.commit()
            written = result_key(run.id, outcome)
            del self._pending_cache[: self._cache_written]  # committed with this Result
            run_id = run.id
        except SQLAlchemyError as exc:
            self._forget()
            raise StorageError(f"cannot write to {safe_url(self.db_url)}: {describe_error(exc)}") from None
        except BaseException:
            self._forget()
            raise
        finally:
            self._cache_written = 0
        self._written.add(written)
        self._run_rows[outcome.model] = run
        self.runs.setdefault(outcome.model, run_id)
        return run_id

    def _one_statement(self, rows: list[Row]) -> bool:
        """On PostgreSQL, Results of one run whose transaction has no cache batch to write: one
        statement (store_results) in autocommit."""
        if self.engine.dialect.name != "postgresql" or len({run.id for _, run, _ in rows}) > 1:
            return False
        pending = len(self._pending_cache) + sum(len(outcome.cache_writes) for outcome, _, _ in rows)
        return pending == 0 or (
            pending < CACHE_BATCH and time.monotonic() - self._cache_flushed < CACHE_BATCH_SECONDS
        )

    def _fits(self, outcome: Outcome) -> Row | None:
        """The fast path's row for `outcome`: its content rows known, its run this session's own
        (not adopted: nothing to replace), and no Result of it stored yet; else None."""
        run = self._run_rows.get(outcome.model)
        known = self.content.known(outcome.provenance)
        if run is None or known is None or run.id in self._adopted:
            return None
        return None if result_key(run.id, outcome) in self._written else (outcome, run, known)

    def _write(self, db: Session | Connection, rows: list[Row]) -> None:
        """The Result rows, their runs' counters and the fresh cache entries, in the caller's transaction."""
        # Core inserts: the ORM unit of work cost more than the rest of a case's bookkeeping.
        db.execute(INSERT_RESULT, [result_values(outcome, run.id, ids) for outcome, run, ids in rows])
        if not self._counted_by_triggers:  # in run id order: shards of a key lock shared runs alike
            for run_id, added in sorted(summed_deltas((run.id, outcome) for outcome, run, _ in rows).items()):
                db.execute(ADD_COUNTERS, {"run_id": run_id, **added})
        for outcome, _, _ in rows:
            self._pending_cache.extend(outcome.cache_writes)
        if (
            len(self._pending_cache) >= CACHE_BATCH
            or time.monotonic() - self._cache_flushed >= CACHE_BATCH_SECONDS
        ):
            self._store_cache(db, self._pending_cache)

    def _replace_earlier(self, session: Session, run: RunCounters, outcome: Outcome) -> list[dict[str, Any]]:
        """Delete the case's earlier Result(s); returns their attempts (status, reason), oldest first."""
        earlier = session.exec(
            select(Result).where(
                Result.run_id == run.id,
                Result.case_code == outcome.case_code,
                Result.repeat_index == outcome.repeat,
                layout_is(outcome.layout),
            )
        ).all()
        attempts: list[dict[str, Any]] = []
        for row in earlier:
            attempts += [
                *(row.evaluation_details or {}).get(RERUNS, []),
                {"status": row.status, "reason": row.reason},
            ]
            if not self._counted_by_triggers:
                session.execute(ADD_COUNTERS, {"run_id": run.id, **deltas(row, -1)})
            session.delete(row)
        session.flush()
        return attempts

    def _store_cache(self, db: Session | Connection, entries: list[dict[str, Any]]) -> None:
        """A fresh answer replaces any older entry of its key (one that expired, or was not read).

        Called with the pending entries, inside a Result's transaction; they are dropped from the
        pending list only once that transaction commits (see record)."""
        self._cache_flushed = time.monotonic()
        if entries:
            write_entries(db, self.engine.dialect.name, entries)
        self._cache_written = len(entries)

    def finish(self, statuses: dict[str, RunStatus], *, write_cache: bool = True) -> None:
        """Close this session's runs: completed, or interrupted (Ctrl-C, -x, a stopped model, a result
        that could not be stored); write the cache entries still pending unless told not to (after a
        storage failure, when only the statuses may still fit). A failure is a StorageError. A
        process refused by its key's run (FleetError) changes no run: it paid for nothing."""
        if self.refused:
            return
        try:
            with Session(self.engine) as session:
                if write_cache:
                    self._store_cache(session, self._pending_cache)
                self._cache_written = 0
                # In run id order: processes of a run key lock their shared runs in one order.
                for model, run_id in sorted(self.runs.items(), key=lambda item: item[1]):
                    status = statuses.get(model, RunStatus.COMPLETED)
                    if self.fleet is not None:  # other processes share the run: only this shard's part
                        self.run_statuses[model] = finish_shard(
                            session.connection(), run_id, self.fleet, status
                        )
                        continue
                    run = session.get(EvaluationRun, run_id)
                    if run is not None:
                        run.status = status
                        run.finished_at = utcnow()
                        session.add(run)
                        self.run_statuses[model] = str(status)
                session.commit()
        except SQLAlchemyError as exc:
            raise StorageError(f"cannot write to {safe_url(self.db_url)}: {describe_error(exc)}") from None
        finally:
            self._pending_cache.clear()
