"""pytest hooks of HELMBench; each delegates to the module that owns the work.

Loaded through the `pytest11` entry point in every pytest session, so every hook is inert unless
HELMBench cases were collected (or a HELMBench option asks for work). The controller's hooks live in
controller.py, the xdist ones in xdist_hooks.py; both are registered here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ..benchmark_root import BenchmarkHooks
from ..errors import HelmbenchError
from ..execution.prefetch import Prefetch, start_prefetch
from ..reporting.html_extras import html_extras_for
from ..status import UNSUCCESSFUL
from ..suite.files import leads_outside
from . import author as author_hooks
from . import gc_tuning
from . import select as case_selection
from .controller import ControllerHooks
from .fleet import join_key_runs
from .items import CaseItem, OutsideLink, ScenarioFile, case_items, shape_report
from .junit import JunitHooks
from .notes import register_report_hooks
from .notices import dry_run_lines, say, workers_note
from .options import add_options
from .state import STATE_KEY, HelmbenchState
from .xdist import XdistHooks

# Loaded in every session: SQLAlchemy, Alembic and httpx are imported by the hook that first needs them.

MARKER = (
    "helmbench(code, pillar, behaviour, scenario, condition, user_context, perturbation, style, model, "
    "critical, risk, repeat): a HELMBench case"
)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    state = config.stash[STATE_KEY] = HelmbenchState(config)
    # Registered before pytest's unraisable-exception plugin registers its own cleanup, so it runs after
    # that cleanup's full garbage collection, which therefore skips the frozen items.
    config.add_cleanup(lambda: gc_tuning.unfreeze(config))
    config.addinivalue_line("markers", MARKER)
    config.pluginmanager.register(BenchmarkHooks(state.base_dir), "helmbench-benchmark")  # which benchmark
    from ..evaluation import builtin

    if not config.pluginmanager.is_registered(builtin):  # the hook third parties implement too
        config.pluginmanager.register(builtin, "helmbench-evaluators")
    from ..providers import builtin as builtin_providers

    if not config.pluginmanager.is_registered(builtin_providers):  # HTTP and local, through the same hook
        config.pluginmanager.register(builtin_providers, "helmbench-providers")
    if not state.is_worker:
        config.pluginmanager.register(ControllerHooks(state), "helmbench-controller")
        config.pluginmanager.register(JunitHooks(config), "helmbench-junit")
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(XdistHooks(state, _prepare_run), "helmbench-xdist")
    register_report_hooks(config, state)  # subset runs, unpriced calls, pytest-html (report_hooks.py)
    config.pluginmanager.register(author_hooks, "helmbench-author")  # --helmbench-changed, progress lines


def pytest_sessionstart(session: pytest.Session) -> None:
    HelmbenchState.get(session.config).session = session


def pytest_collect_directory(path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """A folder link under the benchmark root that leads out of it: an error, never walked."""
    if leads_outside(HelmbenchState.get(parent.config).root, path):
        return OutsideLink.from_parent(parent, path=path)
    return None


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if HelmbenchState.get(parent.config).is_scenario_file(file_path):
        return ScenarioFile.from_parent(parent, path=file_path)
    return None


def pytest_collectreport(report: pytest.CollectReport) -> None:
    """After each scenario file: freeze what collection built so far (see gc_tuning)."""
    if report.result and isinstance(report.result[0], CaseItem):
        gc_tuning.freeze_collected(report.result[0].config)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Order and --helmbench-select, before pytest's own selections (case_selection.py)."""
    case_selection.order_and_select(config, items)


# A second implementation of a hook in one module needs another name (`specname` says which hook);
# pytest only reads names starting with "pytest_".
@pytest.hookimpl(trylast=True, specname="pytest_collection_modifyitems")
def pytest_collection_modifyitems_sample(config: pytest.Config, items: list[pytest.Item]) -> None:
    """After `-k`, `-m` (plain hooks); `--helmbench-changed` and `--lf` wrap every plain hook, so they
    come after: the sample, the shard, the resume plan."""
    case_selection.sample_shard_and_resume(config, items)


@pytest.hookimpl(tryfirst=True, specname="pytest_collection_finish")
def pytest_collection_finish_estimate(session: pytest.Session) -> None:
    """Every selection, `--lf` included, is done by now; before the terminal's "collected" line, so
    its counts include the estimate's deselection."""
    case_selection.estimate_instead(session)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Serial runs: open (and migrate) the database and start local models before the first call."""
    state = HelmbenchState.get(session.config)
    if not case_items(session.items):
        return
    gc_tuning.freeze_collected(session.config)
    if state.is_worker or session.config.getoption("collectonly"):
        return
    _prepare_run(state, {item.case.model for item in case_items(session.items)})


def _prepare_run(state: HelmbenchState, models: set[str]) -> None:
    """Open storage unless everything is a dry run; the providers start what their models need
    (the embedded local model's server) before the first call (controller only)."""
    try:
        say(state, dry_run_lines(state))  # a dry run is the first thing HELMBench says (notices.py)
        if state.all_dry_run():
            return
        state.open_storage()
        say(state, workers_note(state, state.clients.prepare(models)))  # e.g. a server's slot ceiling
    except HelmbenchError as exc:
        pytest.exit(f"HELMBench: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session: pytest.Session) -> Any:
    """Prefetch (execution/prefetch.py): every selected case's call submitted to a bounded pool.

    Only in a process that runs all its items itself (not under xdist, where every worker holds all
    items and prefetching would pay for calls twice). Leaving the loop (-x, --maxfail, Ctrl-C, a
    stop) cancels every call not yet started.
    """
    state = HelmbenchState.get(session.config)
    collecting = session.config.getoption("collectonly")
    cases = [] if collecting or state.is_worker else [item.case for item in case_items(session.items)]
    try:
        join_key_runs(state, cases)
    except HelmbenchError as exc:
        pytest.exit(f"HELMBench: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)
    prefetch = _start_prefetch(state, session)
    state.prepare_content(cases)  # while the first calls are in flight
    if prefetch is not None:
        state.answered_early = prefetch.answered  # stored in groups (storage/early.py)
    try:
        return (yield)
    finally:
        state.answered_early = tuple
        if prefetch is not None:
            prefetch.close()


def _start_prefetch(state: HelmbenchState, session: pytest.Session) -> Prefetch | None:
    config = session.config
    if state.is_worker or config.getoption("collectonly"):
        return None
    if session.testsfailed and not config.getoption("continue_on_collection_errors"):
        return None  # pytest's loop is about to stop on collection errors: nothing may be sent
    targets = [it for it in case_items(session.items) if not state.is_dry_run(it.case.model)]
    if not targets or state.settings.concurrency <= 1:
        return None
    return start_prefetch(
        state.executor,
        targets,
        concurrency=state.settings.concurrency,
        maxfail=int(config.getoption("maxfail", 0) or 0),
        stopping=lambda: bool(session.shouldstop or session.shouldfail),
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Attach the outcome (plain data, travels through xdist), JUnit properties and HTML extras."""
    report = yield
    if not isinstance(item, CaseItem):
        return report
    shape_report(item, call, report)  # the reason first, skips at the scenario file, JUnit metadata
    outcome = item.outcome
    final = outcome is not None and (call.when == "call" or report.failed or report.skipped)
    if final and outcome is not None and call.when != "teardown":
        if not item.replayed:  # a replayed failure (a rerun) was recorded by its first attempt
            report.helmbench = outcome.to_dict()
        if outcome.status in UNSUCCESSFUL:
            report.extras = [*getattr(report, "extras", []), *html_extras_for(outcome)]
    return report


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    state = HelmbenchState.get(session.config)
    if state.is_worker:
        state.close_clients()
    gc_tuning.refreeze_after_run(session.config)
