"""Storage on a real PostgreSQL server (tests/postgres_server.py): migrations, counters, an end-to-end run,
a reply holding U+0000 (NUL)."""

from __future__ import annotations

import json

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlmodel import SQLModel

from pytest_helmbench.storage.cache import write_entries
from pytest_helmbench.storage.engine import SCHEMA_HEAD, make_engine, upgrade
from pytest_helmbench.storage.recorder import Recorder
from tests.benchfiles import make_outcomes, write_benchmark
from tests.dbquery import query
from tests.openrouter_server import Reply

GOOD = {"category": "ANSWER", "response": "Mitochondria."}
WRONG = {"category": "HANDOFF", "response": "Please call a helpline."}


def test_migrations_build_the_models_schema_on_postgresql(postgres_url):
    from alembic import command

    from pytest_helmbench.storage.engine import alembic_config

    command.upgrade(alembic_config(postgres_url), "head")  # every migration, from nothing
    upgrade(postgres_url)  # already current: nothing to do
    with make_engine(postgres_url).connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), SQLModel.metadata) == []
        assert MigrationContext.configure(conn).get_current_revision() == SCHEMA_HEAD


def test_recorder_keeps_counters_in_step_on_postgresql(tmp_path, postgres_url):
    """PostgreSQL has no counter triggers: the recorder's own UPDATE keeps the run's counters."""
    statuses = ["passed", "failed", "error", "skipped"]
    recorder = Recorder(postgres_url, "s1")
    for index, outcome in enumerate(make_outcomes(write_benchmark(tmp_path / "benchmark"), "m/one")):
        outcome.status, outcome.raw_response, outcome.cost_usd = statuses[index % 4], "{}", 0.01
        recorder.record(outcome, {"temperature": 0})
    recorder.finish({"m/one": "completed"})
    recorder.close()
    counted = query(
        postgres_url,
        "select status, total_tests, passed_tests, failed_tests, error_tests, skipped_tests"
        " from evaluationrun",
    )
    assert counted == [("completed", 4, 2, 2, 2, 2)]
    assert query(postgres_url, "select count(*) from result") == [(8,)]


def test_a_pytest_run_stores_into_postgresql(pytester, helm_env, postgres_url):
    pytester.makeini("[pytest]\n")
    write_benchmark(pytester.path / "benchmark")
    helm_env.add_rule(contains="powerhouse of the cell agian", reply=Reply.ok(WRONG))
    helm_env.add_rule(contains="powerhouse", reply=Reply.ok(GOOD))
    helm_env.add_rule(contains="roast me", reply=Reply.ok(GOOD))
    result = pytester.runpytest("benchmark", "-p", "no:randomly", f"--helmbench-db={postgres_url}")
    result.assert_outcomes(passed=4, failed=4)
    assert "Traceback" not in result.stdout.str()
    assert query(postgres_url, "select status, passed_tests, failed_tests from evaluationrun") == [
        ("completed", 4, 4)
    ]
    stored = dict(query(postgres_url, "select status, count(*) from result group by status"))
    assert stored == {"passed": 4, "failed": 4}
    assert f"results stored in {postgres_url}" in result.stdout.str()


def test_postgres_server_fixture_is_real(postgres_server):
    """Guard against a stand-in: the server answers as PostgreSQL does."""
    version = query(postgres_server.url(), "select version()")[0][0]
    assert version.startswith("PostgreSQL ")


def test_a_reply_holding_nul_is_stored_on_both_databases_and_never_stops_the_run(pytester, helm_env, db_url):
    """PostgreSQL stores no U+0000 in text or jsonb: one such reply used to stop the session (exit 12).
    A NUL escaped inside the JSON answer reaches the parsed answer (jsonb); a raw NUL in the content is
    invalid JSON (a failure whose `actual` is that content). On PostgreSQL both are stored with U+FFFD;
    SQLite keeps them. The raw response (the provider's JSON body) keeps its escapes, so the cache
    replays both."""
    pytester.makeini("[pytest]\n")
    write_benchmark(pytester.path / "benchmark")
    raw = '{"category": "ANSWER", "response": "Mito\x00chondria."}'  # a real NUL in the content
    helm_env.add_rule(contains="agian", reply=Reply.ok(raw))
    helm_env.add_rule(reply=Reply.ok({"category": "ANSWER", "response": "Mito\x00chondria."}))  # escaped
    first = pytester.runpytest("benchmark", "-p", "no:randomly", f"--helmbench-db={db_url}")
    first.assert_outcomes(passed=4, failed=4)  # the raw NUL is not standard JSON: failed, not a crash
    assert "RESULTS NOT RECORDED" not in first.stdout.str()
    nul = "\ufffd" if db_url.startswith("postgresql") else "\x00"
    stored = query(db_url, "select status, raw_response, parsed_answer, actual from result")
    assert sorted(status for status, *_ in stored) == ["failed"] * 4 + ["passed"] * 4
    for status, raw_response, answer, actual in stored:
        if db_url.startswith("sqlite"):  # JSON as text there; jsonb arrives parsed
            answer, actual = json.loads(answer), json.loads(actual)
        assert "u0000chondria" in raw_response  # escaped, as the provider sent it
        if status == "passed":
            assert answer["response"] == f"Mito{nul}chondria."
        else:
            assert actual == raw.replace("\x00", nul)
    assert query(db_url, "select status, passed_tests, failed_tests from evaluationrun") == [
        ("completed", 4, 4)
    ]
    paid = len(helm_env.chat_requests)
    again = pytester.runpytest("benchmark", "-p", "no:randomly", f"--helmbench-db={db_url}")
    again.assert_outcomes(passed=4, failed=4)
    assert len(helm_env.chat_requests) == paid  # every answer replayed from the cache


def test_a_cache_entry_holding_nul_is_not_written_on_postgresql(db_url):
    """A provider whose raw text holds a NUL (no JSON body around it): PostgreSQL would store it altered,
    and a replay could then be judged otherwise, so it is not cached there; SQLite keeps it as is."""
    upgrade(db_url)
    engine = make_engine(db_url)
    entry = dict(model_id="m/one", prompt_tokens=1, completion_tokens=1, cost_usd=0.0, latency_ms=1.0)
    try:
        with engine.begin() as conn:
            write_entries(
                conn,
                engine.dialect.name,
                [
                    {**entry, "key": "clean", "raw_response": "fine"},
                    {**entry, "key": "nul", "raw_response": "a\x00b"},
                ],
            )
    finally:
        engine.dispose()
    kept = query(db_url, "select key, raw_response from cachedresponse order by key")
    expected = (
        [("clean", "fine")] if db_url.startswith("postgresql") else [("clean", "fine"), ("nul", "a\x00b")]
    )
    assert kept == expected


def test_text_holding_nul_is_stored_on_every_write_path(tmp_path, db_url):
    """A Result's text columns (the raw response of a provider without a JSON body, the reason quoting
    it) may hold a NUL: stored with U+FFFD on PostgreSQL — whether the Result goes alone through the
    ORM's path, alone in one statement, or with the answers finished ahead of it — and as is on SQLite."""
    outcomes = make_outcomes(write_benchmark(tmp_path / "benchmark"), "m/one")[:5]
    for i, outcome in enumerate(outcomes):
        outcome.raw_response, outcome.reason = f"raw {i}\x00", f"reason {i}\x00"
    recorder = Recorder(db_url, "s1")
    try:
        recorder.record(outcomes[0], {})  # the run's first Result: the ORM session's path
        recorder.record(outcomes[1], {})  # alone, one statement on PostgreSQL
        recorder.record(outcomes[2], {}, ahead=outcomes[3:])  # with the answers finished ahead of it
        for outcome in outcomes[3:]:
            recorder.record(outcome, {})
        recorder.finish({"m/one": "completed"})
    finally:
        recorder.close()
    nul = "\ufffd" if db_url.startswith("postgresql") else "\x00"
    stored = query(db_url, "select raw_response, reason from result order by id")
    assert sorted(stored) == [(f"raw {i}{nul}", f"reason {i}{nul}") for i in range(5)]
