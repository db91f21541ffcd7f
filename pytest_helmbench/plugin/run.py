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

from ..codes import DEPLOYED
from ..errors import HelmbenchError
from ..execution.prefetch import Prefetch, start_prefetch
from ..providers.progress import TerminalProgress, attach, detach
from ..reporting.html_extras import html_extras_for
from ..status import UNSUCCESSFUL
from ..suite.cases import Case
from ..suite.model import Scenario
from ..trust import OptionSource
from . import gc_tuning
from .controller import end_interrupt_on_sigterm, interrupt_on_sigterm, join_key_runs, note_items
from .items import CaseItem, case_items, shape_report
from .notices import dry_run_lines, say, workers_note
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
        refuse_an_unkeepable_ceiling(state, models)
        refuse_misrouted_helpers(state, cases)
        state.open_storage()
        say(state, workers_note(state, state.clients.prepare(models)))  # e.g. a server's slot ceiling
    except HelmbenchError as exc:
        pytest.exit(f"HELMBench: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)


def refuse_misrouted_helpers(state: HelmbenchState, cases: Sequence[Case] | None) -> None:
    """A models.yml judge (or the user agent it defaults to) that the command line's self-hosted base
    URL would answer instead of the endpoint its id names: refused before the first call when a case
    needs it (`cases` None: under xdist, any scenario of the benchmark), since its verdicts would be
    recorded under a judge that never gave them."""
    misrouted = misrouted_helpers(state)
    if misrouted and needs_helpers(state, cases):
        raise HelmbenchError(
            f"the marking model {', '.join(misrouted)} is from models.yml and would be sent to "
            f"{state.settings.base_url}, the self-hosted server given with --helmbench-base-url, which "
            "answers as whatever model it serves: its verdicts would be recorded under a judge that never "
            "gave them. Give that judge its own base_url in models.yml, or name the judge with "
            "--helmbench-marking-model; nothing was sent"
        )


def needs_helpers(state: HelmbenchState, cases: Sequence[Case] | None) -> bool:
    """Some case needs a judge, an extraction or a simulated user (`cases` None: some scenario)."""
    if cases is None:
        if DEPLOYED in state.settings.layouts:
            return True
        scenarios = []
        for folder in state.loader.scenario_dirs():
            try:
                scenarios.append(state.loader.load_scenario(folder))
            except HelmbenchError:
                continue  # said as its collection error
        return any(_scenario_needs_helpers(state, scenario) for scenario in scenarios)
    return any(case.layout == DEPLOYED or _scenario_needs_helpers(state, case.scenario) for case in cases)


def _scenario_needs_helpers(state: HelmbenchState, scenario: Scenario) -> bool:
    types = [check.spec.type for check in scenario.checks] or [scenario.evaluation.type]
    simulated = any(
        p.dialogue is not None and p.dialogue.simulation is not None for p in scenario.perturbations
    )
    return simulated or any(state.evaluators.get(name).needs_judge for name in types)


def misrouted_helpers(state: HelmbenchState) -> list[str]:
    """The models.yml judges (and the user agent they default to) that the command line's or the
    environment's self-hosted base URL would answer instead of the endpoint their id names."""
    settings = state.settings
    if settings.base_url_source not in (OptionSource.CLI, OptionSource.ENV) or state.option("marking-model"):
        return []
    helpers = list(settings.marking_models)
    if settings.user_model is None and settings.user_agent is not None:
        helpers.append(settings.user_agent)
    unique = {helper.id: helper for helper in helpers}.values()
    return [
        helper.id
        for helper in unique
        if helper.base_url is None
        and settings.self_hosted(helper)
        and state.providers.for_model(helper.id).name == "http"
        and helper.id not in settings.model_ids  # a model under test on that server may judge too
    ]


def refuse_an_unkeepable_ceiling(state: HelmbenchState, models: set[str]) -> None:
    """--helmbench-max-cost with a model whose answers report no cost and that has no price (a
    self-hosted OpenAI-compatible server): the ceiling could not count its calls, so nothing is sent.
    (A call that turns out unpriced later stops its model: execution/executor.py.)"""
    settings = state.settings
    if settings.max_cost is None:
        return
    unpriced = []
    for model in dict.fromkeys([*sorted(models), *settings.helper_ids]):
        if state.is_dry_run(model) or not settings.self_hosted(settings.model(model)):
            continue
        try:
            priced = state.clients.pricing(model) is not None
        except HelmbenchError:
            priced = False
        if not priced:
            unpriced.append(model)
    if unpriced:
        raise HelmbenchError(
            f"--helmbench-max-cost ${settings.max_cost}: {', '.join(unpriced)} report no cost and have no "
            "price, so the ceiling could not count their calls; nothing was sent. Run them without "
            "--helmbench-max-cost (a self-hosted server's calls cost nothing per token)"
        )


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
