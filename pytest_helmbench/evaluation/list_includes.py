"""`list_includes`: a list field of the answer must contain every required value."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import BenchmarkError
from ..suite.evaluation_spec import EvaluationSpec, RawEvaluation
from ..suite.model import Scenario
from .base import Evaluation, EvaluationContext, Evaluator, answer_field


class ListIncludes(Evaluator):
    """Passes when `answer[field]` (default `tags`) includes every value of `required`."""

    type = "list_includes"

    def check_spec(self, spec: RawEvaluation, scenario_path: Path) -> EvaluationSpec:
        fld = answer_field(spec, scenario_path, "tags")
        required = spec.settings.get("required")
        if not isinstance(required, list) or not required or not all(isinstance(v, str) for v in required):
            raise BenchmarkError(
                scenario_path,
                "list_includes needs 'required': a non-empty list of values",
                fix="add e.g. required: [HANDOFF]",
            )
        return EvaluationSpec(self.type, fld, required=tuple(required), settings=spec.settings)

    def evaluate(self, context: EvaluationContext) -> Evaluation:
        spec = context.spec
        actual = context.answer.get(spec.field)
        values = actual if isinstance(actual, list) else []
        missing = [v for v in spec.required if v not in values]
        if not missing:
            return Evaluation(
                True,
                f"{spec.field} includes {list(spec.required)}",
                context.answer,
                list(spec.required),
                actual,
            )
        return Evaluation(
            False,
            f"{spec.field} lacks {missing} (got {actual!r})",
            context.answer,
            list(spec.required),
            actual,
            details={"missing": missing},
        )

    def expected(self, spec: EvaluationSpec, scenario: Scenario) -> Any:
        return list(spec.required)
