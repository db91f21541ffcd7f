"""Fixtures shared by the test suite: a loopback OpenRouter server and small benchmark trees."""

from __future__ import annotations

import gc
import importlib
import pkgutil
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpcore  # noqa: F401
import pytest
from _pytest.unraisableexception import gc_collect_iterations_key
from hypothesis import settings

import pytest_helmbench
from tests import benchfiles, openrouter_server
from tests.benchfiles import API_KEY, SESSION_ADDOPTS
from tests.openrouter_server import FakeOpenRouter
from tests.postgres_server import PostgresServer, PostgresUnavailable


def _import_what_sessions_import() -> None:
    """Import every module a HELMBench session imports lazily *before* any in-process pytester run:
    pytester snapshots sys.modules and drops what a run imported, so a module first imported inside a
    run comes back as a second copy whose classes differ from those held elsewhere (httpx keeps a map
    of httpcore's exception classes; SQLAlchemy's compiled caches keep its enums), failing later tests
    by test order."""
    for module in pkgutil.walk_packages(pytest_helmbench.__path__, "pytest_helmbench."):
        if module.name != "pytest_helmbench.migrations" and not module.name.startswith(
            "pytest_helmbench.migrations."
        ):
            importlib.import_module(module.name)
    import alembic.command  # and what running the migrations imports

    alembic.command.upgrade(
        importlib.import_module("pytest_helmbench.storage.engine").alembic_config("sqlite://"), "head"
    )


#: The suite's own processes collect young garbage every 10,000 allocations, not 700. Its tests build
#: large heaps in this process (in-process sessions of thousands of cases, the oracles' index of every
#: shipped prompt), and with the default every full collection, due whenever the heap had grown by a
#: quarter, scanned them again: 16 s of the 82 s that test_oracles.py and test_run_record.py took, 2 s
#: now (67 s in all; peak memory 0.99 -> 1.17 GB). The processes the tests start, which stand for a
#: user's, keep Python's default.
GC_THRESHOLD = (10_000, 10, 10)


def pytest_configure(config: pytest.Config) -> None:
    """In every process that runs tests, before the first one; not in xdist's controller, which runs
    none (seconds saved at every start of the suite)."""
    controller = bool(config.getoption("numprocesses", None)) and not hasattr(config, "workerinput")
    if not controller:
        gc.set_threshold(*GC_THRESHOLD)
        # pytest's two full collections as it ends (for unraisable exceptions, which each test's phases
        # still collect) scanned the worker's whole heap: seconds at the very end of the suite, as
        # pytester's in-process runs, which skip them, know
        config.stash[gc_collect_iterations_key] = 0
        _import_what_sessions_import()


#: `dev.py test --quick` runs the property tests with `--hypothesis-profile=quick`: a fifth of the default
#: examples (tests that set their own count keep it); the whole suite searches with the default 100.
settings.register_profile("quick", max_examples=20)

# One module object whichever way a test imports it (`tests.openrouter_server` or `openrouter_server`):
# two copies would hold two different Reply classes.
sys.modules.setdefault("openrouter_server", openrouter_server)
sys.modules.setdefault("benchfiles", benchfiles)


@pytest.fixture(autouse=True)
def _no_dev_plugins(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """SESSION_ADDOPTS (tests/benchfiles.py) in every test's environment; test_plugins_compat removes it."""
    if "pytester" in request.fixturenames:
        request.getfixturevalue("pytester")  # it clears PYTEST_ADDOPTS as it starts: set it after
    monkeypatch.setenv("PYTEST_ADDOPTS", SESSION_ADDOPTS)


@pytest.fixture
def fake_openrouter() -> Iterator[FakeOpenRouter]:
    """A faithful OpenRouter stand-in on 127.0.0.1 that only accepts API_KEY."""
    with FakeOpenRouter(api_keys={API_KEY}) as server:
        yield server


@pytest.fixture
def helm_env(monkeypatch: pytest.MonkeyPatch, fake_openrouter: FakeOpenRouter) -> FakeOpenRouter:
    """Point HELMBench at the fake server with a valid key, fast retries, for in-process pytester runs."""
    monkeypatch.setenv("OPENROUTER_API_KEY", API_KEY)
    monkeypatch.setenv("OPENROUTER_BASE_URL", fake_openrouter.base_url)
    monkeypatch.setenv("HELMBENCH_BACKOFF", "0.01")
    for name in ("HELMBENCH_MODEL", "HELMBENCH_DB", "HELMBENCH_DRY_RUN", "HELMBENCH_SELECT"):
        monkeypatch.delenv(name, raising=False)
    return fake_openrouter


@pytest.fixture
def bench(pytester: pytest.Pytester) -> Path:
    """The generated benchmark in a pytester project (`pytest benchmark` runs it); a test module
    whose benchmark differs defines its own."""
    pytester.makeini("[pytest]\n")
    return benchfiles.write_benchmark(pytester.path / "benchmark")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One throwaway PostgreSQL server per test process (Debian's binaries; see tests/postgres_server.py).

    Its folder is made with mkdtemp, not tmp_path_factory: pytest's base folder is private to root and
    the server runs as `postgres`.
    """
    try:
        server = PostgresServer(Path(tempfile.mkdtemp(prefix="helmbench-pg-"))).start()
    except PostgresUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.folder, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """A new, empty database on the session's PostgreSQL server."""
    return postgres_server.new_database()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.e2e)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new results database of each kind: a SQLite file, or one on the session's PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'results.db'}"
    return request.getfixturevalue("postgres_url")


LOCAL_MODEL_GROUP = "local_model"
#: A test that uses one of these starts a pytest session, a database server or a browser: it is `e2e`,
#: left out of `python3 dev.py test --quick` (modules that start processes say so with `pytestmark`).
E2E_FIXTURES = frozenset({"pytester", "postgres_server", "chromium", "browser"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the end-to-end tests (see E2E_FIXTURES), then group the local model's tests."""
    for item in items:
        if E2E_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.e2e)
    _group_local_model_tests(config, items)


def _group_local_model_tests(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests of the real local model share one xdist worker (run with `--dist loadgroup`): two
    llama.cpp servers at once oversubscribe a 2-core machine, and its spinning threads then run
    tens of times slower (the suite took 35 minutes instead of a few). Tests marked
    `xdist_group(NAME)` share one worker too: they share a costly module-scoped fixture, which
    each worker would otherwise build.

    xdist 3.8 groups by suffixing `item._nodeid`, which pytest 9.2 no longer reads (the node id is
    a structured `_id`), so its `xdist_group` mark is silently ignored there. This hook therefore
    sets the suffix itself, the way xdist means it, on whichever attribute this pytest reads."""
    if not getattr(config.option, "loadgroup", False):  # set on xdist's workers only
        return
    local = [item for item in items if item.get_closest_marker("local_model") is not None]
    for item in items:
        group = item.get_closest_marker("xdist_group")
        name = group.args[0] if group is not None and group.args else None
        if item.get_closest_marker("local_model") is not None:
            name = LOCAL_MODEL_GROUP
        if name is not None and "@" not in item.nodeid:
            _join_xdist_group(item, name)
    # First in the queue: one worker starts the long local-model group while the other takes the rest.
    items[:] = local + [item for item in items if item.get_closest_marker("local_model") is None]


def _join_xdist_group(item: pytest.Item, group: str) -> None:
    grouped = f"{item.nodeid}@{group}"
    if hasattr(item, "_id"):  # pytest >= 9.2: a NodeId, whose string form round-trips
        from _pytest.nodeid import NodeId

        item._id = NodeId.parse(grouped)
    else:
        item._nodeid = grouped
