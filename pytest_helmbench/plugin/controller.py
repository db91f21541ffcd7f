"""The process that writes the database (the xdist controller, or a serial run): it plans a resume,
records each case's outcome, notes what the session selected, finishes the runs, prints the
HELMBench summary and decides the exit status.

Registered by the plugin's `pytest_configure` in that process only, so workers never store,
summarise or decide the exit status. Nothing is lost when a process dies or storage fails: the first
result that cannot be stored stops every process of the session (exit status 12), and SIGTERM is
Ctrl-C.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, Any

import pytest

from ..config import DRY_RUN_REASON, family_warning
from ..errors import ConfigError, HelmbenchError
from ..execution.outcome import Outcome
from ..execution.selection import codes_by_model, selections
from ..execution.unpriced import Unpriced, unpriced_of
from ..reporting.safe_text import for_terminal
from ..reporting.tally import Tally
from ..reporting.terminal import SessionSummary, summary_lines
from ..reporting.verdict import exit_decision
from ..status import RunStatus
from ..suite.cases import Case
from . import gc_tuning
from .state import HelmbenchState

if TYPE_CHECKING:
    from ..execution.resume import ResumePlan

log = logging.getLogger(__name__)

EXIT_UNSAFE = 10
EXIT_COULD_NOT_RUN = 11
EXIT_NOT_RECORDED = 12  # a result could not be stored: never a green run
EXIT_REGRESSED = 13  # --helmbench-fail-on-regression: worse than the baseline
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


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Ctrl-C or SIGTERM arriving while results are written takes effect once they are written: a
    KeyboardInterrupt raised inside a database commit leaves SQLAlchemy's transaction half-closed (an
    INTERNALERROR, the case perhaps lost). Each signal that arrived is raised again, to the handler
    that was in place, as the block ends; the same signal a second time (a user who insists, a
    database that waits on a lock) is not held. Signals reach the main thread only: elsewhere a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []
    previous: dict[int, Any] = {}

    def restore() -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        previous.clear()

    def hold(signum: int, frame: FrameType | None) -> None:
        if signum in arrived:
            restore()
            signal.raise_signal(signum)
        arrived.append(signum)

    for signum in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(signum) is not None:  # None: a handler not set from Python, left alone
            previous[signum] = signal.signal(signum, hold)
    try:
        yield
    finally:
        held = bool(previous)  # not restored yet: nothing arrived twice
        restore()
        for signum in dict.fromkeys(arrived) if held else ():
            signal.raise_signal(signum)


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return ""


class ControllerHooks:
    """Registered on the controller (or a serial run) only: the single writer of the database."""

    def __init__(self, state: HelmbenchState) -> None:
        self.state = state
        self.interrupted = False  # Ctrl-C (or SIGTERM) reached pytest
        self.exit_status: int | None = None  # a pytest.exit with its status (a refusal under -n)
        self.comparisons: list[Any] = []  # with --helmbench-baseline: each model against it
        self.mlflow_lines: list[str] = []  # with --helmbench-mlflow: what was logged, or why not

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Resume / retry errors: plan before any worker collects, so all deselect the same cases."""
        state = self.state
        try:
            wanted = resume_request(state)
            plan = prepare_resume(state, wanted) if wanted is not None else None
        except HelmbenchError as exc:  # HELMBENCH_RESUME=soon included: one usage error
            raise pytest.UsageError(f"HELMBench: {exc}") from None
        if wanted is not None and plan is not None and not plan.runs:  # nothing to continue: send nothing
            from ..storage.engine import safe_url

            models, where = ", ".join(state.settings.model_ids), safe_url(state.settings.db_url)
            found = f"no run of {models}" if wanted[1] else f"no incomplete run of {models}"
            pytest.exit(f"HELMBench: nothing to resume: {found} in {where}; nothing was sent", returncode=0)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Stored before the terminal shows the case as finished: a kill never loses a reported case."""
        gc_tuning.freeze_as_the_run_grows(self.state.config)
        payload = getattr(report, "helmbench", None)
        if payload:
            state = self.state
            stored_so_far = state.storage_error is None
            outcome = Outcome.from_dict(payload)
            record(state, outcome)
            unpriced = state.notes.unpriced  # calls without a price, said in the summary
            unpriced[outcome.model] = unpriced.get(outcome.model, Unpriced()) + unpriced_of(outcome)
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

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        """Ctrl-C or SIGTERM: the summary says so and how to finish; under xdist, workers would
        otherwise go on calling until torn down. pytest.exit with a status (a usage error found once
        the workers collected) also arrives here: it keeps its status and is no interruption."""
        state = self.state
        exited = excinfo.value if isinstance(excinfo.value, pytest.exit.Exception) else None
        if exited is not None and exited.returncode not in (None, pytest.ExitCode.INTERRUPTED):
            self.exit_status = int(exited.returncode)
        else:
            self.interrupted = True
        if state.config.pluginmanager.get_plugin("dsession") is not None and state.shared.exists():
            self.stop_session("interrupted" if self.exit_status is None else "stopped")

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        state = self.state
        stopped = state.stopped_models()
        interrupted = (
            exitstatus == pytest.ExitCode.INTERRUPTED or bool(session.shouldstop) or bool(session.shouldfail)
        )
        finish(state, interrupted)
        self.mlflow_lines = log_to_mlflow(state)  # never changes the exit status
        if self.exit_status is not None:  # pytest.exit's own status (stop_session stopped the models)
            session.exitstatus = self.exit_status
            return
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
            self.comparisons = compare_with_baseline(state)
            if any(c.regressed for c in self.comparisons) and state.option("fail-on-regression"):
                session.exitstatus = EXIT_REGRESSED  # a gate on change: it outranks an absolute verdict

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

        stopped = {m: r for m, r in state.stopped_models().items() if not r.startswith(SESSION_STOPPING)}
        terminalreporter.section("HELMBench summary")
        spent = state.ledger.spent() if state.built("ledger") and state.ledger is not None else None
        summary = SessionSummary(
            state.tallies,
            safe_url(state.settings.db_url),
            stopped,
            state.dry_run_skips,
            state.storage_error,
            resume_counts=state.read_resume_counts(),
            max_cost=state.settings.max_cost,
            spent=spent,
            decision=state.decision,
            notes=state.notes,  # subset runs, calls without a price
        )
        for line in summary_lines(summary):
            terminalreporter.write_line(for_terminal(line))
        for line in state.judge_lines:
            terminalreporter.write_line(for_terminal(line))
        for model in sorted(state.tallies):  # the models this session judged
            warning = family_warning(model, state.settings.judge_ids)
            if warning:
                terminalreporter.write_line(for_terminal(warning), yellow=True)
        for line in self._baseline_lines():
            terminalreporter.write_line(for_terminal(line))
        for line in self.mlflow_lines:
            terminalreporter.write_line(for_terminal(line))
        for line in self._stop_lines():
            terminalreporter.write_line(for_terminal(line))

    def _baseline_lines(self) -> list[str]:
        """Each model against --helmbench-baseline, and what the gate made of it."""
        if not self.comparisons:
            return []
        from ..reporting.compare import comparison_lines

        lines = [f"against the baseline {self.state.option('baseline')}:"]
        for comparison in self.comparisons:
            lines += comparison_lines(comparison)
        if any(c.regressed for c in self.comparisons) and self.state.option("fail-on-regression"):
            lines.append(f"regressed against the baseline: exit status {EXIT_REGRESSED}")
        return lines

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
        elif self.interrupted:
            lines.append(
                "interrupted (Ctrl-C): every case counted above is stored and the run(s) are marked "
                "interrupted; the same command with --helmbench-resume runs only the cases left"
            )
        return lines

    def pytest_unconfigure(self) -> None:
        self.state.cleanup()


# --- the writer's work ----------------------------------------------------------------------------


def compare_with_baseline(state: HelmbenchState) -> list[Any]:
    """Each model of the session that the baseline holds, compared with it (reporting/compare.py)."""
    baseline = state.baseline()
    if not baseline:
        return []
    from ..reporting.compare import compare, verdicts_of

    now = verdicts_of(r for tally in state.tallies.values() for r in tally.results)
    return [compare(baseline[model], now[model]) for model in sorted(now) if model in baseline]


def log_to_mlflow(state: HelmbenchState) -> list[str]:
    """--helmbench-mlflow: each run whose figures this session stored, logged to MLflow; the lines the
    summary says. A keyed run other shards are still adding to is left to the shard that completes it."""
    try:
        wanted = state.option("mlflow")
    except ConfigError:  # said at session start
        return []
    recorder = state.recorder
    if not wanted or recorder is None or recorder.refused or not recorder.runs:
        return []
    if state.storage_error:
        return ["warning: MLflow: nothing logged: the session's results could not all be stored"]
    from ..reporting.mlflow_log import log_runs
    from ..reporting.run_record import runs_to_score

    runs = runs_to_score(recorder)
    lines = [
        f"MLflow: run {run_id} ({model}) is still running in other shards: the shard that completes it "
        "logs it"
        for model, run_id in sorted(recorder.runs.items())
        if model not in runs
    ]
    return lines + (log_runs(state.settings.db_url, runs).lines() if runs else [])


def resume_request(state: HelmbenchState) -> tuple[str, bool] | None:
    """('latest' or a run id, errors_only) with --helmbench-resume or --helmbench-retry-errors."""
    resume, retry = state.option("resume"), state.option("retry-errors")
    if resume and retry:
        raise HelmbenchError("--helmbench-resume and --helmbench-retry-errors do not combine: use one")
    if resume or retry:
        return (str(resume), False) if resume else (str(retry), True)
    return None


def prepare_resume(state: HelmbenchState, wanted: tuple[str, bool]) -> ResumePlan | None:
    """Controller: read the run(s) to continue, adopt them (`--co` only previews), share the plan."""
    if state.all_dry_run():
        return None
    from ..storage.prior_runs import build_plan

    state.open_storage()
    assert state.recorder is not None
    key = state.fleet.run_key if state.fleet is not None else None
    plan = build_plan(state.recorder.engine, state.settings.model_ids, wanted[0], wanted[1], run_key=key)
    adopting = {} if state.config.getoption("collectonly") else plan.runs
    for model, run_id in adopting.items():
        state.recorder.adopt(model, run_id, state.run_options(model))
    if adopting:  # a run key's stops are lifted: its key fixed, its credit topped up
        state.recorder.lift_stops([*plan.runs, *state.settings.judge_ids])
    state.shared.ensure()
    plan.save(state.shared.resume_plan)
    return plan


def record(state: HelmbenchState, outcome: Outcome) -> None:
    """Store one outcome (controller only) and count it for the summary."""
    tally = state.tallies.setdefault(outcome.model, Tally())
    tally.add(outcome)
    if state.storage_error:
        return
    try:
        state.open_storage()
        assert state.recorder is not None
        ahead = state.answered_early()  # finished answers not yet reported: stored with this one
        with signals_deferred():
            tally.run_id = state.recorder.record(outcome, state.run_options(outcome.model), ahead)
    except HelmbenchError as exc:
        state.storage_error = str(exc)
        log.error("HELMBench: %s", exc)
        if state.session is not None:
            state.session.shouldstop = f"HELMBench cannot record results: {exc}"


def finish(state: HelmbenchState, interrupted: bool) -> None:
    """Close the runs. After a storage failure they are marked interrupted if that still fits
    (`--helmbench-resume` finds them either way); a failure here is one more storage error."""
    stopped = state.stopped_models()
    if state.recorder is not None:
        for outcome in state.recorder.unreported():  # stored, never shown: counted as what was stored
            state.tallies.setdefault(outcome.model, Tally()).add(outcome)
        failed = state.storage_error is not None
        models = set(state.tallies) | set(state.recorder.runs)
        # A run with cases skipped at the cost ceiling or timed out is not complete (resumable).
        short = {m for m, tally in state.tallies.items() if tally.unfinished()} | state.incomplete
        statuses = {
            m: RunStatus.INTERRUPTED
            if interrupted or failed or m in stopped or m in short
            else RunStatus.COMPLETED
            for m in models
        }
        try:
            if state.fleet is not None and not failed:
                wanted = [m for m in state.settings.model_ids if not state.is_dry_run(m)]
                state.recorder.join_missing(wanted, {m: state.run_options(m) for m in wanted})
            with signals_deferred():
                state.recorder.finish(statuses, write_cache=not failed)
            from ..reporting.run_record import end_session

            recorded = (state.recorder, state.settings, state.loader, state.evaluators, state.tallies)
            # a process its key's run refused changed nothing, and stores no figures either
            state.judge_lines = end_session(
                *recorded,
                store_figures=not failed and not state.recorder.refused,
                scenario_of=state.scenario,  # parsed once, for collection
            )
        except HelmbenchError as exc:
            state.storage_error = state.storage_error or str(exc)
            log.error("HELMBench: %s", exc)
        finally:
            state.recorder.close()
    state.close_clients()


def start_runs(state: HelmbenchState, cases: Sequence[Case]) -> None:
    """Before the first call, start (with --helmbench-run-key, join) the run of every model with a
    case (Recorder.start_runs): a keyed process whose shard count, benchmark, selection or settings
    differ from the run's stops here, having paid for nothing (FleetError, a usage error); a session
    killed before its first Result leaves a run --helmbench-resume continues. A database that cannot
    be written now is left to the first Result, which stops the session as any storage failure does."""
    if state.recorder is None or not cases:
        return
    from ..storage.engine import StorageError

    models = [m for m in dict.fromkeys(case.model for case in cases) if not state.is_dry_run(m)]
    state.prepare_content(cases[:1])  # the benchmark's row, which a run points at
    try:
        state.recorder.start_runs(models, {m: state.run_options(m) for m in models})
    except StorageError as exc:
        if state.fleet is not None:  # a keyed process must know its run before it pays
            raise
        log.warning("HELMBench: runs not started before the first call: %s", exc)


def benchmark_cases(state: HelmbenchState) -> tuple[int, bool]:
    """The case codes the benchmark holds per model, and whether every scenario loaded."""
    total, complete = 0, True
    for folder in state.loader.scenario_dirs():
        try:
            scenario = state.scenario(folder)
        except HelmbenchError:
            complete = False
            continue
        total += len(scenario.conditions) * (1 + len(scenario.user_contexts)) * len(scenario.perturbations)
    return total, complete


def note_selection(state: HelmbenchState, selected: dict[str, set[str]]) -> None:
    """Count the benchmark, keep what each model's run selected (is it a subset?) and hand it to the
    recorder for its new runs. A serial run notes its items; under xdist, a worker's node ids."""
    try:
        if state.all_dry_run():  # nothing is recorded: no run to describe
            return
        total, complete = benchmark_cases(state)
    except (HelmbenchError, OSError) as exc:  # said at collection already
        log.debug("benchmark size unknown: %s", exc)
        total, complete = None, False
    notes = state.notes
    # A resumed run (adopted before collection) keeps the selection it started with: what this
    # session selected is only what was left to do.
    adopted = set(state.recorder.runs) if state.recorder is not None else set()
    selected = notes.unsharded or selected  # a shard's run is the whole run of every shard
    fresh = {model: codes for model, codes in selected.items() if model not in adopted}
    notes.selections = selections(fresh, total, every_scenario_loaded=complete)
    if state.recorder is not None:
        state.recorder.selection = dict(notes.selections)


def note_items(state: HelmbenchState, items: Sequence[Any]) -> None:
    """note_selection for a serial run's case items."""
    note_selection(state, codes_by_model((it.case.model, it.case.code) for it in items))
