"""Storage: migrations match the models, rows are upserted by content hash, counters agree with rows."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlmodel import Session, SQLModel, select

from pytest_helmbench.storage.engine import SCHEMA_HEAD, StorageError, make_engine, upgrade
from pytest_helmbench.storage.recorder import Recorder
from pytest_helmbench.storage.tables import (
    CachedResponse,
    Condition,
    EvaluationRun,
    Perturbation,
    Result,
    Scenario,
)
from tests.benchfiles import make_outcomes, write_benchmark
from tests.dbquery import query


@pytest.fixture
def outcomes(tmp_path):
    made = make_outcomes(write_benchmark(tmp_path / "benchmark"), "m/one")
    for outcome in made:
        outcome.raw_response, outcome.cost_usd = "{}", 0.01
        outcome.prompt_tokens, outcome.completion_tokens = 10, 5
    return made


def test_migrations_match_the_models_and_are_idempotent(tmp_path):
    from alembic import command

    from pytest_helmbench.storage.engine import alembic_config

    url = f"sqlite:///{tmp_path / 'h.db'}"
    command.upgrade(alembic_config(url), "head")  # every migration, from nothing
    upgrade(url)
    with make_engine(url).connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), SQLModel.metadata) == []
        assert MigrationContext.configure(conn).get_current_revision() == SCHEMA_HEAD


def test_schema_head_is_the_newest_migration():
    from alembic.script import ScriptDirectory

    from pytest_helmbench.storage.engine import alembic_config

    assert ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head() == SCHEMA_HEAD


def test_a_new_database_is_built_from_the_models_and_stamped_like_a_migrated_one(tmp_path):
    """The fast path for a new database gives what the migrations give, and Alembic agrees it is current."""
    from alembic import command

    from pytest_helmbench.storage.engine import alembic_config

    built, migrated = f"sqlite:///{tmp_path / 'built.db'}", f"sqlite:///{tmp_path / 'migrated.db'}"
    upgrade(built)
    command.upgrade(alembic_config(migrated), "head")

    def schema(url: str) -> set[tuple[str, str, str]]:
        with make_engine(url).connect() as conn:
            found = conn.exec_driver_sql(
                "select type, name, sql from sqlite_master where name not like 'sqlite_%'"
            )
            return {(kind, name, sql if kind == "trigger" else "") for kind, name, sql in found}

    assert schema(built) == schema(migrated)
    assert {name for kind, name, _ in schema(built) if kind == "trigger"} == {
        "result_counts_after_insert",
        "result_counts_after_delete",
    }
    with make_engine(built).connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), SQLModel.metadata) == []
        assert MigrationContext.configure(conn).get_current_revision() == SCHEMA_HEAD
    command.upgrade(alembic_config(built), "head")  # nothing left to apply
    assert schema(built) == schema(migrated)


def test_upgrades_an_old_database_keeping_its_rows(tmp_path):
    from alembic import command

    from pytest_helmbench.storage.engine import alembic_config

    url = f"sqlite:///{tmp_path / 'old.db'}"
    command.upgrade(alembic_config(url), "0001")
    with make_engine(url).begin() as conn:
        conn.exec_driver_sql("insert into llm (model_id, created_at) values ('m/x', '2026-01-01')")
    upgrade(url)
    with make_engine(url).connect() as conn:
        assert conn.exec_driver_sql("select model_id from llm").fetchall() == [("m/x",)]
        assert conn.exec_driver_sql("select count(*) from cachedresponse").fetchall() == [(0,)]


@pytest.mark.parametrize("counted_by", ["triggers", "recorder"])
def test_records_upsert_content_and_keep_counters_in_step(tmp_path, outcomes, counted_by):
    """SQLite keeps the counters with triggers; other databases (PostgreSQL) get the recorder's UPDATE,
    exercised here on SQLite with the triggers dropped (the recorder sees they are missing)."""
    url = f"sqlite:///{tmp_path / 'h.db'}"
    outcomes[1].status, outcomes[2].status, outcomes[3].status = "failed", "error", "skipped"
    outcomes[0].cache_writes = [
        {
            "key": "k1",
            "model_id": "m/one",
            "raw_response": "{}",
            "prompt_tokens": 1,
            "completion_tokens": 1,
            "cost_usd": 0.01,
            "latency_ms": 5.0,
        }
    ]
    if counted_by == "recorder":
        upgrade(url)
        with make_engine(url).begin() as conn:
            conn.exec_driver_sql("drop trigger result_counts_after_insert")
            conn.exec_driver_sql("drop trigger result_counts_after_delete")
    for session_id in ("s1", "s2"):
        recorder = Recorder(url, session_id)
        for outcome in outcomes:
            recorder.record(outcome, {"temperature": 0})
        recorder.finish({"m/one": "completed"})
        recorder.close()
    with Session(make_engine(url)) as session:
        assert len(session.exec(select(Scenario)).all()) == 1
        assert len(session.exec(select(Condition)).all()) == 2
        assert len(session.exec(select(Perturbation)).all()) == 2
        assert len(session.exec(select(CachedResponse)).all()) == 1
        runs = session.exec(select(EvaluationRun)).all()
        assert [
            (r.status, r.total_tests, r.passed_tests, r.failed_tests, r.error_tests, r.skipped_tests)
            for r in runs
        ] == [("completed", 6, 5, 1, 1, 1)] * 2
        assert runs[0].cost_usd == pytest.approx(0.08)


@pytest.mark.slow
def test_each_database_stores_results_and_counters_alike_with_content_prepared_or_not(db_url, outcomes):
    """PostgreSQL writes a Result and its counters in one autocommit statement, SQLite by a trigger; the
    content rows come from prepare_content (before the run) or case by case: the rows are the same."""
    from tests.test_faults import assert_counters_agree, assert_no_duplicate_content

    outcomes[1].status, outcomes[2].status, outcomes[3].status = "failed", "error", "skipped"
    ids = []
    for session_id, prepared in (("s1", False), ("s2", True), ("s3", True)):
        recorder = Recorder(db_url, session_id)
        if prepared:
            recorder.prepare_content(o.provenance for o in outcomes)
            # Every row is known now: the Results go without one content statement.
            assert all(recorder.content.known(o.provenance) is not None for o in outcomes)
        else:
            assert recorder.content.known(outcomes[0].provenance) is None
        for outcome in outcomes:
            recorder.record(outcome, {"temperature": 0})
        ids.append([recorder.content.known(o.provenance) for o in outcomes])
        recorder.finish({"m/one": "completed"})
        recorder.close()
    assert ids[0] == ids[1] == ids[2]  # prepared or not, the same rows
    assert_no_duplicate_content(db_url)
    assert_counters_agree(db_url)
    with Session(make_engine(db_url)) as session:
        assert len(session.exec(select(Perturbation)).all()) == 2
        runs = session.exec(select(EvaluationRun).order_by(EvaluationRun.id)).all()
        assert [
            (r.total_tests, r.passed_tests, r.failed_tests, r.error_tests, r.skipped_tests) for r in runs
        ] == [(6, 5, 1, 1, 1)] * 3
        assert [r.cost_usd for r in runs] == [pytest.approx(0.08)] * 3
        assert [r.prompt_tokens for r in runs] == [80] * 3


def test_recorders_preparing_the_same_rows_at_once_in_other_orders_get_one_row_each(tmp_path, db_url):
    """Shards meet the content rows in their own orders: prepared at once, in opposite orders, every
    recorder finishes, with one row per content and the same ids in every recorder."""
    import threading

    from tests.test_faults import assert_no_duplicate_content

    root = write_benchmark(tmp_path / "benchmark", scenarios=("P1-B1-S1", "P1-B1-S2", "P1-B2-S1"))
    made = make_outcomes(root, "m/one")
    upgrade(db_url)
    recorders = [Recorder(db_url, f"s{k}") for k in range(4)]
    orders = [made, made[::-1], made[1::2] + made[::2], made[::-2] + made[-2::-2]]
    failures: list[BaseException] = []

    def prepare(recorder: Recorder, provenances: list) -> None:
        try:
            recorder.prepare_content(provenances)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            failures.append(exc)

    threads = [
        threading.Thread(target=prepare, args=(r, [o.provenance for o in order]))
        for r, order in zip(recorders, orders, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not failures and not any(t.is_alive() for t in threads), failures
    known = [[r.content.known(o.provenance) for o in made] for r in recorders]
    assert all(ids == known[0] for ids in known) and None not in known[0]
    assert_no_duplicate_content(db_url)
    for recorder in recorders:
        recorder.close()


def test_a_changed_component_adds_a_row_and_old_results_keep_theirs(tmp_path, outcomes):
    url = f"sqlite:///{tmp_path / 'h.db'}"
    Recorder(url, "s1").record(outcomes[0], {})
    changed = copy.deepcopy(outcomes[0])
    changed.provenance["condition"]["content"] = "different"
    changed.provenance["condition"]["hash"] = "f" * 64
    recorder = Recorder(url, "s2")
    recorder.record(changed, {})
    with Session(recorder.engine) as session:
        results = session.exec(select(Result).order_by(Result.id)).all()
        conditions = session.exec(
            select(Condition).where(Condition.code == "C1").order_by(Condition.id)
        ).all()
    assert len(conditions) == 2
    assert [r.condition_id for r in results] == [conditions[0].id, conditions[1].id]


@pytest.mark.parametrize("counted_by", ["triggers", "recorder"])
def test_adopted_run_replaces_a_case_s_earlier_result(tmp_path, outcomes, counted_by):
    url = f"sqlite:///{tmp_path / 'h.db'}"
    if counted_by == "recorder":
        upgrade(url)
        with make_engine(url).begin() as conn:
            conn.exec_driver_sql("drop trigger result_counts_after_insert")
            conn.exec_driver_sql("drop trigger result_counts_after_delete")
    first = Recorder(url, "s1")
    errored = copy.deepcopy(outcomes[0])
    errored.status = "error"
    run_id = first.record(errored, {})
    first.finish({"m/one": "interrupted"})
    second = Recorder(url, "s2")
    second.adopt("m/one", run_id, {})
    assert second.record(outcomes[0], {}) == run_id
    second.finish({"m/one": "completed"})
    with Session(second.engine) as session:
        run = session.get(EvaluationRun, run_id)
        rows = session.exec(select(Result)).all()
    assert [r.status for r in rows] == ["passed"]
    assert (run.status, run.passed_tests, run.error_tests, run.total_tests) == ("completed", 1, 0, 1)
    assert run.cost_usd == pytest.approx(0.02)  # the replaced answer was paid for: its cost stays


def test_unusable_database_is_a_storage_error(tmp_path):
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(
        StorageError, match="cannot create the folder .*file for the database .*: File exists"
    ):
        upgrade(f"sqlite:///{tmp_path / 'file' / 'x.db'}")
    (tmp_path / "db-is-a-folder.db").mkdir()
    with pytest.raises(
        StorageError, match="cannot migrate the database .*db-is-a-folder.db: OperationalError"
    ):
        upgrade(f"sqlite:///{tmp_path / 'db-is-a-folder.db'}")


def test_cache_entries_are_written_in_batches_with_results_and_all_at_finish(db_url, outcomes, monkeypatch):
    """One cache statement per CACHE_BATCH Results, inside a Result's transaction; finish writes the rest
    (on PostgreSQL the Results between batches go as one statement each, the entries held back)."""
    from pytest_helmbench.storage import recorder as storage
    from pytest_helmbench.storage.recorder import CACHE_BATCH

    monkeypatch.setattr(storage, "CACHE_BATCH_SECONDS", 3600.0)  # only the count triggers a batch here
    url = db_url
    recorder = Recorder(url, "s1")
    total = CACHE_BATCH + 5
    for i in range(total):
        outcome = copy.deepcopy(outcomes[i % len(outcomes)])
        outcome.case_code, outcome.repeat = f"{outcome.case_code}-{i}", i
        outcome.cache_writes = [
            {
                "key": f"k{i}",
                "model_id": "m/one",
                "raw_response": "{}",
                "prompt_tokens": 1,
                "completion_tokens": 1,
                "cost_usd": 0.01,
                "latency_ms": 5.0,
            }
        ]
        recorder.record(outcome, {})

    def cached() -> int:
        with Session(make_engine(url)) as session:
            return len(session.exec(select(CachedResponse)).all())

    assert cached() == CACHE_BATCH  # the batch went in with the CACHE_BATCH-th Result
    recorder.finish({"m/one": "completed"})
    recorder.close()
    assert cached() == total


def test_answers_finished_ahead_are_stored_with_the_result_being_recorded(
    db_url, outcomes, caplog, monkeypatch
):
    """Recorder.record's `ahead` (storage/early.py): answers stored in the same commit as the Result
    recorded; their own record() then writes nothing. Errors, and answers of a run not known yet, are
    left to their items. The rows and counters are those of one Result at a time."""
    from sqlalchemy import event

    from pytest_helmbench.storage.result_rows import DriverStatement
    from tests.test_faults import assert_counters_agree

    outcomes[1].status, outcomes[2].status, outcomes[3].status = "failed", "error", "passed"
    recorder = Recorder(db_url, "s1")
    commits: list[str] = []  # each statement writing Results: SQLAlchemy's, or store_results' own
    event.listen(
        recorder.engine,
        "before_cursor_execute",
        lambda _c, _cur, sql, *_a: (
            sql.lstrip().upper().startswith("INSERT INTO RESULT") and commits.append("insert")
        ),
    )
    real_execute = DriverStatement.execute
    monkeypatch.setattr(
        DriverStatement, "execute", lambda *args: commits.append("insert") or real_execute(*args)
    )
    recorder.prepare_content(o.provenance for o in outcomes)
    recorder.record(outcomes[0], {"temperature": 0}, ahead=outcomes[1:3])  # its run is new: alone
    assert query(db_url, "select case_code from result") == [(outcomes[0].case_code,)]
    commits.clear()
    ahead = [outcomes[4], *outcomes[1:4], outcomes[0], outcomes[5]]
    recorder.record(outcomes[4], {"temperature": 0}, ahead=ahead)
    assert commits.count("insert") == 1  # one statement (PostgreSQL) or one transaction (SQLite)
    stored = {code for (code,) in query(db_url, "select case_code from result")}
    assert stored == {outcomes[i].case_code for i in (0, 1, 3, 4, 5)}  # not the error: it may be rerun
    commits.clear()
    for i in (1, 3):  # their items report them: nothing is written
        recorder.record(outcomes[i], {"temperature": 0})
    assert commits == []
    recorder.record(outcomes[2], {"temperature": 0})  # the error, stored when its item reports it
    changed = replace(outcomes[5], status="failed")
    recorder.record(changed, {"temperature": 0})  # reported otherwise than stored (it cannot be): replaced
    recorder.finish({"m/one": "completed"})
    recorder.close()
    assert "stored before it was reported, otherwise" in caplog.text
    rows = query(db_url, "select case_code, status from result order by case_code")
    assert len(rows) == len({code for code, _ in rows}) == 6
    assert dict(rows)[outcomes[1].case_code] == "failed" and dict(rows)[outcomes[5].case_code] == "failed"
    assert_counters_agree(db_url)
    run = query(
        db_url, "select total_tests, passed_tests, failed_tests, error_tests, cost_usd from evaluationrun"
    )
    assert run[0][:4] == (5, 3, 2, 1) and run[0][4] == pytest.approx(0.07)  # a replaced Result's spend stays


def test_a_result_statement_failing_on_postgresql_is_a_storage_error_and_the_next_one_reconnects(
    postgres_url, outcomes
):
    """store_results goes to psycopg directly (result_rows.DriverStatement): its errors are still
    StorageErrors naming the database, and the broken connection is not used again."""
    recorder = Recorder(postgres_url, "s1")
    try:
        recorder.prepare_content(o.provenance for o in outcomes)
        recorder.record(outcomes[0], {})
        recorder.record(outcomes[1], {})  # the one-statement path, on its autocommit connection
        pid = recorder._autocommit().connection.driver_connection.info.backend_pid
        query(postgres_url, f"select pg_terminate_backend({pid})")
        with pytest.raises(StorageError, match=r"cannot write to postgresql\+psycopg://"):
            recorder.record(outcomes[2], {})
        recorder.record(outcomes[2], {})
        recorder.record(outcomes[3], {})
        recorder.finish({"m/one": "completed"})
    finally:
        recorder.close()
    assert len(query(postgres_url, "select id from result")) == 4


def test_creating_a_database_leaves_no_lock_file_beside_it(tmp_path):
    """#31.6: the schema lock of a SQLite file lives in the temporary folder, one per database path,
    not as `helmbench.db.lock` in the user's project."""
    from pytest_helmbench.storage.engine import schema_lock_file, upgrade

    database = tmp_path / "helmbench.db"
    upgrade(f"sqlite:///{database}")
    assert sorted(p.name for p in tmp_path.iterdir() if "lock" in p.name) == []
    lock = schema_lock_file(database)
    assert lock.parent != tmp_path and lock == schema_lock_file(tmp_path / "." / "helmbench.db")
    assert schema_lock_file(tmp_path / "other.db") != lock
