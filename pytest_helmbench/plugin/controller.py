"""Hooks of the process that writes the database: the xdist controller, or a serial run.

Registered by plugin.pytest_configure in that process only, so workers never store, summarise or
decide the exit status. Nothing is lost when a process dies or storage fails: the first result that
cannot be stored stops every process of the session (exit status 12), and SIGTERM is Ctrl-C.
"""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType
from typing import Any

import pytest

from ..config import DRY_RUN_REASON
from ..errors import ConfigError, HelmbenchError
from ..execution.outcome import Outcome
from ..reporting.terminal import summary_lines
from ..reporting.verdict import exit_decision
from .items import case_items
from .state import HelmbenchState

log = logging.getLogger(__name__)

EXIT_UNSAFE = 10
EXIT_COULD_NOT_RUN = 11
EXIT_NOT_RECORDED = 12  # a result could not be stored: never a green run
# The reason on the stop board when the whole session stops (not one model): left out of the
# summary's STOPPED lines, which name models stopped for their own sake.
SESSION_STOPPING = "the session is stopping"
TERMINATED = pytest.StashKey[bool]()


def interrupt_on_sigterm(config: pytest.Config) -> None:
    """SIGTERM (how CI cancels a job) is handled as Ctrl-C from here on: runs marked interrupted,
    the summary printed, the shared folder removed. Only in the main thread and only where nothing
    else handles SIGTERM; a second SIGTERM ends the process at once; restored when pytest is done."""
    if threading.current_thread() is not threading.main_thread() or TERMINATED in config.stash:
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        config.stash[TERMINATED] = True
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        raise KeyboardInterrupt("SIGTERM")

    config.stash[TERMINATED] = False
    signal.signal(signal.SIGTERM, interrupt)
    config.add_cleanup(lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL))


def end_interrupt_on_sigterm(config: pytest.Config) -> None:
    """Once the cases have run, SIGTERM ends the process at once again: every Result is stored, and a
    KeyboardInterrupt raised while pytest prints its report would escape as a raw traceback."""
    if TERMINATED in config.stash and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


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
            wanted = state.resume_request()
            plan = state.prepare_resume() if wanted is not None else None
        except HelmbenchError as exc:  # HELMBENCH_RESUME=soon included: one usage error
            raise pytest.UsageError(f"HELMBench: {exc}") from None
        if wanted is not None and plan is not None and not plan.runs:  # nothing to continue: send nothing
            from ..storage.engine import safe_url

            models, where = ", ".join(state.settings.model_ids), safe_url(state.settings.db_url)
            found = f"no run of {models}" if wanted[1] else f"no incomplete run of {models}"
            pytest.exit(f"HELMBench: nothing to resume: {found} in {where}; nothing was sent", returncode=0)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """A serial run about to make calls (under xdist, XdistHooks does this once workers collected)."""
        if case_items(session.items) and not session.config.getoption("collectonly"):
            interrupt_on_sigterm(session.config)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> object:
        try:
            return (yield)
        finally:
            end_interrupt_on_sigterm(session.config)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Stored before the terminal shows the case as finished: a kill never loses a reported case."""
        payload = getattr(report, "helmbench", None)
        if payload:
            state = self.state
            stored_so_far = state.storage_error is None
            state.record(Outcome.from_dict(payload))
            if stored_so_far and state.storage_error is not None:
                self.stop_session(f"results cannot be recorded: {state.storage_error}")
        elif report.skipped and report.when == "setup" and _skip_reason(report) == DRY_RUN_REASON:
            self.state.dry_run_skips += 1

    def stop_session(self, reason: str) -> None:
        """Stop every process of the session from starting another call: each checks the stop board
        before every call (so beyond this point only the calls already in flight are paid for), and
        pytest's loop, or xdist's scheduler, stops."""
        state = self.state
        settings = state.settings
        models = [*settings.model_ids, *settings.helper_ids]
        try:
            state.board.stop_all(models, f"{SESSION_STOPPING}: {reason}")
        except OSError as exc:  # the folder may be on the very disk that is full
            log.error("HELMBench: cannot tell the workers to stop: %s", exc)
        message = f"HELMBench: {reason}"
        if state.session is not None and not state.session.shouldstop:
            state.session.shouldstop = message
        dsession = state.config.pluginmanager.get_plugin("dsession")  # xdist's scheduler, under -n
        if dsession is not None and not getattr(dsession, "shouldstop", True):
            dsession.shouldstop = message

    def pytest_keyboard_interrupt(self) -> None:
        """Ctrl-C or SIGTERM under xdist: workers would otherwise go on calling until torn down."""
        state = self.state
        if state.config.pluginmanager.get_plugin("dsession") is not None and state.shared.exists():
            self.stop_session("interrupted")

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        state = self.state
        stopped = state.stopped_models()
        interrupted = (
            exitstatus == pytest.ExitCode.INTERRUPTED or bool(session.shouldstop) or bool(session.shouldfail)
        )
        state.finish(interrupted)
        if state.storage_error:
            session.exitstatus = EXIT_NOT_RECORDED  # whatever else happened: CI never sees it green
            return
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
        from ..storage.engine import safe_url
        from .notes import session_notes

        stopped = {m: r for m, r in state.stopped_models().items() if not r.startswith(SESSION_STOPPING)}
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
            notes=session_notes(state.config),  # subset runs, calls without a price (report_hooks.py)
        ):
            terminalreporter.write_line(line)
        for line in state.judge_lines:
            terminalreporter.write_line(line)
        for line in self._stop_lines():
            terminalreporter.write_line(line)

    def _stop_lines(self) -> list[str]:
        """What a storage failure or SIGTERM left behind, and how to finish the job."""
        lines = []
        if self.state.storage_error:
            lines.append(
                "the session stopped at the first result it could not store (only calls already in flight "
                "were paid for after it); once the database can be written, --helmbench-resume runs the "
                "cases without a stored result"
            )
        if self.state.config.stash.get(TERMINATED, False):
            lines.append("interrupted by SIGTERM: --helmbench-resume completes the run(s)")
        return lines

    def pytest_unconfigure(self) -> None:
        self.state.cleanup()
