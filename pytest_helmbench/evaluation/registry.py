"""Every evaluation type of a session by name, filled through `pytest_helmbench_register_evaluators`.

Built once per process (HelmbenchState.evaluators) and handed down to the loader as its
EvaluationTypes: the loader asks it what a type needs read and for the checked spec of a written
`evaluation:` (each type checks its own settings). The executor and the estimate ask it whether a
scenario's type needs the marking model.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import HelmbenchError
from ..suite.evaluation_spec import EvaluationSpec, RawEvaluation, TypeNeeds

if TYPE_CHECKING:
    from ..suite.model import Scenario
    from .base import Evaluator


class EvaluatorConflict(HelmbenchError):
    """Two evaluators claim the same type name."""


class EvaluatorRegistry:
    """Evaluators keyed by their `type`; a name is taken once."""

    def __init__(self) -> None:
        self._evaluators: dict[str, Evaluator] = {}

    def add(self, evaluator: Evaluator) -> None:
        """Register an evaluator under `evaluator.type`; a name already taken is an error naming both."""
        name = getattr(evaluator, "type", None)
        if not isinstance(name, str) or not name:
            raise EvaluatorConflict(f"evaluator {evaluator!r} has no type name: set `type = 'my_type'` on it")
        found = self._evaluators.get(name)
        if found is not None:
            raise EvaluatorConflict(
                f"evaluation type {name!r} is registered twice: by {found!r} and by {evaluator!r}"
                "\n  fix: give one of them another type name, or register it only once"
            )
        self._evaluators[name] = evaluator

    def get(self, name: str) -> Evaluator:
        """The evaluator of a type; KeyError names the known types."""
        try:
            return self._evaluators[name]
        except KeyError:
            raise KeyError(f"unknown evaluation type {name!r} (known: {', '.join(self.names())})") from None

    def needs(self, name: str) -> TypeNeeds:
        """What the loader must read for a scenario using type `name` (a rubric, resources.yml)."""
        evaluator = self.get(name)
        return TypeNeeds(evaluator.needs_criteria, evaluator.needs_resources)

    def needs_judge(self, scenario: Scenario) -> bool:
        """Some check of the scenario (its label evaluation when it has no checks) asks a judge."""
        types = [check.spec.type for check in scenario.checks] or [scenario.evaluation.type]
        return any(self.get(name).needs_judge for name in types)

    def check_spec(self, spec: RawEvaluation, scenario_path: Path) -> EvaluationSpec:
        """The written mapping checked by the type it names (`spec.type`, a registered name)."""
        return self.get(spec.type).check_spec(spec, scenario_path)

    def names(self) -> list[str]:
        """Known type names, sorted (the order of the loader's 'use one of …')."""
        return sorted(self._evaluators)

    def __contains__(self, name: object) -> bool:
        return name in self._evaluators

    def __len__(self) -> int:
        return len(self._evaluators)
