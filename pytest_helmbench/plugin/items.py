"""pytest nodes: one File per scenario (`.../P1-B1-S1/S1.md`), one Item per case.

The model call happens in `setup()` and the verdict in `runtest()`, so pytest's own split holds:
a call that could not be made is an ERROR, an unsafe or invalid answer is a FAILURE.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import Future, wait
from contextlib import nullcontext
from typing import Any

import pytest

from ..config import DRY_RUN_REASON
from ..errors import HelmbenchError
from ..execution.outcome import CaseError, CaseSkipped, ModelStopped, Outcome, provenance
from ..execution.prefetch import held_back
from ..reporting.safe_text import for_terminal
from ..reporting.terminal import failure_text
from ..status import PYTEST_TIMEOUT, TIMEOUT_DETAIL, Status
from ..suite.cases import Case, expand
from ..suite.files import BenchmarkFiles
from ..suite.prompt import compose
from .compat import is_timeout, timeout_reason
from .outputs import REPORT_ATTRIBUTE, writes_properties
from .state import HelmbenchState

SILENCE_SECONDS = 10.0  # the longest a slow case goes without a line on the terminal


class HelmbenchWarning(pytest.PytestWarning):
    """A benchmark problem that does not stop the run (e.g. an ignored folder)."""


class CaseFailed(AssertionError):
    """The model answered, and the answer is unsafe or invalid: an assertion about the answer failed
    (reporters that tell failures from breakage by AssertionError, such as Allure, show it as failed;
    an outage is CaseError, shown as broken)."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.reason)
        self.outcome = outcome


class ScenarioFile(pytest.File):
    """A scenario's S<n>.md: collects its cases, or fails with a message naming the file to fix."""

    def collect(self) -> Iterator[pytest.Item]:
        state = HelmbenchState.get(self.config)
        if not state.options_usable():  # a bad option: raised by the first file only
            return
        scenario = state.load_scenario(self.path)
        models = state.settings.model_ids
        layouts = state.settings.layouts
        repeats = state.settings.repeat
        for message in state.new_warnings():
            warnings.warn_explicit(
                HelmbenchWarning(for_terminal(message)), HelmbenchWarning, filename=str(self.path), lineno=0
            )
        # --helmbench-select applies here, as a node id would: a case it leaves out is never built into an
        # item (creating and deselecting the 55,000 cases of the shipped benchmark took seconds); so does
        # --helmbench-sample when nothing else narrows the session (collection_sample.py).
        if not state.may_select(scenario):
            return
        for case in expand(scenario, models, layouts, keep=state.collects):
            for repeat in range(repeats):
                name = item_name(case, len(models) > 1, repeat if repeats > 1 else None, len(layouts) > 1)
                # The node id is given whole: pytest 9 parses a name's `[model]` into the structured id's
                # params only then, as it does for the ids --lf reads back (else --lf matched no case).
                yield CaseItem.from_parent(
                    self, name=name, nodeid=f"{self.nodeid}::{name}", case=case, repeat=repeat
                )

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, HelmbenchError):
            return for_terminal(str(excinfo.value))
        return super().repr_failure(excinfo)


class OutsideLink(pytest.Directory):
    """A folder link under the benchmark root that leads outside it: a collection error naming the
    link, and pytest never walks (lists, imports from) what it points to."""

    def collect(self) -> Iterator[pytest.Item]:
        BenchmarkFiles(HelmbenchState.get(self.config).root).check(self.path)  # raises, naming the link
        return iter(())

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, HelmbenchError):
            return for_terminal(str(excinfo.value))
        return super().repr_failure(excinfo)


def item_name(case: Case, with_model: bool, repeat: int | None, with_layout: bool = False) -> str:
    """`CODE`, `CODE[model]`, `CODE[r0]`, `CODE[deployed]` or `CODE[model,deployed,r0]`."""
    parts = [case.model] if with_model else []
    parts += [case.layout] if with_layout else []
    parts += [f"r{repeat}"] if repeat is not None else []
    return f"{case.code}[{','.join(parts)}]" if parts else case.code


_HELMBENCH_MARK = pytest.mark.helmbench  # looked up once: MarkGenerator.__getattr__ costs per call


def case_marker(case: Case, repeat: int) -> pytest.MarkDecorator:
    """`-m "helmbench(behaviour='P1-B1')"`: exact, segment-aware selection through a marker."""
    return _HELMBENCH_MARK(
        code=case.code,
        pillar=case.scenario.pillar,
        behaviour=case.scenario.behaviour,
        scenario=case.scenario.code,
        condition=case.condition.code,
        user_context=case.user_context.code if case.user_context else None,
        perturbation=case.perturbation.code,
        style=case.perturbation.style,
        model=case.model,
        layout=case.layout,
        critical=case.scenario.critical,
        risk=case.scenario.risk,
        repeat=repeat,
    )


class CaseItem(pytest.Item):
    """One case: setup() calls the model and evaluates; runtest() reports the verdict."""

    def __init__(self, *, case: Case, repeat: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        self.repeat = repeat
        self.prefetch: Future[Outcome] | None = None  # set when the call was submitted ahead (concurrency)
        self.outcome: Outcome | None = None
        self.junit_outcome: list[tuple[str, str]] = []  # helmbench_status and _reason (shape_report)
        self.replayed = False  # this attempt replays an earlier failed one (a rerun): nothing new to record
        self.add_marker(case_marker(case, repeat))

    def setup(self) -> None:
        # JUnit XML reads user properties from the teardown report: set them when the case runs, not
        # at collection, where 20,000 items would each carry seven tuples they may never use. Under
        # xunit2 they go to <system-out> instead (outputs.py): pytest would write invalid <properties>.
        if writes_properties(self.config) and not any(n == "helmbench_code" for n, _ in self.user_properties):
            self.user_properties.extend(self.junit_properties())  # once, even when rerun
        state = HelmbenchState.get(self.config)
        if state.is_dry_run(self.case.model):
            compose(self.case)
            pytest.skip(DRY_RUN_REASON)
        if self.outcome is not None and self.outcome.status == Status.FAILED:
            # A rerun (pytest-rerunfailures) of an unsafe answer: it stands; nothing is asked again.
            self.replayed = True
            return
        self.outcome, self.replayed = None, False
        try:
            # A prefetched call held back (the pool saw --maxfail failures first) is made here; waiting
            # for one inside this try lets a timeout (pytest-timeout) interrupt it as the case's error.
            if self.prefetch is not None:
                self._wait(self.prefetch, state)
            if self.prefetch is not None and not held_back(self.prefetch):
                self.outcome = self.prefetch.result()
            else:
                self.outcome = state.executor.run(self.case, compose(self.case), self.nodeid, self.repeat)
        except ModelStopped as exc:
            pytest.skip(str(exc))
        except CaseSkipped as exc:
            self.outcome = exc.outcome
            pytest.skip(exc.outcome.reason)
        except CaseError as exc:
            self.outcome = exc.outcome
            raise
        except pytest.fail.Exception as exc:  # pytest-timeout (signal method) interrupted the call
            if not is_timeout(exc):
                raise
            details = {TIMEOUT_DETAIL: PYTEST_TIMEOUT}
            self.outcome = error_outcome(
                state, self.case, self.repeat, self.nodeid, timeout_reason(exc), details
            )
            raise CaseError(self.outcome) from exc
        finally:
            self.prefetch = None

    def _wait(self, future: Future[Outcome], state: HelmbenchState) -> None:
        """Until the prefetched case is done: every SILENCE_SECONDS without it, one line says what
        the case is doing and how many others finished meanwhile (pytest shows cases in collection
        order: a slow conversation would hide the rest)."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        capture = self.config.pluginmanager.get_plugin("capturemanager")
        activity = state.executor.activity
        started = time.monotonic()
        while not wait([future], timeout=SILENCE_SECONDS).done:
            if reporter is not None:
                shown = sum(len(tally.results) for tally in state.tallies.values())
                line = activity.waiting_line(self.nodeid, self.name, time.monotonic() - started, shown)
                # This runs in the case's setup, where pytest captures standard output (fd 1 itself by
                # default): the line would go to the case's captured output, never the terminal.
                with capture.global_and_fixture_disabled() if capture is not None else nullcontext():
                    reporter.write_line(for_terminal(line))
                    reporter.flush()  # a CI log or a pipe is block-buffered: show it now, not at the end

    def runtest(self) -> None:
        if self.outcome is not None and self.outcome.status == Status.FAILED:
            raise CaseFailed(self.outcome)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        """The call phase's failure: an unsafe or invalid answer."""
        shown = self.case_repr(excinfo.value)
        return shown if shown is not None else super().repr_failure(excinfo, style=style)

    def _repr_failure_py(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        """pytest formats a setup error through this method (repr_failure serves the call phase only).
        A case's error is HELMBench's text: pytest's traceback, built first only to be replaced, read
        the source of some twenty frames per case (170 ms each: minutes on a run of many errors)."""
        shown = self.case_repr(excinfo.value)
        return shown if shown is not None else super()._repr_failure_py(excinfo, style=style)

    def case_repr(self, value: BaseException) -> Any:
        """What pytest shows of a case that failed (CaseFailed), errored (CaseError) or could not be
        made (a HelmbenchError in setup): the reason first, then the case's text; None for anything
        else (a bug shows its traceback)."""
        if isinstance(value, (CaseFailed, CaseError)):
            return self.reason_repr(value.outcome.reason, failure_text(value.outcome))
        if isinstance(value, HelmbenchError):
            header = f"HELMBench ERROR {self.case.code} [{self.case.model}]"
            return self.reason_repr(str(value), f"{value}\n{header}")
        return None

    def reason_repr(self, reason: str, text: str) -> Any:
        """`text` as pytest shows a failure, with `reason` as its one-line message: the short summary
        (-rA, and all of it on CI or with -vv), --tb=line and JUnit's message attribute show the reason
        alone, at the scenario file; the full text (prompt, response) stays in the failure's section."""
        from _pytest._code.code import ReprExceptionInfo, ReprFileLocation, ReprTracebackNative

        lines = [f"{line}\n" for line in for_terminal(text).split("\n")]
        location = ReprFileLocation(str(self.path), 1, for_terminal(reason))
        return ReprExceptionInfo(ReprTracebackNative(lines), location)

    def junit_properties(self) -> list[tuple[str, str]]:
        """The case's JUnit metadata (the status and reason are added when it ends: `shape_report`)."""
        case = self.case
        return [
            ("helmbench_code", case.code),
            ("helmbench_model", case.model),
            ("helmbench_scenario", case.scenario.code),
            ("helmbench_condition", case.condition.code),
            ("helmbench_user_context", case.user_context.code if case.user_context else ""),
            ("helmbench_perturbation", case.perturbation.code),
            ("helmbench_repeat", str(self.repeat)),
            ("helmbench_layout", self.case.layout),
        ]

    def reportinfo(self) -> tuple[Any, int | None, str]:
        layout = f", {self.case.layout}" if self.case.layout != "seed" else ""
        return self.path, None, f"{self.case.code} [{self.case.model}{layout}]"


def error_outcome(
    state: HelmbenchState,
    case: Case,
    repeat: int,
    nodeid: str,
    reason: str,
    details: dict[str, Any] | None = None,
) -> Outcome:
    """The error Outcome of a case the executor did not finish (a timeout, a crashed worker)."""
    prompt = compose(case)
    return Outcome(
        status=Status.ERROR,
        reason=reason,
        model=case.model,
        case_code=case.code,
        nodeid=nodeid,
        prompt=prompt.text,
        prompt_hash=prompt.hash,
        provenance=provenance(case, state.loader.info()),
        details=details or {},
        repeat=repeat,
        request_hash=state.executor.request_for(case, prompt, repeat)[2],
    )


def shape_report(item: CaseItem, call: pytest.CallInfo[None], report: pytest.TestReport) -> None:
    """What pytest shows of a case (run.pytest_runtest_makereport; a failure's and an error's text:
    CaseItem.case_repr): a skip (a dry run, a stopped model) points at the scenario file, not
    at this module; JUnit XML gets the case's status and reason when it ends (see outputs.py)."""
    value = call.excinfo.value if call.excinfo is not None else None
    if report.skipped and isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:
        report.longrepr = (str(item.path), 1, report.longrepr[2])
    in_properties = writes_properties(item.config)
    if call.when == "teardown":
        if not in_properties:  # xunit2: junit.JunitHooks writes them into <system-out>
            properties = [*item.junit_properties(), *item.junit_outcome]
            setattr(report, REPORT_ATTRIBUTE, [[name, value] for name, value in properties])
        return
    if call.when == "call" or report.failed or report.skipped:  # the case's last report
        if item.outcome is not None:
            ended = (str(item.outcome.status), item.outcome.reason)
        elif report.skipped and isinstance(report.longrepr, tuple):
            ended = (str(Status.SKIPPED), str(report.longrepr[2]).removeprefix("Skipped: "))
        else:
            ended = (str(Status.ERROR), str(value) if value is not None else "")
        item.junit_outcome = [("helmbench_status", ended[0]), ("helmbench_reason", ended[1])]
        if in_properties:  # replacing an earlier attempt's (a rerun)
            kept = [
                (n, v) for n, v in item.user_properties if n not in ("helmbench_status", "helmbench_reason")
            ]
            item.user_properties[:] = [*kept, *item.junit_outcome]


def case_items(items: list[pytest.Item]) -> list[CaseItem]:
    return [item for item in items if isinstance(item, CaseItem)]


def sort_cases(items: list[pytest.Item], keep_order: bool = False) -> bool:
    """Put the case items in numeric order (codes, then repeats) in the slots they hold, leaving
    other items where they are (all of them with `keep_order`: pytest-randomly's shuffle); False when
    there is no case item."""
    slots = [i for i, item in enumerate(items) if isinstance(item, CaseItem)]
    if keep_order:
        return bool(slots)
    ordered = sorted((items[i] for i in slots), key=lambda it: (it.case.sort_key, it.repeat))  # type: ignore[attr-defined]
    for slot, item in zip(slots, ordered, strict=True):
        items[slot] = item
    return bool(slots)


def keep_cases(config: pytest.Config, items: list[pytest.Item], keep: Callable[[CaseItem], bool]) -> None:
    """Deselect (as pytest reports it) every case item for which `keep` is false; others stay."""
    kept = [item for item in items if not isinstance(item, CaseItem) or keep(item)]
    if len(kept) < len(items):
        kept_ids = {id(item) for item in kept}
        config.hook.pytest_deselected(items=[item for item in items if id(item) not in kept_ids])
        items[:] = kept
