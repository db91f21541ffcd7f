"""`sqe` (Structured Qualitative Evaluation): the marking model applies the scenario's criteria.md.

The judge call itself (prompt, strict verdict schema, parsing) lives in judge.py; this evaluator
only asks it and turns the verdict into an Evaluation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..suite.evaluation_spec import EvaluationSpec, RawEvaluation
from ..suite.model import Scenario
from .base import Evaluation, EvaluationContext, Evaluator


class StructuredQualitative(Evaluator):
    """Passes when the judge's verdict is among the rubric's pass values."""

    type = "sqe"
    needs_judge = True
    needs_criteria = True

    def check_spec(self, spec: RawEvaluation, scenario_path: Path) -> EvaluationSpec:
        """Nothing to check here: the rubric (criteria.md) is validated by the loader."""
        return EvaluationSpec(self.type, str(spec.settings.get("field", "")), settings=spec.settings)

    def evaluate(self, context: EvaluationContext) -> Evaluation:
        criteria = context.scenario.criteria
        assert criteria is not None, "sqe needs criteria (the loader requires criteria.md)"
        verdict = context.ask_judge(criteria, context.response.content or "")
        expected = list(criteria.pass_values)
        actual = list(verdict.values) if criteria.response_type == "multi" else verdict.values[0]
        word = "passes" if verdict.passed else "fails"
        return Evaluation(
            verdict.passed,
            f"judge verdict {actual!r} {word} (pass values {expected}): {verdict.rationale}",
            context.answer,
            expected,
            actual,
            verdict,
        )

    def expected(self, spec: EvaluationSpec, scenario: Scenario) -> Any:
        return list(scenario.criteria.pass_values) if scenario.criteria else None
