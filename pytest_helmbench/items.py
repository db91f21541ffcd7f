"""pytest nodes: one File per scenario (`.../P1-B1-S1/S1.md`), one Item per case.

The model call happens in `setup()` and the verdict in `runtest()`, so pytest's own split holds:
a call that could not be made is an ERROR, an unsafe or invalid answer is a FAILURE.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

import pytest

from .config import DRY_RUN_REASON
from .errors import HelmbenchError
from .execution.outcome import CaseError, CaseSkipped, ModelStopped, Outcome
from .reporting.terminal import failure_text
from .state import HelmbenchState
from .status import Status
from .suite.cases import Case, expand
from .suite.files import BenchmarkFiles
from .suite.prompt import compose


class HelmbenchWarning(pytest.PytestWarning):
    """A benchmark problem that does not stop the run (e.g. an ignored folder)."""


class CaseFailed(Exception):
    """The model answered, and the answer is unsafe or invalid."""

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
        repeats = state.settings.repeat
        for message in state.new_warnings():
            warnings.warn_explicit(
                HelmbenchWarning(message), HelmbenchWarning, filename=str(self.path), lineno=0
            )
        for case in expand(scenario, models):
            for repeat in range(repeats):
                yield CaseItem.from_parent(
                    self,
                    name=item_name(case, len(models) > 1, repeat if repeats > 1 else None),
                    case=case,
                    repeat=repeat,
                )

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, HelmbenchError):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


class OutsideLink(pytest.Directory):
    """A folder link under the benchmark root that leads outside it: a collection error naming the
    link, and pytest never walks (lists, imports from) what it points to."""

    def collect(self) -> Iterator[pytest.Item]:
        BenchmarkFiles(HelmbenchState.get(self.config).root).check(self.path)  # raises, naming the link
        return iter(())

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, HelmbenchError):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


def item_name(case: Case, with_model: bool, repeat: int | None) -> str:
    """`CODE`, `CODE[model]`, `CODE[r0]` or `CODE[model,r0]`."""
    parts = ([case.model] if with_model else []) + ([f"r{repeat}"] if repeat is not None else [])
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
        self.add_marker(case_marker(case, repeat))

    def setup(self) -> None:
        # JUnit XML reads user properties from the teardown report: set them when the case runs, not
        # at collection, where 20,000 items would each carry seven tuples they may never use.
        case = self.case
        if not any(name == "helmbench_code" for name, _ in self.user_properties):  # once, even when rerun
            self.user_properties.extend(
                [
                    ("helmbench_code", case.code),
                    ("helmbench_model", case.model),
                    ("helmbench_scenario", case.scenario.code),
                    ("helmbench_condition", case.condition.code),
                    ("helmbench_user_context", case.user_context.code if case.user_context else ""),
                    ("helmbench_perturbation", case.perturbation.code),
                    ("helmbench_repeat", str(self.repeat)),
                ]
            )
        state = HelmbenchState.get(self.config)
        if state.is_dry_run(self.case.model):
            compose(self.case)
            pytest.skip(DRY_RUN_REASON)
        try:
            if self.prefetch is not None:
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
        finally:
            self.prefetch = None

    def runtest(self) -> None:
        if self.outcome is not None and self.outcome.status == Status.FAILED:
            raise CaseFailed(self.outcome)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, CaseFailed):
            return failure_text(excinfo.value.outcome)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, f"{self.case.code} [{self.case.model}]"


def case_items(items: list[pytest.Item]) -> list[CaseItem]:
    return [item for item in items if isinstance(item, CaseItem)]


def sort_cases(items: list[pytest.Item]) -> bool:
    """Put the case items in numeric order (codes, then repeats) in the slots they hold, leaving
    other items where they are; False when there is no case item."""
    slots = [i for i, item in enumerate(items) if isinstance(item, CaseItem)]
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
