"""`sqe` (Structured Qualitative Evaluation): the marking model(s) apply a rubric (criteria.md, or the
file a check names).

One judge's request and the reading of its answer live in judge.py, the panel (every judge asked
through the provider-side send, then the policy) in panel.py; this evaluator picks the text to show
(the whole answer, or one field of it such as `response`, the reply the user would read) and turns
the panel's verdict into an Evaluation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..suite.evaluation_spec import EvaluationSpec, RawEvaluation
from ..suite.model import Scenario
from .base import Evaluation, EvaluationContext, Evaluator, answer_field
from .panel import NoVerdict


class StructuredQualitative(Evaluator):
    """Passes when the judge's verdict is among the rubric's pass values."""

    type = "sqe"
    needs_judge = True
    needs_criteria = True

    def check_spec(self, spec: RawEvaluation, scenario_path: Path) -> EvaluationSpec:
        """`field`, when given, must be an answer property (the judge is shown only that field); the
        rubric itself is validated by the loader."""
        name = answer_field(spec, scenario_path, "") if "field" in spec.settings else ""
        return EvaluationSpec(self.type, name, settings=spec.settings)

    def evaluate(self, context: EvaluationContext) -> Evaluation:
        criteria = context.rubric
        assert criteria is not None, "sqe needs a rubric (the loader requires one)"
        name = context.spec.field
        text = str(context.answer.get(name, "")) if name and isinstance(context.answer, dict) else None
        panel = context.ask_judge(criteria, text if text is not None else context.response.content or "")
        if panel.passed is None:
            raise NoVerdict(panel)
        if criteria.atomic:
            expected: Any = {c.id: c.pass_answer for c in criteria.checks}
            actual: Any = [dict(v.answers) for v in panel.answered]
        else:
            expected = list(criteria.pass_values)
            actual = [
                list(v.values) if criteria.response_type == "multi" else v.values[0] for v in panel.answered
            ]
        actual = actual[0] if len(actual) == 1 else actual
        word = "passes" if panel.passed else "fails"
        if criteria.atomic:
            missed = sorted(
                {c.id for v in panel.answered for c in criteria.checks if not c.satisfied(v.answers[c.id])}
            )
            head = f"judge {word}" + (f" (unsatisfied: {', '.join(missed)})" if missed else "")
        else:
            head = f"judge verdict {actual!r} {word} (pass values {expected})"
        return Evaluation(
            panel.passed,
            f"{head}: {panel.summary()}",
            context.answer,
            expected,
            actual,
            panel,
        )

    def expected(self, spec: EvaluationSpec, scenario: Scenario) -> Any:
        return list(scenario.criteria.pass_values) if scenario.criteria else None
