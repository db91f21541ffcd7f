"""pytest hooks of HELMBench; each delegates to the module that owns the work.

Loaded through the `pytest11` entry point in every pytest session, so every hook is inert unless
HELMBench cases were collected.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .cases import case_sort_key, parse_selectors
from .config import OPTIONS, DRY_RUN_REASON
from .errors import HelmbenchError
from .items import CaseItem, ScenarioFile
from .outcome import Outcome
from .reporting import HTML_COLUMNS, failure_text, html_cells, html_extras_for, summary_lines
from .runner import CaseError
from .session import STATE_KEY, HelmbenchSession, option_dest, option_value
from .storage import safe_url


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("helmbench", "HELMBench mental-health safety benchmark")
    for option in OPTIONS:
        flag = f"--helmbench-{option.name}"
        env = f" [env {option.env}]" if option.env else ""
        if option.kind == "bool":
            group.addoption(flag, action="store_true", default=None, dest=option_dest(option.name), help=option.help + env)
            parser.addini(option_dest(option.name), option.help, type="bool", default=False)
        elif option.kind == "list":
            group.addoption(flag, action="append", default=None, dest=option_dest(option.name), help=option.help + env)
            parser.addini(option_dest(option.name), option.help, default="")
        else:
            group.addoption(flag, default=None, dest=option_dest(option.name), help=option.help + env)
            parser.addini(option_dest(option.name), option.help, default="")
    parser.addini("helmbench_root", "benchmark root folder, relative to the rootdir (default: benchmark)", default="benchmark")


def pytest_configure(config: pytest.Config) -> None:
    state = config.stash[STATE_KEY] = HelmbenchSession(config)
    if not state.is_worker:
        config.pluginmanager.register(ControllerHooks(state), "helmbench-controller")
    config.addinivalue_line("markers", "helmbench(code, pillar, behaviour, scenario, condition, user_context, perturbation, style, model, critical, risk): a HELMBench case")
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(XdistHooks(), "helmbench-xdist")


def pytest_sessionstart(session: pytest.Session) -> None:
    HelmbenchSession.get(session.config).session = session


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    state = HelmbenchSession.get(session.config)
    if state.is_worker and "clients" in state.__dict__:
        state.clients.close()


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if HelmbenchSession.get(parent.config).is_scenario_file(file_path):
        return ScenarioFile.from_parent(parent, path=file_path)
    return None


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Order cases numerically (C2 before C10) in their slots, and apply --helmbench-select."""
    slots = [i for i, item in enumerate(items) if isinstance(item, CaseItem)]
    if not slots:
        return
    cases = sorted((items[i] for i in slots), key=lambda it: case_sort_key(it.case.code, it.case.model))  # type: ignore[attr-defined]
    for slot, item in zip(slots, cases):
        items[slot] = item
    patterns = option_value(config, next(o for o in OPTIONS if o.name == "select")) or []
    try:
        selectors = parse_selectors(patterns)
    except ValueError as exc:
        raise pytest.UsageError(f"--helmbench-select: {exc}") from None
    if selectors:
        keep, drop = [], []
        for item in items:
            chosen = not isinstance(item, CaseItem) or any(s.matches(item.case.segments) for s in selectors)
            (keep if chosen else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep


def pytest_collection_finish(session: pytest.Session) -> None:
    """Open (and migrate) the database before the first paid call, in serial runs."""
    state = HelmbenchSession.get(session.config)
    if state.is_worker or session.config.getoption("collectonly"):
        return
    state.collected_cases = sum(isinstance(item, CaseItem) for item in session.items)
    if state.collected_cases:
        _open_storage(state)


def _open_storage(state: HelmbenchSession) -> None:
    try:
        if not state.all_dry_run():
            state.open_storage()
    except HelmbenchError as exc:
        pytest.exit(f"HELMBench: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Attach the outcome (plain data, travels through xdist), JUnit properties and HTML extras."""
    report = yield
    if not isinstance(item, CaseItem) or call.when == "teardown":
        return report
    outcome = item.outcome
    final = outcome is not None and (call.when == "call" or report.failed)
    if call.excinfo is not None and isinstance(call.excinfo.value, CaseError):
        report.longrepr = failure_text(call.excinfo.value.outcome)
    elif call.excinfo is not None and call.when == "setup" and isinstance(call.excinfo.value, HelmbenchError):
        report.longrepr = f"HELMBench ERROR {item.case.code} [{item.case.model}]: {call.excinfo.value}"
    if final and outcome is not None:
        report.helmbench = outcome.to_dict()
        item.user_properties.extend([("helmbench_status", outcome.status), ("helmbench_reason", outcome.reason)])  # junitxml reads them at teardown
        if outcome.status in ("failed", "error"):
            report.extras = [*getattr(report, "extras", []), *html_extras_for(outcome)]
    return report


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return ""


class ControllerHooks:
    """Registered on the controller (or a serial run) only: the single writer of the database."""

    def __init__(self, state: HelmbenchSession) -> None:
        self.state = state

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        payload = getattr(report, "helmbench", None)
        if payload:
            self.state.record(Outcome.from_dict(payload))
        elif report.skipped and report.when == "setup" and _skip_reason(report) == DRY_RUN_REASON:
            self.state.dry_run_skips += 1

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        state = self.state
        stopped = state.board.stopped() if "board" in state.__dict__ else {}
        interrupted = exitstatus == pytest.ExitCode.INTERRUPTED or bool(session.shouldstop) or bool(session.shouldfail)
        state.finish(interrupted)
        if stopped:
            session.exitstatus = pytest.ExitCode.INTERRUPTED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        state = self.state
        if not (state.tallies or state.dry_run_skips):
            return
        stopped = state.board.stopped() if "board" in state.__dict__ else {}
        terminalreporter.section("HELMBench summary")
        for line in summary_lines(state.tallies, safe_url(state.settings.db_url), stopped, state.dry_run_skips, state.storage_error):
            terminalreporter.write_line(line)

    def pytest_unconfigure(self) -> None:
        self.state.cleanup()


def pytest_html_results_table_header(cells: list[str]) -> None:
    cells[2:2] = [f"<th>{name}</th>" for name in HTML_COLUMNS]


def pytest_html_results_table_row(report: pytest.TestReport, cells: list[str]) -> None:
    payload = getattr(report, "helmbench", None)
    cells[2:2] = html_cells(Outcome.from_dict(payload) if payload else None)


class XdistHooks:
    """Registered only when pytest-xdist is active: share the session id and stop board with workers."""

    def pytest_configure_node(self, node: Any) -> None:
        state = HelmbenchSession.get(node.config)
        node.workerinput.update(state.workerinput())

    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        state = HelmbenchSession.get(node.config)
        if state.recorder is None and any(_is_case_id(state, i) for i in ids):
            _open_storage(state)


def _is_case_id(state: HelmbenchSession, nodeid: str) -> bool:
    path = nodeid.split("::", 1)[0]
    return "::" in nodeid and state.is_scenario_file((state.config.rootpath / path).resolve())
