"""Hooks of the process that writes the database: the xdist controller, or a serial run.

Registered by plugin.pytest_configure in that process only, so workers never store, summarise or
decide the exit status.
"""

from __future__ import annotations

from typing import Any

import pytest

from .config import DRY_RUN_REASON
from .errors import ConfigError, HelmbenchError
from .execution.outcome import Outcome
from .reporting.analytics import exit_decision
from .reporting.terminal import summary_lines
from .state import HelmbenchState

EXIT_UNSAFE = 10
EXIT_COULD_NOT_RUN = 11


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
        try:
            if state.resume_request() is not None:
                state.prepare_resume()
        except HelmbenchError as exc:  # HELMBENCH_RESUME=soon included: one usage error
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
        try:
            estimating = exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and state.option("estimate")
        except ConfigError:  # said at collection; a session without HELMBench cases ignores it
            estimating = False
        if estimating:
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
        from .storage.engine import safe_url

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
