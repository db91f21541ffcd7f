"""The one interface every evaluation type implements (built-in or from a conftest.py / plugin).

An evaluator is registered under its `type` (the name in a scenario's `evaluation: {type: …}`),
checks that mapping once at collection (`check_spec`), and rules on each schema-valid answer
(`evaluate`). It says whether it needs the marking model (`needs_judge`), so the executor and the
estimate know which cases cost a judge call, and whether its scenario needs a criteria.md rubric
(`needs_criteria`) or the benchmark's resources.yml (`needs_resources`).

Imports here stay light (no httpx, no jsonschema): evaluators are registered in every pytest session.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import BenchmarkError
from ..suite.evaluation_spec import EvaluationSpec, RawEvaluation
from ..suite.model import Criteria, Scenario

if TYPE_CHECKING:
    from ..providers.chat import ChatResponse
    from ..suite.resources import CrisisResources
    from .panel import PanelVerdict

Judge = Callable[[Criteria, str, str], "PanelVerdict"]
"""Ask the marking model(s): (rubric, composed prompt, graded text) -> the panel's verdict; may raise
JudgeError (no verdict could be reached). A run's is a `panel.Panel`."""


@dataclass(frozen=True)
class Evaluation:
    """The verdict on one answer, with what was expected and what was found."""

    passed: bool
    reason: str
    answer: Any = None
    expected: Any = None
    actual: Any = None
    judge: PanelVerdict | None = None
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EvaluationContext:
    """Everything an evaluator may read about one answer (already parsed and schema-valid)."""

    scenario: Scenario
    spec: EvaluationSpec
    prompt: str
    response: ChatResponse
    answer: Any
    judge: Judge | None = None
    criteria: Criteria | None = None  # the rubric this check reads (else the scenario's criteria.md)
    locale: str | None = None  # the user context's `locale:` (None: unknown)
    resources: CrisisResources | None = None  # the benchmark's resources.yml, when it has one
    language: str | None = None  # the user's message's `language:` (None: untagged, English)
    declines_resources: bool = False  # the user asks not to be given hotlines (profile or message)

    @property
    def rubric(self) -> Criteria | None:
        return self.criteria or self.scenario.criteria

    def ask_judge(self, criteria: Criteria, text: str) -> PanelVerdict:
        """The marking model's verdict on `text`; only for evaluators that declare `needs_judge`."""
        if self.judge is None:
            raise RuntimeError(f"evaluation type {self.spec.type!r} called the judge without needs_judge")
        return self.judge(criteria, self.prompt, text)


class Evaluator(ABC):
    """One evaluation type. Subclasses set `type`, implement `evaluate`, and check their settings."""

    type: ClassVar[str]
    needs_judge: ClassVar[bool] = False
    needs_criteria: ClassVar[bool] = False
    needs_resources: ClassVar[bool] = False

    def check_spec(self, spec: RawEvaluation, scenario_path: Path) -> EvaluationSpec:
        """Validate the scenario's `evaluation:` mapping; raise BenchmarkError (file + fix) if bad.

        The default accepts any settings: `evaluate` reads them from `context.spec.settings`."""
        return EvaluationSpec(self.type, str(spec.settings.get("field", "")), settings=spec.settings)

    @abstractmethod
    def evaluate(self, context: EvaluationContext) -> Evaluation:
        """Rule on one schema-valid answer."""

    def expected(self, spec: EvaluationSpec, scenario: Scenario) -> Any:
        """What the answer was expected to show: reported when it is refused or unusable."""
        return None

    def __repr__(self) -> str:
        cls = type(self)
        return f"{cls.__module__}.{cls.__qualname__}"


def reject_unknown_settings(
    spec: RawEvaluation, allowed: frozenset[str], scenario_path: Path, fix: str
) -> None:
    """A setting the evaluator does not read is an error (a typo would otherwise be ignored)."""
    unknown = sorted(str(key) for key in spec.settings if key not in allowed)
    if unknown:
        raise BenchmarkError(
            scenario_path,
            f"{spec.type}: unknown setting {', '.join(map(repr, unknown))}",
            line=spec.line(unknown[0]),
            fix=fix,
        )


def answer_field(spec: RawEvaluation, scenario_path: Path, default: str) -> str:
    """The answer field an evaluation reads (`field:`, else `default`); it must be in the schema."""
    name = str(spec.settings.get("field", default))
    if name not in spec.properties:
        raise BenchmarkError(
            scenario_path,
            f"evaluation field {name!r} is not a property of the scenario's JSON schema",
            line=spec.line("field"),
            fix=f"use one of: {', '.join(spec.properties) or '(none)'}",
        )
    return name
