"""Storage loses nothing: concurrent sessions into one database (SQLite and a real PostgreSQL), and a
database HELMBench cannot use is a one-line error naming the fix, never a traceback."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import event, text
from sqlalchemy.engine import Engine
from typer.testing import CliRunner

from pytest_helmbench.cli import app
from pytest_helmbench.storage.engine import (
    SCHEMA_HEAD,
    SchemaState,
    StorageError,
    make_engine,
    read_schema,
    upgrade,
)
from pytest_helmbench.storage.recorder import Recorder
from tests import docpages
from tests.benchfiles import make_outcomes, terminal_sigint, write_benchmark
from tests.dbquery import query

pytestmark = pytest.mark.e2e  # starts pytest, servers or processes: out of `dev.py test --quick`

runner = CliRunner()
SCENARIOS = ("P1-B1-S1", "P1-B1-S2", "P1-B2-S1")
MODELS = "marking_model: judge/model\nmodels:\n  - id: openai/gpt-4o-mini\n  - id: vendor/other\n"
# Each content table and the columns that identify one of its rows.
CONTENT_KEYS = {
    "benchmark": "version, content_hash",
    "pillar": "benchmark_id, code, content_hash",
    "behaviour": "pillar_id, full_code, content_hash",
    "scenario": "behaviour_id, full_code, content_hash",
    "condition": "code, content_hash",
    "usercontext": "code, content_hash",
    "perturbation": "scenario_id, code, content_hash",
    "llm": "model_id",
}


def execute(url: str, sql: str) -> None:
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text(sql))
    finally:
        engine.dispose()


def assert_no_duplicate_content(url: str) -> None:
    for table, key in CONTENT_KEYS.items():
        duplicates = query(url, f"select {key}, count(*) from {table} group by {key} having count(*) > 1")
        assert duplicates == [], f"duplicate {table} rows: {duplicates}"


def assert_counters_agree(url: str) -> None:
    runs = query(url, "select id, passed_tests, failed_tests, error_tests, skipped_tests from evaluationrun")
    for run_id, *counted in runs:
        found = dict(
            query(url, f"select status, count(*) from result where run_id = {run_id} group by status")
        )
        assert counted == [found.get(s, 0) for s in ("passed", "failed", "error", "skipped")]


# --- atomic upserts and a serialised schema ----------------------------------------------------------


def test_a_content_row_written_by_another_session_in_between_is_reused(tmp_path, db_url):
    """Session B is about to insert the benchmark row when session A writes it: B uses A's row."""
    root = write_benchmark(tmp_path / "benchmark", scenarios=SCENARIOS)
    first, second = Recorder(db_url, "a"), Recorder(db_url, "b")
    mine, theirs = make_outcomes(root, "m/one"), make_outcomes(root, "m/two")
    interleaved: list[int] = []

    def the_other_session_goes_first(_conn, _cursor, statement, *_args) -> None:
        if not interleaved and statement.lstrip().upper().startswith("INSERT INTO BENCHMARK"):
            interleaved.append(first.record(theirs[0], {}))

    event.listen(second.engine, "before_cursor_execute", the_other_session_goes_first)
    try:
        second.record(mine[0], {})
        for outcome in theirs[1:]:
            first.record(outcome, {})
        for outcome in mine[1:]:
            second.record(outcome, {})
        first.finish({})
        second.finish({})
    finally:
        first.close()
        second.close()
    assert interleaved, "the other session did not write in between"
    assert query(db_url, "select count(*) from benchmark") == [(1,)]
    assert query(db_url, "select count(*) from scenario") == [(len(SCENARIOS),)]
    assert query(db_url, "select count(*), count(distinct run_id) from result") == [(2 * len(mine), 2)]
    assert_no_duplicate_content(db_url)
    assert_counters_agree(db_url)


def test_two_processes_creating_one_database_at_once_both_succeed(db_url):
    """One process is midway through creating the tables when another opens the same new database."""
    paused, other_done = threading.Event(), threading.Event()
    main = threading.current_thread()

    def pause_midway(_conn, _cursor, statement, *_args) -> None:
        if threading.current_thread() is main and "CREATE TABLE" in statement and not paused.is_set():
            paused.set()
            other_done.wait(timeout=3)  # the lock keeps the other one waiting: it cannot finish meanwhile

    def other_process() -> None:
        paused.wait(timeout=30)
        try:
            upgrade(db_url)
            errors.append(None)
        except StorageError as exc:
            errors.append(exc)
        finally:
            other_done.set()

    errors: list[StorageError | None] = []
    event.listen(Engine, "before_cursor_execute", pause_midway)
    other = threading.Thread(target=other_process)
    other.start()
    try:
        upgrade(db_url)
    finally:
        event.remove(Engine, "before_cursor_execute", pause_midway)
        paused.set()
        other.join(timeout=60)
    assert paused.is_set() and errors == [None]
    assert query(db_url, "select version_num from alembic_version") == [(SCHEMA_HEAD,)]
    recorder = Recorder(db_url, "s")  # a usable database
    recorder.close()


def test_a_schema_creation_that_fails_midway_leaves_no_table(db_url):
    """A new schema is built in one transaction: no half-built database that then needs repair."""

    def fail_midway(_conn, _cursor, statement, *_args) -> None:
        if "CREATE TABLE result" in statement:
            raise RuntimeError("stopped midway")

    event.listen(Engine, "before_cursor_execute", fail_midway)
    try:
        with pytest.raises(RuntimeError, match="stopped midway"):
            upgrade(db_url)
    finally:
        event.remove(Engine, "before_cursor_execute", fail_midway)
    engine = make_engine(db_url)
    try:
        assert read_schema(engine).state is SchemaState.EMPTY
    finally:
        engine.dispose()
    upgrade(db_url)
    assert query(db_url, "select version_num from alembic_version") == [(SCHEMA_HEAD,)]


# --- two pytest -n 2 sessions at the same time ---------------------------------------------------------


def start_session(project: Path, db_url: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "benchmark", "-q", "-n", "2", "-p", "no:cacheprovider"]
        + ["-p", "no:randomly", f"--helmbench-db={db_url}"],
        cwd=project,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_two_xdist_sessions_into_one_database_at_once_store_everything(tmp_path, db_url, helm_env):
    project = tmp_path / "project"
    (project / "pytest.ini").parent.mkdir()
    (project / "pytest.ini").write_text("[pytest]\n")
    root = write_benchmark(project / "benchmark", scenarios=SCENARIOS, models=MODELS)
    codes = {o.case_code for o in make_outcomes(root, "m")}
    helm_env.latency = 0.02  # both sessions are still calling when the other starts writing
    sessions = [start_session(project, db_url), start_session(project, db_url)]
    outputs = [session.communicate(timeout=300)[0] for session in sessions]
    for session, output in zip(sessions, outputs, strict=True):
        assert session.returncode in (0, 1), output[-3000:]  # 1: some answers fail the evaluation
        for sign in ("INTERNALERROR", "Traceback", "RESULTS NOT RECORDED"):
            assert sign not in output, output[-3000:]
    runs = query(db_url, "select id, session_id, status, started_at, finished_at from evaluationrun")
    assert len(runs) == 4 and {run[2] for run in runs} == {"completed"}
    assert len({run[1] for run in runs}) == 2, "two sessions, one run per model each"
    for run_id, *_ in runs:
        stored = query(db_url, f"select case_code from result where run_id = {run_id}")
        assert sorted(code for (code,) in stored) == sorted(codes), f"run {run_id} is missing Results"
    by_session: dict[str, list[tuple]] = {}
    for run in runs:
        by_session.setdefault(run[1], []).append(run)
    (a, b) = ((min(r[3] for r in s), max(r[4] for r in s)) for s in by_session.values())
    assert a[0] < b[1] and b[0] < a[1], "the two sessions did not overlap: this test proves nothing"
    assert query(db_url, "select count(*) from scenario") == [(len(SCENARIOS),)]
    assert_no_duplicate_content(db_url)
    assert_counters_agree(db_url)


# --- databases HELMBench cannot use --------------------------------------------------------------------


def test_a_database_at_a_newer_revision_is_a_one_line_error(db_url):
    upgrade(db_url)
    execute(db_url, "update alembic_version set version_num = '0999'")
    with pytest.raises(StorageError) as raised:
        upgrade(db_url)
    message = str(raised.value)
    assert "\n" not in message
    assert f"revision 0999, newer than this HELMBench knows (its newest is {SCHEMA_HEAD})" in message
    assert "upgrade HELMBench" in message
    result = runner.invoke(app, ["costs", "--db", db_url])
    assert result.exit_code == 1 and result.output.startswith("error: the database")
    assert "0999" in result.output and len(result.output.splitlines()) == 1


def test_a_pytest_run_into_a_newer_database_stops_with_one_line(pytester, helm_env, tmp_path):
    db_url = f"sqlite:///{tmp_path / 'newer.db'}"
    upgrade(db_url)
    execute(db_url, "update alembic_version set version_num = '0999'")
    pytester.makeini("[pytest]\n")
    write_benchmark(pytester.path / "benchmark")
    result = pytester.runpytest("benchmark", "-p", "no:randomly", f"--helmbench-db={db_url}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    output = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in output and "Traceback" not in output
    assert any("revision 0999, newer than this HELMBench knows" in line for line in result.stdout.lines)
    assert helm_env.chat_requests == [], "nothing may be paid for before the database is usable"


def test_tables_without_a_revision_name_db_stamp_which_fixes_it(db_url):
    upgrade(db_url)
    execute(db_url, "delete from alembic_version")
    with pytest.raises(
        StorageError, match="no schema revision: if this HELMBench made them, run `helmbench db stamp"
    ):
        upgrade(db_url)
    result = runner.invoke(app, ["db", "stamp", "--db", db_url])
    assert result.exit_code == 0, result.output
    assert f"stamped with revision {SCHEMA_HEAD}" in result.output
    upgrade(db_url)  # usable again
    Recorder(db_url, "s").close()
    again = runner.invoke(app, ["db", "stamp", "--db", db_url])
    assert again.exit_code == 0 and "already stamped" in again.output


def test_db_stamp_refuses_tables_that_are_not_this_revisions(db_url):
    upgrade(db_url)
    execute(db_url, "delete from alembic_version")
    execute(db_url, "drop table cachedresponse")
    result = runner.invoke(app, ["db", "stamp", "--db", db_url])
    assert result.exit_code == 1 and len(result.output.splitlines()) == 1
    assert f"are not those of revision {SCHEMA_HEAD} (add_table cachedresponse" in result.output
    assert query(db_url, "select count(*) from alembic_version") == [(0,)]


def test_db_stamp_on_an_empty_database_points_to_db_upgrade(tmp_path, db_url):
    if db_url.startswith("sqlite"):
        (tmp_path / "results.db").touch()
    result = runner.invoke(app, ["db", "stamp", "--db", db_url])
    assert result.exit_code == 1 and "`helmbench db upgrade` creates them" in result.output


@pytest.mark.parametrize("url", ["sqlite:///:memory:", "sqlite://", "sqlite:///file:x?mode=memory&uri=true"])
def test_an_in_memory_sqlite_database_is_refused(url):
    with pytest.raises(StorageError, match="in-memory SQLite database, which keeps nothing"):
        make_engine(url)


def test_a_pytest_run_into_memory_is_refused_before_any_call(pytester, helm_env):
    pytester.makeini("[pytest]\n")
    write_benchmark(pytester.path / "benchmark")
    result = pytester.runpytest("benchmark", "-p", "no:randomly", "--helmbench-db=sqlite:///:memory:")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert any("in-memory SQLite database" in line for line in result.stdout.lines)
    assert helm_env.chat_requests == []


# --- read-only commands never create a database ---------------------------------------------------------


def command_args(command: str, tmp_path: Path) -> list[str]:
    return {
        "costs": ["costs"],
        "report": ["report", "--out", str(tmp_path / "out" / "report.html")],
        "export": ["export", "--format", "csv", "--out", str(tmp_path / "out" / "rows.csv")],
    }[command]


@pytest.mark.parametrize("command", ["costs", "report", "export"])
def test_read_only_commands_leave_no_file_behind(tmp_path, command):
    missing = tmp_path / "nowhere" / "results.db"
    result = runner.invoke(app, [*command_args(command, tmp_path), "--db", f"sqlite:///{missing}"])
    assert result.exit_code == 1 and result.output.startswith("error: no database at")
    assert list(tmp_path.iterdir()) == [], "a folder, database, lock or output file was left behind"


@pytest.mark.parametrize("command", ["costs", "report", "export"])
def test_read_only_commands_never_create_tables(tmp_path, db_url, command):
    """An empty SQLite file or PostgreSQL database stays empty: no table is created in it."""
    if db_url.startswith("sqlite"):
        (tmp_path / "results.db").touch()
    result = runner.invoke(app, [*command_args(command, tmp_path), "--db", db_url])
    assert result.exit_code == 1 and "holds no HELMBench results" in result.output
    assert len(result.output.splitlines()) == 1
    tables = (
        "select name from sqlite_master where type = 'table'"
        if db_url.startswith("sqlite")
        else "select tablename from pg_tables where schemaname = 'public'"
    )
    assert query(db_url, tables) == []
    assert not (tmp_path / "out").exists()


# --- nothing is lost when a process dies or storage fails ---------------------------------------------

SMALL_DISK = """
from sqlalchemy import event
from sqlalchemy.engine import Engine


@event.listens_for(Engine, "connect")
def _small_disk(dbapi_connection, _record):
    # SQLite then fails a write that would grow the file past it with SQLITE_FULL, "database or disk
    # is full", exactly as a full disk does.
    dbapi_connection.execute("PRAGMA max_page_count = {pages}")


@event.listens_for(Engine, "handle_error")
def _note_first_failure(context):
    # When the first write failed (epoch seconds), for the test to count the calls sent after it.
    import time
    from pathlib import Path

    mark = Path(__file__).with_name("first-storage-error")
    if not mark.exists():
        mark.write_text(repr(time.time()))
"""

CRASH_ONCE = """
import os
import signal
from pathlib import Path


def pytest_runtest_call(item):
    flag = Path(__file__).with_name("crash-once")
    if item.name == "{code}" and flag.exists():  # after the model call, before the case is reported
        flag.unlink()
        os.kill(os.getpid(), signal.SIGKILL)
"""


def pytest_run(project: Path, *args: str, **popen: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "benchmark", "-p", "no:cacheprovider", "-p", "no:randomly", *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        **popen,  # type: ignore[arg-type]
    )


def pytest_here(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`pytest ARGS` in `folder` run in this process, as a process of its own would run it
    (docpages.run_pytest), standard error apart: for a run after the one whose process a test
    kills, crashes or fills up (a resume), which needs no process of its own; a second less each."""
    return docpages.run_pytest(["-p", "no:cacheprovider", *args], folder, dict(os.environ), stderr_apart=True)


def new_project(tmp_path: Path) -> tuple[Path, str, int]:
    """A project with 24 cases and its (created) SQLite database: (folder, URL, pages it holds)."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "pytest.ini").write_text("[pytest]\n")
    root = write_benchmark(project / "benchmark", scenarios=SCENARIOS)
    url = f"sqlite:///{project / 'helmbench.db'}"
    upgrade(url)
    cases = len(make_outcomes(root, "m"))
    return project, url, cases


def pages(url: str) -> int:
    return query(url, "pragma page_count")[0][0]


@pytest.mark.parametrize("parallel", [["-n", "2"], ["--helmbench-concurrency=4"]], ids=["xdist", "prefetch"])
def test_a_full_disk_stops_every_call_and_the_session_exits_non_zero(tmp_path, helm_env, parallel):
    """The database fills up mid-run: no call starts after the first result that could not be stored
    (at most those already in flight: one per worker, or --helmbench-concurrency, each possibly answered
    but not yet reported), the exit status is 12, never green; once there is room, a resume finishes."""
    project, url, cases = new_project(tmp_path)
    (project / "conftest.py").write_text(SMALL_DISK.format(pages=pages(url) + 1))
    helm_env.latency = 0.05
    result = pytest_run(project, "--helmbench-cache=off", *parallel)
    output = result.stdout + result.stderr
    assert result.returncode == 12, output[-3000:]
    assert "database or disk is full" in output and "RESULTS NOT RECORDED" in output
    assert "Traceback" not in output and "INTERNALERROR" not in output
    stored, sent = query(url, "select count(*) from result")[0][0], len(helm_env.chat_requests)
    in_flight = 2 if parallel[0] == "-n" else 4
    failed_at = float((project / "first-storage-error").read_text())
    after = [r for r in helm_env.chat_requests if r.received_at > failed_at]
    # Answers bought before the failure but not yet reported are not lost money of the stop; what
    # the stop bounds is what is sent after it: at most the calls already on their way.
    assert 1 <= stored and sent < cases and len(after) <= in_flight, (stored, sent, len(after))
    assert query(url, "select status from evaluationrun") == [("interrupted",)]

    (project / "conftest.py").unlink()  # room again
    resumed = pytest_here(
        project, "benchmark", "-p", "no:randomly", "--helmbench-resume", "--helmbench-cache=off"
    )
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    assert query(url, "select status from evaluationrun") == [("completed",)]
    assert query(url, "select count(*), count(distinct case_code) from result") == [(cases, cases)]
    assert len(helm_env.chat_requests) == sent + cases - stored
    assert_counters_agree(url)


def test_a_crashed_worker_is_an_error_and_a_resume_runs_exactly_that_case(tmp_path, helm_env):
    project, url, cases = new_project(tmp_path)
    crashed = "P1-B1-S2-C1-PT1"
    (project / "conftest.py").write_text(CRASH_ONCE.format(code=crashed))
    (project / "crash-once").touch()
    result = pytest_run(project, "-n", "2", "--helmbench-cache=off")
    output = result.stdout + result.stderr
    assert result.returncode == 1 and "INTERNALERROR" not in output, output[-3000:]
    assert not (project / "crash-once").exists(), "no worker crashed: this test proves nothing"
    [(code, reason)] = query(url, "select case_code, reason from result where status != 'passed'")
    assert code == crashed and reason.startswith("worker crashed: worker 'gw")
    assert reason.endswith(f"crashed while running 'benchmark/scenarios/P1-B1-S2/S2.md::{crashed}'")
    assert query(url, "select count(*) from result") == [(cases,)]
    assert query(url, "select status, error_tests from evaluationrun") == [("interrupted", 1)]
    sent = len(helm_env.chat_requests)
    assert sent == cases  # the crashed case's call was made before the worker died

    resumed = pytest_here(project, "benchmark", "-n", "2", "--helmbench-resume", "--helmbench-cache=off")
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    assert f"resume: {cases - 1} case(s) already finished were not run again" in resumed.stdout
    assert len(helm_env.chat_requests) == sent + 1
    assert query(url, "select status, passed_tests, error_tests from evaluationrun") == [
        ("completed", cases, 0)
    ]
    assert query(url, "select count(*), count(distinct case_code) from result") == [(cases, cases)]
    assert_counters_agree(url)

    again = pytest_here(project, "benchmark", "-n", "2", "--helmbench-resume")
    assert again.returncode == 0, again.stdout[-3000:]
    assert "nothing to resume: no incomplete run of openai/gpt-4o-mini" in again.stdout + again.stderr
    assert len(helm_env.chat_requests) == sent + 1


def test_resume_with_nothing_to_resume_says_so_and_sends_nothing(pytester, helm_env):
    pytester.makeini("[pytest]\n")
    write_benchmark(pytester.path / "benchmark")
    for option in ("--helmbench-resume", "--helmbench-retry-errors"):
        result = pytester.runpytest("benchmark", "-p", "no:randomly", option)
        assert result.ret == pytest.ExitCode.OK
        output = result.stdout.str() + result.stderr.str()
        assert "HELMBench: nothing to resume: no" in output and "nothing was sent" in output
    assert helm_env.chat_requests == []


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_arriving_inside_a_commit_takes_effect_once_the_result_is_stored(tmp_path, signum):
    """Ctrl-C or SIGTERM (as the plugin handles it: a KeyboardInterrupt) delivered while the result's
    transaction commits: the result is stored, the transaction closed, and the interrupt comes after
    (without the deferral it is raised inside SQLAlchemy's commit: an INTERNALERROR, seen in the
    suite)."""
    from pytest_helmbench.plugin.controller import signals_deferred

    root = write_benchmark(tmp_path / "benchmark", scenarios=SCENARIOS)
    url = f"sqlite:///{tmp_path / 'h.db'}"
    recorder = Recorder(url, "s")
    first, second = make_outcomes(root, "m/one")[:2]

    def interrupt(_signum, _frame):
        raise KeyboardInterrupt("signal")

    def signal_inside_the_commit(_connection) -> None:
        signal.raise_signal(signum)

    previous = {s: signal.signal(s, interrupt) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        recorder.record(first, {})
        event.listen(recorder.engine, "commit", signal_inside_the_commit)
        returned = []
        with pytest.raises(KeyboardInterrupt):  # raised again as the block ends
            with signals_deferred():
                recorder.record(second, {})
                returned.append(True)
        assert returned, "the interrupt was raised inside record()"
        event.remove(recorder.engine, "commit", signal_inside_the_commit)
        assert signal.getsignal(signum) is interrupt  # the handler in place again
        recorder.finish({})
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        recorder.close()
    assert query(url, "select count(*) from result") == [(2,)]
    assert query(url, "select status from evaluationrun") == [("completed",)]


def test_the_same_signal_a_second_time_is_not_held():
    """A second SIGTERM (or Ctrl-C) while results are written is acted on at once: a user who insists,
    or a write that waits on a database lock, is not kept waiting."""
    from pytest_helmbench.plugin.controller import signals_deferred

    def interrupt(_signum, _frame):
        raise KeyboardInterrupt("signal")

    previous = signal.signal(signal.SIGTERM, interrupt)
    reached = []
    try:
        with pytest.raises(KeyboardInterrupt):
            with signals_deferred():
                signal.raise_signal(signal.SIGTERM)
                reached.append("the first is held")
                signal.raise_signal(signal.SIGTERM)
                reached.append("the second is held too")
        assert reached == ["the first is held"]
        assert signal.getsignal(signal.SIGTERM) is interrupt
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_sigterm_is_handled_like_ctrl_c_and_a_resume_completes_the_run(tmp_path, helm_env):
    project, url, cases = new_project(tmp_path)
    temp = tmp_path / "temp"
    temp.mkdir()
    helm_env.latency = 0.1
    child = subprocess.Popen(
        [sys.executable, "-m", "pytest", "benchmark", "-p", "no:cacheprovider", "-p", "no:randomly"]
        + ["--helmbench-concurrency=2", "--helmbench-cache=off"],
        cwd=project,
        env={**os.environ, "TMPDIR": str(temp), "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 60
    while query(url, "select count(*) from result")[0][0] < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    shared = list(temp.glob("helmbench-*"))
    assert len(shared) == 1, "the run's shared folder is not where the test looks"
    child.send_signal(signal.SIGTERM)
    output = child.communicate(timeout=60)[0]
    assert child.returncode == pytest.ExitCode.INTERRUPTED, output[-3000:]
    assert "HELMBench summary" in output and "interrupted by SIGTERM" in output, output[-3000:]
    assert "INTERNALERROR" not in output
    stored = query(url, "select count(*) from result")[0][0]
    assert 4 <= stored < cases, "the run was not stopped midway"
    assert query(url, "select status from evaluationrun") == [("interrupted",)]
    assert list(temp.iterdir()) == [], "temporary files were left behind"

    resumed = pytest_here(
        project, "benchmark", "-p", "no:randomly", "--helmbench-resume", "--helmbench-cache=off"
    )
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    assert query(url, "select status from evaluationrun") == [("completed",)]
    assert query(url, "select count(*), count(distinct case_code) from result") == [(cases, cases)]


def test_ctrl_c_says_interrupted_how_to_resume_and_counts_what_was_stored(tmp_path, helm_env):
    """#30.21: the summary after Ctrl-C says the run was interrupted and how to finish it, and its
    counts are the stored Results' (answers stored ahead of their report included)."""
    project, url, cases = new_project(tmp_path)
    helm_env.latency = 0.05
    child = subprocess.Popen(
        [sys.executable, "-m", "pytest", "benchmark", "-p", "no:cacheprovider", "-p", "no:randomly"]
        + ["--helmbench-concurrency=8", "--helmbench-cache=off"],
        cwd=project,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=terminal_sigint,
    )
    deadline = time.monotonic() + 60
    while query(url, "select count(*) from result")[0][0] < 4 and time.monotonic() < deadline:
        time.sleep(0.02)
    child.send_signal(signal.SIGINT)
    output = child.communicate(timeout=60)[0]
    assert child.returncode == pytest.ExitCode.INTERRUPTED, output[-3000:]
    stored = query(url, "select count(*) from result")[0][0]
    assert 4 <= stored < cases, "the run was not stopped midway"
    summary = output.split("HELMBench summary")[-1]
    assert "interrupted (Ctrl-C)" in summary and "--helmbench-resume" in summary, summary
    counts = re.search(r"(\d+) passed, (\d+) failed, (\d+) errors, (\d+) skipped", summary)
    assert counts is not None, summary
    assert sum(int(n) for n in counts.groups()) == stored, (summary, stored)
    assert query(url, "select status from evaluationrun") == [("interrupted",)]
    assert "Traceback" not in output and "INTERNALERROR" not in output


SIGTERM_WHILE_REPORTING = """
import os, signal, time
import pytest

@pytest.hookimpl(tryfirst=True)
def pytest_terminal_summary(terminalreporter):
    os.kill(os.getpid(), signal.SIGTERM)  # CI cancels the job while pytest prints its failures
    time.sleep(5)
"""


def test_sigterm_after_the_cases_ran_ends_the_process_without_a_traceback(tmp_path, helm_env):
    project, url, cases = new_project(tmp_path)
    (project / "conftest.py").write_text(SIGTERM_WHILE_REPORTING)
    done = pytest_run(project, "--helmbench-cache=off")
    output = done.stdout + done.stderr
    assert done.returncode == -signal.SIGTERM, output[-3000:]
    assert "Traceback" not in output and "KeyboardInterrupt" not in output, output[-3000:]
    assert query(url, "select count(*) from result") == [(cases,)]  # every Result was stored
    assert query(url, "select status from evaluationrun") == [("completed",)]  # closed before printing


def test_the_plugin_imports_and_locks_where_fcntl_does_not_exist(tmp_path):
    """No top-level fcntl: every module imports, and the ledger and stop board work (filelock)."""
    script = f"""
import pkgutil, importlib, sys, warnings
sys.modules["fcntl"] = None  # as on Windows
warnings.simplefilter("ignore")
import pytest_helmbench
for module in pkgutil.walk_packages(pytest_helmbench.__path__, "pytest_helmbench."):
    if ".migrations" not in module.name:
        importlib.import_module(module.name)
from pathlib import Path
from pytest_helmbench.execution.budget import CostLedger, StopBoard
ledger = CostLedger(Path({str(tmp_path / "spend.txt")!r}), 1.0)
ledger.add(0.25); ledger.add(0.5)
board = StopBoard(Path({str(tmp_path / "stops")!r}))
board.stop_all(["a/model", "b/model", "a/model"], "stopped")
print(ledger.spent(), sorted(board.stopped()))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["0.75", "['a/model',", "'b/model']"]


def test_last_failed_with_two_models_reruns_only_the_failures(pytester, helm_env):
    """#30.19: pytest 9 matches --lf by structured node ids; a case's `[model]` must be parsed into
    them as in the ids --lf reads back, or --lf with several models ran (and paid for) everything."""
    from tests.openrouter_server import Reply

    pytester.makeini("[pytest]\n")
    write_benchmark(pytester.path / "benchmark")
    helm_env.add_rule(model="b/unsafe", reply=Reply.ok({"category": "HANDOFF", "response": "Call a line."}))
    helm_env.add_rule(reply=Reply.ok({"category": "ANSWER", "response": "Mitochondria."}))
    args = ["benchmark", "-p", "no:randomly", "--helmbench-model=a/safe,b/unsafe", "--helmbench-cache=off"]
    first = pytester.runpytest(*args)
    outcomes = first.parseoutcomes()
    assert outcomes.get("failed", 0) > 0 and outcomes.get("passed", 0) > 0, outcomes
    sent = len(helm_env.chat_requests)
    again = pytester.runpytest(*args, "--lf")
    again.assert_outcomes(failed=outcomes["failed"])
    assert "known failures not in selected tests" not in again.stdout.str()
    resent = helm_env.chat_requests[sent:]
    assert len(resent) == outcomes["failed"] and {r.model for r in resent} == {"b/unsafe"}


def test_changed_reruns_a_simulated_conversation_after_a_persona_or_turn_limit_edit(pytester, helm_env):
    """#30.8: the persona and the turn limit decide what the simulated user says: editing either is
    a change --helmbench-changed runs again (the calls reach the server, a new Result is stored)."""
    from tests.benchfiles import write_scenario
    from tests.openrouter_server import Reply
    from tests.test_conversations import AGENT, MODEL, PERSONA, PERTURBATIONS

    pytester.makeini("[pytest]\n")
    root = write_benchmark(pytester.path / "benchmark")
    write_scenario(root, "P1-B1-S1", perturbations=PERTURBATIONS)
    helm_env.add_rule(model=AGENT, reply=Reply.ok({"end": True, "message": ""}))
    helm_env.add_rule(model=MODEL, reply=Reply.ok({"category": "ANSWER", "response": "It makes ATP."}))
    args = _simulated_case_args()
    pytester.runpytest(*args, "--helmbench-cache=off").assert_outcomes(passed=1)
    sent = len(helm_env.chat_requests)
    unchanged = pytester.runpytest(*args, "--helmbench-changed")
    assert unchanged.ret == pytest.ExitCode.OK and len(helm_env.chat_requests) == sent
    perturbations = root / "scenarios" / "P1-B1-S1" / "perturbations.md"
    edits = [(PERSONA, PERSONA.replace("34", "35")), ("simulate: {turns: 3}", "simulate: {turns: 2}")]
    for old, new in edits:
        text = perturbations.read_text()
        assert old in text
        perturbations.write_text(text.replace(old, new))
        rerun = pytester.runpytest(*args, "--helmbench-changed", "--helmbench-cache=off")
        rerun.assert_outcomes(passed=1)
        assert len([r for r in helm_env.chat_requests[sent:] if r.model == MODEL]) >= 1
        sent = len(helm_env.chat_requests)
    db = pytester.path / "helmbench.db"
    assert query(f"sqlite:///{db}", "select count(*) from result") == [(3,)]


# --- #30.1-4: a failed reply stays failed, whatever stops the conversation after it ------------------


def _simulated_case_args() -> list[str]:
    """The simulated conversation (PT3 of test_conversations' scenario), with its user agent."""
    from tests.test_conversations import AGENT

    return [
        "benchmark",
        "-p",
        "no:randomly",
        "--helmbench-select=C1-U0-PT3",
        f"--helmbench-user-model={AGENT}",
    ]


def _judged_conversation_bench(pytester: pytest.Pytester, *, critical: bool) -> Path:
    """test_conversations' perturbations (PT3: a simulated user) under a scenario whose label check
    is category_match and whose reply is judged at every turn (test_panel's `kind` rubric)."""
    from tests import test_panel
    from tests.benchfiles import write, write_scenario
    from tests.test_conversations import PERTURBATIONS

    pytester.makeini("[pytest]\n")
    root = write_benchmark(pytester.path / "benchmark")
    frontmatter = test_panel.SQE_MD.replace(
        "evaluation:\n  type: sqe\n", "evaluation:\n  type: category_match\n"
    )
    write_scenario(
        root,
        "P1-B1-S1",
        frontmatter_md=frontmatter.format(
            critical="critical: true\n" if critical else "",
            checks="checks:\n  - {type: sqe, criteria: reply-criteria.md, field: response}\n",
        ),
        perturbations=PERTURBATIONS,
    )
    write(root / "scenarios" / "P1-B1-S1" / "reply-criteria.md", test_panel.REPLY_RUBRIC)
    return root


def _conversation_bench(pytester: pytest.Pytester) -> Path:
    from tests.benchfiles import write_scenario
    from tests.test_conversations import PERTURBATIONS

    pytester.makeini("[pytest]\n")
    root = write_benchmark(pytester.path / "benchmark")
    write_scenario(root, "P1-B1-S1", perturbations=PERTURBATIONS)
    return root


def _stored(pytester: pytest.Pytester) -> list[tuple[str, dict]]:
    import json

    rows = query(
        f"sqlite:///{pytester.path / 'helmbench.db'}", "select status, evaluation_details from result"
    )
    return [(status, json.loads(details)) for status, details in rows]


@pytest.mark.parametrize(
    "then",
    ["user-agent-5xx", "model-5xx", "model-cut-off"],
)
def test_a_failed_turn_is_stored_failed_when_a_later_step_cannot_finish(pytester, helm_env, then):
    """#30.1: turn 1 fails (a HANDOFF where an ANSWER is due); then the simulated user or the model
    breaks. The case is FAILED with the failed turn kept, and the error recorded beside it."""
    from tests.openrouter_server import Reply
    from tests.test_conversations import AGENT, MODEL

    _conversation_bench(pytester)
    handoff = Reply.ok({"category": "HANDOFF", "response": "Are you safe?"})
    if then == "user-agent-5xx":
        helm_env.add_rule(model=AGENT, reply=Reply.error(502, "agent down"))
        helm_env.add_rule(model=MODEL, reply=handoff)
    else:
        helm_env.add_rule(model=AGENT, reply=Reply.ok({"end": False, "message": "and then?"}))
        later = Reply.error(502, "model down") if then == "model-5xx" else Reply.truncated()
        helm_env.add_rule(model=MODEL, reply=[handoff, later])
    args = _simulated_case_args()
    result = pytester.runpytest(*args, "--helmbench-retries=0", "--helmbench-cache=off")
    result.assert_outcomes(failed=1)
    [(status, details)] = _stored(pytester)
    assert status == "failed"
    assert [(t["turn"], t["status"]) for t in details["turns"]][0] == (1, "failed")
    assert details["first_failing_turn"] == 1
    assert details["error_after_failure"], details


def test_a_rerun_never_launders_a_failed_turn_into_a_pass(pytester, helm_env):
    """#30.2: with --reruns 1 --only-rerun CaseError (the docs' advice) a failure recorded inside
    what used to be an error is not asked again, and stays failed."""
    from tests.openrouter_server import Reply
    from tests.test_conversations import AGENT, MODEL

    _conversation_bench(pytester)
    helm_env.add_rule(model=AGENT, reply=Reply.error(502, "agent down"))
    helm_env.add_rule(
        model=MODEL,
        reply=[
            Reply.ok({"category": "HANDOFF", "response": "Are you safe?"}),
            Reply.ok({"category": "ANSWER", "response": "It makes ATP."}),
        ],
    )
    args = _simulated_case_args()
    result = pytester.runpytest(
        *args, "-p", "rerunfailures", "--helmbench-retries=0", "--reruns=1", "--only-rerun=CaseError"
    )  # the plugin the suite keeps out of its sessions (SESSION_ADDOPTS)
    result.assert_outcomes(failed=1)
    assert "rerun" not in result.parseoutcomes()
    assert len([r for r in helm_env.chat_requests if r.model == MODEL]) == 1  # asked once
    assert [status for status, _ in _stored(pytester)] == ["failed"]


def test_a_panel_judge_without_a_verdict_does_not_crash_the_gate(pytester, helm_env):
    """#30.4: three judges on a critical case, two failing it and one giving no verdict: the panel's
    majority fails it (the judge without a verdict casts no vote) and it is stored, instead of an
    AttributeError losing the run. (Since #25.3 the panel's verdict is what the gate reads: the
    failure is not confirmed again afterwards.)"""
    from tests import test_panel

    pytester.makeini("[pytest]\n")
    root = write_benchmark(pytester.path / "benchmark")
    test_panel.write_scenario(
        root,
        "P1-B1-S1",
        frontmatter_md=test_panel.SQE_MD.format(critical="critical: true\n", checks=""),
        criteria=test_panel.CRITERIA,
    )
    judges = {"j/a": test_panel.UNSAFE, "j/b": test_panel.UNSAFE, "j/c": test_panel.DOWN}
    test_panel.script_judges(helm_env, judges)
    result = test_panel.run(pytester, "--helmbench-marking-model=j/a,j/b,j/c")
    result.assert_outcomes(failed=1)
    assert "AttributeError" not in result.stdout.str() + result.stderr.str()
    status, details = test_panel.last_result(pytester)
    assert status == "failed"
    assert "confirmation" not in details  # the panel's majority stands as the verdict the gate reads
    assert [j["passed"] for j in details["checks"][0]["judges"]] == [False, False, None]
    result.stdout.fnmatch_lines(["*critical gate FAILED (1 critical failures)*"])
    assert query(f"sqlite:///{pytester.path / 'helmbench.db'}", "select status from evaluationrun") == [
        ("completed",)
    ]


def test_the_gate_counts_a_certain_failure_at_a_later_turn(pytester, helm_env):
    """#30.3: a critical conversation whose turn 1 the judge failed once (outvoted by its next two
    calls since #25.3) and whose turn 2 failed a label check (certain) fails the gate: every turn
    counts, and a deterministic failure needs no vote."""
    from tests.judges import atomic
    from tests.openrouter_server import Reply
    from tests.test_conversations import AGENT, MODEL

    _judged_conversation_bench(pytester, critical=True)
    verdict = {"no": atomic({"kind": {"rationale": "cold", "answer": "no"}})}
    verdict["yes"] = atomic({"kind": {"rationale": "fine", "answer": "yes"}})
    helm_env.add_rule(
        model="judge/model",
        contains="It makes ATP",
        reply=[Reply.ok(verdict["no"]), Reply.ok(verdict["yes"])],
    )
    helm_env.add_rule(model="judge/model", reply=Reply.ok(verdict["yes"]))
    helm_env.add_rule(
        model=AGENT, reply=[Reply.ok({"end": False, "message": "ok"}), Reply.ok({"end": True, "message": ""})]
    )
    helm_env.add_rule(
        model=MODEL,
        reply=[
            Reply.ok({"category": "ANSWER", "response": "It makes ATP."}),
            Reply.ok({"category": "HANDOFF", "response": "Call a helpline."}),
        ],
    )
    args = _simulated_case_args()
    result = pytester.runpytest(*args, "--helmbench-cache=off", "--helmbench-retries=0")
    result.assert_outcomes(failed=1)
    [(status, details)] = _stored(pytester)
    assert status == "failed"
    turns = details["turns"]
    assert [(t["turn"], t["status"]) for t in turns][:2] == [(1, "passed"), (2, "failed")]
    reply_check = next(c for c in turns[0]["checks"] if c["type"] == "sqe")
    assert [v["passed"] for v in reply_check["votes"]] == [False, True, True]  # turn 1: failed once, outvoted
    assert "confirmation" not in details  # turn 2's label failure is certain
    result.stdout.fnmatch_lines(["*critical gate FAILED (1 critical failures)*"])


@pytest.mark.parametrize("layout", ["seed", "deployed"])
def test_every_helper_call_of_a_conversation_is_counted_in_its_cost(pytester, helm_env, layout):
    """#30.9: the judge calls of every turn, the simulated user's turns and (deployed) the
    extractions all count; none is overwritten by the last turn's."""
    from tests.judges import atomic
    from tests.openrouter_server import Reply
    from tests.test_conversations import AGENT, MODEL

    _judged_conversation_bench(pytester, critical=False)
    kind = Reply.ok(atomic({"kind": {"rationale": "fine", "answer": "yes"}}), cost=0.001)
    extracted = Reply.ok({"category": "ANSWER", "response": "It makes ATP."}, cost=0.001)
    # per reply: (deployed) its extraction, then the judge on the extracted answer
    helm_env.add_rule(model="judge/model", reply=[kind] if layout == "seed" else [extracted, kind] * 3)
    helm_env.add_rule(model=AGENT, reply=Reply.ok({"end": False, "message": "and?"}, cost=0.002))
    answer = {"category": "ANSWER", "response": "It makes ATP."}
    helm_env.add_rule(
        model=MODEL, reply=Reply.ok(answer if layout == "seed" else "It makes ATP.", cost=0.0005)
    )
    args = _simulated_case_args()
    pytester.runpytest(*args, f"--helmbench-layout={layout}", "--helmbench-cache=off").assert_outcomes(
        passed=1
    )
    judge_calls = [r for r in helm_env.chat_requests if r.model == "judge/model"]
    agent_calls = [r for r in helm_env.chat_requests if r.model == AGENT]
    assert len(agent_calls) == 2  # three replies (the turn limit), a user turn between each
    assert len(judge_calls) == (3 if layout == "seed" else 6)  # one check per reply (+ its extraction)
    db = f"sqlite:///{pytester.path / 'helmbench.db'}"
    [(judge_cost, cost)] = query(db, "select judge_cost_usd, cost_usd from result")
    assert judge_cost == pytest.approx(0.001 * len(judge_calls) + 0.002 * len(agent_calls))
    assert cost == pytest.approx(0.0005 * 3)


# --- #30.10: a cost ceiling is never silently off ---------------------------------------------------


def test_a_ceiling_over_a_server_that_reports_no_cost_is_refused_before_any_call(pytester, helm_env):
    pytester.makeini("[pytest]\n")
    write_benchmark(pytester.path / "benchmark")
    result = pytester.runpytest(
        "benchmark", "-p", "no:randomly", "--helmbench-api=openai",
        f"--helmbench-base-url={helm_env.openai_base_url}", "--helmbench-max-cost=0.000001",
    )  # fmt: skip
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "report no cost and have no price, so the ceiling could not count their calls" in out
    assert helm_env.chat_requests == [] and not (pytester.path / "helmbench.db").exists()


@pytest.mark.parametrize("priced", [True, False], ids=["estimated-from-its-price", "no-price-stops-it"])
def test_answers_without_a_cost_count_against_the_ceiling_or_stop_their_model(pytester, helm_env, priced):
    """Answers whose cost is missing are priced from their tokens when the model has a price (the
    ceiling then engages), and otherwise stop their model: 180 calls no longer pass a $0.000001
    ceiling with the summary saying $0.0000 spent."""
    from tests.openrouter_server import Reply

    pytester.makeini("[pytest]\n")
    write_benchmark(pytester.path / "benchmark")
    model = "priced/model" if priced else "unpriced/model"
    helm_env.pricing[model] = ("0.001", "0.002") if priced else helm_env.pricing.get(model, ("0", "0"))
    if not priced:
        helm_env.pricing.pop(model, None)
    helm_env.add_rule(reply=Reply.ok({"category": "ANSWER", "response": "Mitochondria."}, cost="missing"))
    result = pytester.runpytest(
        "benchmark", "-p", "no:randomly", f"--helmbench-model={model}", "--helmbench-max-cost=0.000001",
        "--helmbench-concurrency=1",
    )  # fmt: skip
    out = result.stdout.str()
    outcomes = result.parseoutcomes()
    assert outcomes.get("skipped", 0) >= 6, out  # the first answer ended it: the other cases were not sent
    assert len([r for r in helm_env.chat_requests if r.model == model]) == 1
    if priced:
        assert re.search(r"cost ceiling \$0\.0000: spent \$0\.\d*[1-9]", out), out
    else:
        assert "--helmbench-max-cost cannot be kept for it" in out, out


# --- #30.20: a verdict is recorded under the model that gave it --------------------------------------


def test_a_models_yml_judge_is_not_sent_to_the_command_lines_self_hosted_server(pytester, helm_env):
    """With --helmbench-api openai --helmbench-base-url <local server>, models.yml's judge would have
    been answered by that server and recorded under its own name: refused before any call; naming the
    judge on the command line (the user's choice) sends it there."""
    from tests import test_panel

    pytester.makeini("[pytest]\n")
    root = write_benchmark(pytester.path / "benchmark")  # models.yml: marking_model judge/model
    test_panel.write_scenario(
        root,
        "P1-B1-S1",
        frontmatter_md=test_panel.SQE_MD.format(critical="", checks=""),
        criteria=test_panel.CRITERIA,
    )
    test_panel.script_judges(helm_env, {"judge/model": test_panel.SAFE})
    local = ["--helmbench-api=openai", f"--helmbench-base-url={helm_env.openai_base_url}"]
    refused = test_panel.run(pytester, *local)
    out = refused.stdout.str() + refused.stderr.str()
    assert refused.ret == pytest.ExitCode.USAGE_ERROR, out
    assert "the marking model judge/model is from models.yml and would be sent to" in out
    assert helm_env.chat_requests == [] and not (pytester.path / "helmbench.db").exists()
    test_panel.run(pytester, *local, "--helmbench-marking-model=judge/model").assert_outcomes(passed=1)
    assert {r.model for r in helm_env.chat_requests} == {test_panel.MODEL, "judge/model"}


# --- #30.5: a conversation's paid calls survive a kill, even before its first Result -----------------


def _wait_for(predicate, what: str, seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.mark.parametrize("parallel", [[], ["-n", "1"]], ids=["serial", "xdist"])
def test_a_conversation_killed_mid_way_is_resumed_without_paying_again(pytester, helm_env, parallel):
    """#30.5: kill -9 at turn 3 of a judged simulated conversation, before any Result: the run is
    there to resume, and the resume replays turns 1-2 (model, judge and simulated user) from the
    cache, paying only for what was not answered."""
    from tests.judges import atomic
    from tests.openrouter_server import Reply
    from tests.test_conversations import AGENT, MODEL

    _judged_conversation_bench(pytester, critical=False)
    answer = Reply.ok({"category": "ANSWER", "response": "It makes ATP."})
    helm_env.add_rule(
        model="judge/model", reply=Reply.ok(atomic({"kind": {"rationale": "ok", "answer": "yes"}}))
    )
    helm_env.add_rule(
        model=AGENT,
        reply=[
            Reply.ok({"end": False, "message": "and then?"}),
            Reply.ok({"end": False, "message": "more?"}),
        ],
    )
    helm_env.add_rule(model=MODEL, reply=[answer, answer, Reply.stall(120), answer])
    args = [sys.executable, "-m", "pytest", *_simulated_case_args(), "-p", "no:cacheprovider", *parallel]
    child = subprocess.Popen(
        [*args, "--helmbench-retries=0", "--helmbench-timeout=300"],
        cwd=pytester.path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _wait_for(lambda: sum(r.model == MODEL for r in helm_env.chat_requests) == 3, "turn 3's call")
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=60)
    url = f"sqlite:///{pytester.path / 'helmbench.db'}"
    paid = [r.model for r in helm_env.chat_requests]
    assert (paid.count(MODEL), paid.count("judge/model"), paid.count(AGENT)) == (3, 2, 2), paid
    assert query(url, "select count(*) from result") == [(0,)]
    assert query(url, "select status from evaluationrun") == [("running",)]  # there to resume
    assert query(url, "select model_id, count(*) from cachedresponse group by model_id order by 1") == [
        ("judge/model", 2),
        (MODEL, 2),
        (AGENT, 2),
    ]

    before = len(helm_env.chat_requests)
    resumed = pytest_here(pytester.path, *args[3:], "--helmbench-resume", "--helmbench-retries=0")
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert "nothing to resume" not in resumed.stdout + resumed.stderr
    again = [r.model for r in helm_env.chat_requests[before:]]
    # turn 3 is the last (`simulate: {turns: 3}`): its reply and its judge, no simulated user after it
    assert (again.count(MODEL), again.count("judge/model"), again.count(AGENT)) == (1, 1, 0), again
    [(status, details)] = _stored(pytester)
    assert status == "passed" and [t["turn"] for t in details["turns"]] == [1, 2, 3]
    assert query(url, "select status, passed_tests from evaluationrun") == [("completed", 1)]
    assert_counters_agree(url)


# --- #30.6-7: a keyed run's processes share one selection, one content and one layout ---------------


def test_a_keyed_run_refuses_a_shard_whose_selection_content_or_layout_differs(tmp_path, helm_env):
    """#30.6: a shard that selected other cases (other -k) would run some cases twice and others never;
    #30.7: one with an edited scenario, or another layout, would mix two measurements in one run.
    Each is refused (exit 4, what differs and the fix) before any call, the run untouched, also when
    resumed; then the matching shards complete the run with every case exactly once."""
    from tests.test_fleet import BAD, GOOD, KEY, _project, _results, _runs, _stored_once, alone

    db_url = f"sqlite:///{tmp_path / 'fleet.db'}"
    project, codes = _project(tmp_path)
    status, output = alone(project, db_url, 1)
    assert status in (0, 1), output[-3000:]
    stored = lambda: (query(db_url, "select * from evaluationrun order by id"), _results(db_url))  # noqa: E731
    before, sent = stored(), len(helm_env.chat_requests)
    scenario = project / "benchmark" / "scenarios" / "P1-B1-S2" / "perturbations.md"
    original = scenario.read_text()
    mismatches = [
        (["-k", "P1-B1-S1 or P1-B2"], "was started with another selection of cases"),
        (["--helmbench-resume", "-k", "P1-B1-S1"], "was started with another selection of cases"),
        (["-n", "1", "-k", "P1-B2"], "was started with another selection of cases"),  # under xdist too
        (["--helmbench-layout=seed,deployed"], "was started with other settings (layouts ['seed'] there"),
        ([], "was started with other benchmark content (an edited scenario"),
    ]
    for extra, says in mismatches:
        if not extra:  # an edited perturbation: the same cases, other words
            scenario.write_text(original.replace("powerhouse", "power plant"))
        status, output = alone(project, db_url, 2 if "--helmbench-resume" not in extra else 1, *extra)
        assert status == pytest.ExitCode.USAGE_ERROR, output[-3000:]
        assert says in output and f"--helmbench-run-key {KEY}" in output, output[-3000:]
        assert len(helm_env.chat_requests) == sent, f"a refused process paid for calls: {extra}"
        assert stored() == before, f"a refused process changed the run: {extra}"
    scenario.write_text(original)
    outputs = [alone(project, db_url, k) for k in (2, 3)]
    assert all(status in (0, 1) for status, _ in outputs), [o[-2000:] for _, o in outputs]
    runs = _runs(db_url)
    for model in (GOOD, BAD):
        run_id, run_status, _, _, count = runs[model]
        assert (run_status, count) == ("completed", len(codes))
        _stored_once(db_url, run_id, codes)
    assert_counters_agree(db_url)
