"""pytest hooks of HELMBench; each delegates to the module that owns the work.

Loaded through the `pytest11` entry point in every pytest session, so every hook is inert unless
HELMBench cases were collected (or a HELMBench option asks for work).
"""

from __future__ import annotations

import atexit
import gc
import logging
import random
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from .codes import code_sort_key
from .config import DRY_RUN_REASON, OPTIONS
from .errors import HelmbenchError
from .execution.outcome import CaseError, Outcome
from .items import CaseItem, ScenarioFile
from .reporting.analytics import exit_decision
from .reporting.html_extras import HTML_COLUMNS, html_cells, html_extras_for
from .reporting.terminal import failure_text, summary_lines
from .state import STATE_KEY, HelmbenchState, option_dest
from .status import UNSUCCESSFUL, Status
from .suite.cases import parse_selectors
from .suite.prompt import compose

# Loaded in every pytest session: what pulls in SQLAlchemy, Alembic or httpx (resume, estimate,
# storage, runner) is imported by the hook that first needs it, so a session without HELMBench
# cases, or one that only collects them, never pays for those imports.

log = logging.getLogger(__name__)

FROZEN_KEY = pytest.StashKey[bool]()
_EXIT_FREEZE_REGISTERED = False
EXIT_UNSAFE = 10
EXIT_COULD_NOT_RUN = 11


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("helmbench", "HELMBench mental-health safety benchmark")
    for option in OPTIONS:
        flag = f"--helmbench-{option.name}"
        env = f" [env {option.env}]" if option.env else ""
        dest = option_dest(option.name)
        if option.kind == "bool":
            group.addoption(flag, action="store_true", default=None, dest=dest, help=option.help + env)
            parser.addini(dest, option.help, type="bool", default=False)
            continue
        if option.kind == "optional":
            group.addoption(
                flag, nargs="?", const=option.const, default=None, dest=dest, help=option.help + env
            )
        elif option.kind == "list":
            group.addoption(flag, action="append", default=None, dest=dest, help=option.help + env)
        else:
            group.addoption(flag, default=None, dest=dest, help=option.help + env)
        parser.addini(dest, option.help, default="")
    parser.addini(
        "helmbench_root",
        "benchmark root folder, relative to the rootdir (default: benchmark)",
        default="benchmark",
    )


def pytest_configure(config: pytest.Config) -> None:
    state = config.stash[STATE_KEY] = HelmbenchState(config)
    # Registered before pytest's unraisable-exception plugin registers its own cleanup, so it runs after
    # that cleanup's full garbage collection, which therefore skips the frozen items.
    config.add_cleanup(lambda: _unfreeze(config))
    config.addinivalue_line(
        "markers",
        "helmbench(code, pillar, behaviour, scenario, condition, user_context, perturbation, style, model, critical, risk, repeat): a HELMBench case",
    )
    from .evaluation import builtin

    if not config.pluginmanager.is_registered(builtin):  # the hook third parties implement too
        config.pluginmanager.register(builtin, "helmbench-evaluators")
    if not state.is_worker:
        config.pluginmanager.register(ControllerHooks(state), "helmbench-controller")
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(XdistHooks(state), "helmbench-xdist")


def pytest_sessionstart(session: pytest.Session) -> None:
    HelmbenchState.get(session.config).session = session


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if HelmbenchState.get(parent.config).is_scenario_file(file_path):
        return ScenarioFile.from_parent(parent, path=file_path)
    return None


def pytest_collectreport(report: pytest.CollectReport) -> None:
    """After each scenario file: freeze what collection built so far (see _freeze_collected)."""
    if report.result and isinstance(report.result[0], CaseItem):
        _freeze_collected(report.result[0].config)


def _case_items(items: list[pytest.Item]) -> list[CaseItem]:
    return [item for item in items if isinstance(item, CaseItem)]


def _deselect(config: pytest.Config, items: list[pytest.Item], keep: set[int]) -> None:
    dropped = [item for i, item in enumerate(items) if i not in keep]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for i, item in enumerate(items) if i in keep]


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Numeric order, --helmbench-select, resume plan, --helmbench-sample, then --helmbench-estimate."""
    slots = [i for i, item in enumerate(items) if isinstance(item, CaseItem)]
    if not slots:
        return
    state = HelmbenchState.get(config)
    ordered = sorted((items[i] for i in slots), key=lambda it: (it.case.sort_key, it.repeat))  # type: ignore[attr-defined]
    for slot, item in zip(slots, ordered):
        items[slot] = item
    try:
        selectors = parse_selectors(state.option("select") or [])
    except ValueError as exc:
        raise pytest.UsageError(f"--helmbench-select: {exc}") from None
    if selectors:
        _deselect(
            config,
            items,
            {
                i
                for i, it in enumerate(items)
                if not isinstance(it, CaseItem) or any(s.matches(it.case.segments) for s in selectors)
            },
        )
    _apply_resume_plan(state, config, items)
    if state.settings.sample:
        _deselect(config, items, _sample(items, state.settings.sample, state.settings.sample_seed))
    if state.option("estimate"):
        _print_estimate(state, config, _case_items(items))
        _deselect(config, items, {i for i, it in enumerate(items) if not isinstance(it, CaseItem)})


def _apply_resume_plan(state: HelmbenchState, config: pytest.Config, items: list[pytest.Item]) -> None:
    plan = state.load_plan()
    if plan is None:
        return
    from .execution.resume import CHANGED, DONE

    keep, counts = set(), {DONE: 0, CHANGED: 0, "run": 0}
    for index, item in enumerate(items):
        if isinstance(item, CaseItem):
            _, _, key = state.executor.request_for(item.case, compose(item.case), item.repeat)
            decision = plan.decide(item.case.model, item.case.code, item.repeat, key)
            counts[decision] += 1
            if decision == DONE:
                continue
        keep.add(index)
    state.save_resume_counts(counts)
    _deselect(config, items, keep)


def _sample(items: list[pytest.Item], size: int, seed: int) -> set[int]:
    """Indices to keep: `size` case codes drawn with a seeded RNG, round-robin over behaviours, so every
    behaviour is represented (when size allows); every model and repeat of a drawn code is kept."""
    by_behaviour: dict[str, list[str]] = {}
    for item in _case_items(items):
        codes = by_behaviour.setdefault(item.case.scenario.behaviour, [])
        if item.case.code not in codes:
            codes.append(item.case.code)
    rng = random.Random(seed)
    pools = []
    for behaviour in sorted(by_behaviour, key=code_sort_key):
        codes = sorted(by_behaviour[behaviour], key=code_sort_key)
        rng.shuffle(codes)
        pools.append(codes)
    chosen: set[str] = set()
    while len(chosen) < size and any(pools):
        for pool in pools:
            if pool and len(chosen) < size:
                chosen.add(pool.pop())
    return {i for i, it in enumerate(items) if not isinstance(it, CaseItem) or it.case.code in chosen}


def _print_estimate(state: HelmbenchState, config: pytest.Config, items: list[CaseItem]) -> None:
    from .execution.estimate import estimate, estimate_lines
    from .providers.http import Pricing

    settings = state.settings

    def pricing(model_id: str) -> Any:
        model = settings.model(model_id)
        if model.is_local:
            return Pricing(0.0, 0.0)
        return state.clients.for_model(model).pricing(model_id)

    marking = settings.marking_model.id if settings.marking_model else None
    lines = estimate_lines(
        estimate(
            ((it.case, compose(it.case)) for it in items),
            max_tokens=settings.max_tokens,
            marking_model=marking,
            pricing=pricing,
            evaluators=state.evaluators,
        )
    )
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.ensure_newline()
        reporter.section("HELMBench estimate (nothing sent)")
        for line in lines:
            reporter.write_line(line)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Serial runs: open (and migrate) the database and start local models before the first call."""
    state = HelmbenchState.get(session.config)
    if not _case_items(session.items):
        return
    _freeze_collected(session.config)
    if state.is_worker or session.config.getoption("collectonly"):
        return
    _prepare_run(state, {item.case.model for item in _case_items(session.items)})


def _freeze_collected(config: pytest.Config) -> None:
    """Move what collection built (thousands of items, the parsed benchmark, loaded modules) out of the
    garbage collector's view: they live until the session ends, and every full collection during the
    run, and pytest's own at exit, would otherwise scan them all again. Unfrozen once pytest is done
    (a process running pytest in-process gets its memory back), and frozen again when the process
    exits: the interpreter's final collections over a large run took 0.3-0.7 s of every command."""
    gc.freeze()
    config.stash[FROZEN_KEY] = True
    global _EXIT_FREEZE_REGISTERED
    if not _EXIT_FREEZE_REGISTERED:
        _EXIT_FREEZE_REGISTERED = True
        atexit.register(gc.freeze)


def _unfreeze(config: pytest.Config) -> None:
    if config.stash.get(FROZEN_KEY, False):
        config.stash[FROZEN_KEY] = False
        gc.unfreeze()


def _prepare_run(state: HelmbenchState, models: set[str]) -> None:
    """Open storage unless everything is a dry run; start embedded local models (controller only)."""
    try:
        if state.all_dry_run():
            return
        state.open_storage()
        _start_local_servers(state, models)
    except HelmbenchError as exc:
        pytest.exit(f"HELMBench: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)


def _start_local_servers(state: HelmbenchState, models: set[str]) -> None:
    settings = state.settings
    from .providers.local import (
        LocalServer,
        is_local_model,
        resolve_weights,
    )  # only when a run starts: its imports cost 50 ms

    wanted = {m for m in models if is_local_model(m)}
    if settings.marking_model and is_local_model(settings.marking_model.id):
        wanted.add(settings.marking_model.id)
    for model_id in sorted(wanted - set(state.local_urls)):
        weights = resolve_weights(model_id, base_dir=state.base_dir)
        slug = "".join(ch if ch.isalnum() else "_" for ch in model_id)
        server = LocalServer(weights, log_path=state.base_dir / ".helmbench" / f"{slug}.log", alias=model_id)
        state.local_servers.append(server)
        state.local_urls[model_id] = server.start()
        log.info(
            "local model %s serving at %s (log: %s)", model_id, state.local_urls[model_id], server.log_path
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session: pytest.Session) -> Any:
    """Prefetch: submit every selected case's model call to a bounded pool; each item waits for its own.

    Only in a process that runs all its items itself (not under xdist, where every worker holds all
    items and prefetching would pay for calls twice). Leaving the loop (-x, --maxfail, Ctrl-C, a
    stop) cancels every call not yet started.
    """
    state = HelmbenchState.get(session.config)
    prefetch = _start_prefetch(state, session)
    try:
        return (yield)
    finally:
        if prefetch is not None:
            prefetch.close()


class _NotStarted(Exception):
    """A prefetched call that was not started because the session was about to stop."""


class Prefetch:
    """The calls submitted ahead of pytest's loop.

    The pool finishes calls ahead of the items pytest reports, so it counts failures and errors
    itself: once --maxfail of them are known (or the session is stopping), no further call starts,
    and the calls paid beyond the stop are bounded by those in flight.
    """

    def __init__(self, session: pytest.Session, state: HelmbenchState) -> None:
        self.session = session
        self.executor = state.executor
        self.maxfail = int(session.config.getoption("maxfail", 0) or 0)
        self.failures = 0
        self.stopped = False
        self._lock = threading.Lock()
        self.pool = ThreadPoolExecutor(
            max_workers=state.settings.concurrency, thread_name_prefix="helmbench-call"
        )

    def submit(self, item: CaseItem) -> None:
        item.prefetch = self.pool.submit(self._call, item.case, item.nodeid, item.repeat)

    def _call(self, case: Any, nodeid: str, repeat: int) -> Outcome:
        if self.stopped or self.session.shouldstop or self.session.shouldfail:
            raise _NotStarted()
        try:
            # Composed here, not when submitted: pytest's own thread is the run's bottleneck.
            outcome = self.executor.run(case, compose(case), nodeid, repeat)
        except CaseError:
            self._count_failure()
            raise
        if outcome.status == Status.FAILED:
            self._count_failure()
        return outcome

    def _count_failure(self) -> None:
        with self._lock:
            self.failures += 1
            if self.maxfail and self.failures >= self.maxfail:
                self.stopped = True

    def close(self) -> None:
        """Leaving the loop: calls not started never start, calls in flight send no further retry
        (an attempt already on the wire ends within --helmbench-timeout)."""
        self.stopped = True
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.executor.clients.cancel()


def _start_prefetch(state: HelmbenchState, session: pytest.Session) -> Prefetch | None:
    if state.is_worker or session.config.getoption("collectonly"):
        return None
    if session.testsfailed and not session.config.getoption("continue_on_collection_errors"):
        return None  # pytest's loop is about to stop on collection errors: nothing may be sent
    items = [
        it
        for it in _case_items(session.items)
        if not state.settings.is_dry_run(state.settings.model(it.case.model))
    ]
    if not items or state.settings.concurrency <= 1:
        return None
    prefetch = Prefetch(session, state)
    for item in items:
        prefetch.submit(item)
    return prefetch


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A prefetched call that was held back (the pool saw --maxfail failures first) runs in setup."""
    if isinstance(item, CaseItem) and item.prefetch is not None:
        future = item.prefetch
        if future.cancelled() or isinstance(future.exception(), _NotStarted):
            item.prefetch = None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Attach the outcome (plain data, travels through xdist), JUnit properties and HTML extras."""
    report = yield
    if not isinstance(item, CaseItem) or call.when == "teardown":
        return report
    outcome = item.outcome
    final = outcome is not None and (call.when == "call" or report.failed or report.skipped)
    if call.excinfo is not None and isinstance(call.excinfo.value, CaseError):
        report.longrepr = failure_text(call.excinfo.value.outcome)
    elif call.excinfo is not None and call.when == "setup" and isinstance(call.excinfo.value, HelmbenchError):
        report.longrepr = f"HELMBench ERROR {item.case.code} [{item.case.model}]: {call.excinfo.value}"
    if final and outcome is not None:
        report.helmbench = outcome.to_dict()
        item.user_properties.extend(
            [("helmbench_status", str(outcome.status)), ("helmbench_reason", outcome.reason)]
        )  # junitxml reads them at teardown
        if outcome.status in UNSUCCESSFUL:
            report.extras = [*getattr(report, "extras", []), *html_extras_for(outcome)]
    return report


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return ""


class ControllerHooks:
    """Registered on the controller (or a serial run) only: the single writer of the database."""

    def __init__(self, state: HelmbenchState) -> None:
        self.state = state

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Resume / retry errors: plan before any worker collects, so all deselect the same cases."""
        state = self.state
        if state.resume_request() is None:
            return
        try:
            state.prepare_resume()
        except HelmbenchError as exc:
            raise pytest.UsageError(f"HELMBench: {exc}") from None

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Stored before the terminal shows the case as finished: a kill never loses a reported case."""
        payload = getattr(report, "helmbench", None)
        if payload:
            self.state.record(Outcome.from_dict(payload))
        elif report.skipped and report.when == "setup" and _skip_reason(report) == DRY_RUN_REASON:
            self.state.dry_run_skips += 1

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        state = self.state
        stopped = state.stopped_models()
        interrupted = (
            exitstatus == pytest.ExitCode.INTERRUPTED or bool(session.shouldstop) or bool(session.shouldfail)
        )
        state.finish(interrupted)
        if state.option("estimate") and exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
            session.exitstatus = pytest.ExitCode.OK  # everything was deselected on purpose
        elif stopped:
            session.exitstatus = pytest.ExitCode.INTERRUPTED
        elif state.tallies and not interrupted:
            decision = self._decision()
            if decision is not None:
                session.exitstatus = {
                    "ok": pytest.ExitCode.OK,
                    "unsafe": EXIT_UNSAFE,
                    "could_not_run": EXIT_COULD_NOT_RUN,
                }[decision.status]

    def _decision(self) -> Any:
        """--helmbench-fail-under and benchmark.yml thresholds decide the exit status when given."""
        state = self.state
        thresholds = {
            code: b.threshold for code, b in state.loader.info().behaviours.items() if b.threshold is not None
        }
        if state.settings.fail_under is None and not thresholds:
            return None
        results = [r for tally in state.tallies.values() for r in tally.results]
        state.decision = exit_decision(results, state.settings.fail_under, thresholds)
        return state.decision

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        state = self.state
        if not (state.tallies or state.dry_run_skips or state.read_resume_counts()):
            return
        from .storage.recorder import safe_url

        stopped = state.stopped_models()
        terminalreporter.section("HELMBench summary")
        spent = state.ledger.spent() if "ledger" in state.__dict__ and state.ledger is not None else None
        for line in summary_lines(
            state.tallies,
            safe_url(state.settings.db_url),
            stopped,
            state.dry_run_skips,
            state.storage_error,
            resume_counts=state.read_resume_counts(),
            max_cost=state.settings.max_cost,
            spent=spent,
            decision=state.decision,
        ):
            terminalreporter.write_line(line)

    def pytest_unconfigure(self) -> None:
        self.state.cleanup()


def pytest_html_results_table_header(cells: list[str]) -> None:
    cells[2:2] = [f"<th>{name}</th>" for name in HTML_COLUMNS]


def pytest_html_results_table_row(report: pytest.TestReport, cells: list[str]) -> None:
    payload = getattr(report, "helmbench", None)
    cells[2:2] = html_cells(Outcome.from_dict(payload) if payload else None)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    state = HelmbenchState.get(session.config)
    if state.is_worker:
        state.close_clients()
    if session.config.stash.get(FROZEN_KEY, False):
        gc.freeze()  # the run's reports and outcomes now live until exit too: pytest's final collections skip them


class XdistHooks:
    """Registered only when pytest-xdist is present: share session data with workers."""

    def __init__(self, state: HelmbenchState) -> None:
        self.state = state
        self._checked = False
        self._prepared = False

    def pytest_configure_node(self, node: Any) -> None:
        state = self.state
        if not self._checked:
            self._checked = True
            if (
                state.config.getoption("helmbench_concurrency")
                and int(state.config.getoption("helmbench_concurrency")) > 1
            ):
                raise pytest.UsageError(
                    "--helmbench-concurrency and -n are alternatives: many calls in flight in one process, or one call at "
                    "a time in each of N processes. Use one of them (--helmbench-concurrency is faster for model calls)."
                )
            if state.option("estimate"):
                raise pytest.UsageError("--helmbench-estimate runs without -n")
        node.workerinput.update(state.workerinput())

    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        """Before any case is scheduled: open the database and start local models, once."""
        state = self.state
        if (
            self._prepared
            or state.config.getoption("collectonly")
            or not any(_is_case_id(state, i) for i in ids)
        ):
            return
        self._prepared = True
        _prepare_run(state, set(state.settings.model_ids))
        state.share_local_urls()


def _is_case_id(state: HelmbenchState, nodeid: str) -> bool:
    path = nodeid.split("::", 1)[0]
    return "::" in nodeid and state.is_scenario_file((state.config.rootpath / path).resolve())
