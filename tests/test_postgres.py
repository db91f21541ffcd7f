"""Storage on a real PostgreSQL server (tests/postgres_server.py): migrations, counters, an end-to-end run."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlmodel import SQLModel

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
