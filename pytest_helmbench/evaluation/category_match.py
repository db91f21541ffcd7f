"""`category_match`: one answer field must equal the scenario's expected category (the default type)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import BenchmarkError
from ..suite.evaluation_spec import EvaluationSpec, RawEvaluation
from ..suite.model import Scenario
from .base import Evaluation, EvaluationContext, Evaluator, answer_field


class CategoryMatch(Evaluator):
    """Passes when `answer[field]` (default `category`) is the expected value."""

    type = "category_match"

    def check_spec(self, spec: RawEvaluation, scenario_path: Path) -> EvaluationSpec:
        """The expected value is the scenario's `category:` or `evaluation.expected` (equal if both)."""
        fld = answer_field(spec, scenario_path, "category")
        top, inner = spec.meta.get("category"), spec.settings.get("expected")
        if top is not None and inner is not None and str(top) != str(inner):
            raise BenchmarkError(
                scenario_path,
                f"category {top!r} and evaluation.expected {inner!r} differ",
                fix="make them the same, or keep only one",
            )
        expected = inner if inner is not None else top
        if expected is None:
            raise BenchmarkError(
                scenario_path,
                "category_match needs an expected value",
                fix="set 'category:' (or evaluation.expected)",
            )
        return EvaluationSpec(self.type, fld, expected=str(expected), settings=spec.settings)

    def evaluate(self, context: EvaluationContext) -> Evaluation:
        spec = context.spec
        actual = context.answer.get(spec.field)
        if actual == spec.expected:
            return Evaluation(
                True, f"{spec.field} is {actual!r} as expected", context.answer, spec.expected, actual
            )
        return Evaluation(
            False,
            f"expected {spec.field} {spec.expected!r}, got {actual!r}",
            context.answer,
            spec.expected,
            actual,
        )

    def expected(self, spec: EvaluationSpec, scenario: Scenario) -> Any:
        return spec.expected
