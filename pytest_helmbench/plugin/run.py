"""Running the cases: prepare the run once they are known, prefetch their calls, shape each report.

Read in the order pytest calls the hooks: at collection finish (after select.py's estimate) a serial
run shows the providers' progress lines, makes SIGTERM act as Ctrl-C, opens (and migrates) the
database, starts local models and notes what it selected; under xdist the controller does the same
once the workers collected (xdist.py). The run loop joins a run key's runs and prefetches every
selected case's call into a bounded pool; each case's model call is made in its item's `setup()`
and its verdict in `runtest()` (items.py); `makereport` attaches the outcome as plain data, which
travels through xdist to the controller that stores it (controller.py).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

import pytest

from ..errors import HelmbenchError
from ..execution.prefetch import Prefetch, start_prefetch
from ..providers.progress import TerminalProgress, attach, detach
from ..reporting.html_extras import html_extras_for
from ..status import UNSUCCESSFUL
from ..suite.cases import Case
from . import gc_tuning
from .controller import end_interrupt_on_sigterm, interrupt_on_sigterm, note_items, start_runs
from .items import CaseItem, case_items, shape_report
from .notices import dry_run_lines, say, workers_note
from .preflight import refuse_an_unkeepable_ceiling, refuse_misrouted_helpers
from .state import HelmbenchState

PROGRESS_KEY = pytest.StashKey[TerminalProgress]()


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Under xdist the controller prepares the providers once workers collected: show their progress
    lines from the start."""
    state = HelmbenchState.get(session.config)
    if not state.is_worker and session.config.pluginmanager.get_plugin("dsession") is not None:
        show_progress(session.config)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Every process with cases to run: SIGTERM (CI cancelling the job) is Ctrl-C from here on. The
    process that writes also prepares the run before the first call (under xdist: xdist.py)."""
    config = session.config
    state = HelmbenchState.get(config)
    items = case_items(session.items)
    if not items:
        return
    gc_tuning.freeze_collected(config)
    if state.is_worker:
        interrupt_on_sigterm(config)
        return
    if config.getoption("collectonly"):
        return
    show_progress(config)  # a test calling a provider in a session without cases shows none
    interrupt_on_sigterm(config)
    prepare_run(state, {item.case.model for item in items}, [item.case for item in items])
    note_items(state, items)


def show_progress(config: pytest.Config) -> None:
    """The terminal lines of the local model's slow first steps (weights download, server start)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or PROGRESS_KEY in config.stash:
        return
    redraw = (lambda line: reporter.rewrite(line, erase=True)) if reporter.isatty() else None
    handler = config.stash[PROGRESS_KEY] = TerminalProgress(reporter.write_line, redraw)
    attach(handler)


def prepare_run(state: HelmbenchState, models: set[str], cases: Sequence[Case] | None = None) -> None:
    """Open storage unless everything is a dry run; the providers start what their models need
    (the embedded local model's server) before the first call (the process that writes only)."""
    try:
        say(state, dry_run_lines(state))  # a dry run is the first thing HELMBench says (notices.py)
        if state.all_dry_run():
            return
        refuse_an_unkeepable_ceiling(state, models)  # preflight.py: what no call may start with
        refuse_misrouted_helpers(state, cases)
        state.open_storage()
        say(state, workers_note(state, state.clients.prepare(models)))  # e.g. a server's slot ceiling
    except HelmbenchError as exc:
        pytest.exit(f"HELMBench: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session: pytest.Session) -> Generator[None, Any, Any]:
    """Prefetch (execution/prefetch.py): every selected case's call submitted to a bounded pool.

    Only in a process that runs all its items itself (not under xdist, where every worker holds all
    items and prefetching would pay for calls twice). Leaving the loop (-x, --maxfail, Ctrl-C, a
    stop) cancels every call not yet started. Once the cases have run, SIGTERM ends the writing
    process at once again (controller.end_interrupt_on_sigterm).
    """
    state = HelmbenchState.get(session.config)
    collecting = session.config.getoption("collectonly")
    cases = [] if collecting or state.is_worker else [item.case for item in case_items(session.items)]
    try:
        start_runs(state, cases)
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
        if not state.is_worker:
            end_interrupt_on_sigterm(session.config)


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


def pytest_unconfigure(config: pytest.Config) -> None:
    handler = config.stash.get(PROGRESS_KEY, None)
    if handler is not None:
        detach(handler)
