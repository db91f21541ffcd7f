"""`sqe` (Structured Qualitative Evaluation): the marking model(s) apply a rubric (criteria.md, or the
file a check names).

One judge's request and the reading of its answer live in judge.py, the panel (every judge asked
through the provider-side send, then the policy) in panel.py; this evaluator picks what the judge is
shown and turns the panel's verdict into an Evaluation. The judge sees only what its rubric grades,
never the rest of the answer: `field: response` shows the reply text, `fields: [category]` a JSON
object of only the named label fields; with neither, the reply in `response` (a schema without one
must say which field or fields).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import BenchmarkError
from ..suite.evaluation_spec import REPLY_FIELD, EvaluationSpec, JudgedView, RawEvaluation
from ..suite.model import Criteria, Scenario
from .base import Evaluation, EvaluationContext, Evaluator, answer_field
from .panel import NoVerdict, PanelVerdict


class StructuredQualitative(Evaluator):
    """Passes when the judge's verdict is among the rubric's pass values."""

    type = "sqe"
    needs_judge = True
    needs_criteria = True

    def check_spec(self, spec: RawEvaluation, scenario_path: Path) -> EvaluationSpec:
        """What the judge is shown (`field` or `fields`, answer properties; default `response`); the
        rubric itself is validated by the loader."""
        if "field" in spec.settings and "fields" in spec.settings:
            raise BenchmarkError(
                scenario_path,
                "sqe: give either field (one field's text) or fields (a list), not both",
                line=spec.line("fields"),
                fix="field: response for a reply rubric; fields: [category] for a label rubric",
            )
        if "fields" in spec.settings:
            view = JudgedView(_fields(spec, scenario_path), as_object=True)
            return EvaluationSpec(self.type, "", settings=spec.settings, view=view)
        if "field" not in spec.settings and REPLY_FIELD not in spec.properties:
            raise BenchmarkError(
                scenario_path,
                "sqe: the answer schema has no 'response' field, so say what the judge grades",
                line=spec.line(),
                fix=f"add field: <one of {', '.join(spec.properties) or '(none)'}>, or fields: [a, b]",
            )
        name = answer_field(spec, scenario_path, REPLY_FIELD)
        return EvaluationSpec(self.type, name, settings=spec.settings, view=JudgedView((name,)))

    def evaluate(self, context: EvaluationContext) -> Evaluation:
        criteria = context.rubric
        assert criteria is not None, "sqe needs a rubric (the loader requires one)"
        view = context.spec.view or JudgedView((REPLY_FIELD,))
        panel = context.ask_judge(criteria, view.text(context.answer))
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
            head = f"judge {word}" + _missed(criteria, panel)
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


def _missed(criteria: Criteria, panel: PanelVerdict) -> str:
    """` (unsatisfied: a, b; yellow: c)`: the checks some judge found unsatisfied, the yellow ones
    apart (they lower care and never fail the case); "" when none."""
    missed = [c for c in criteria.checks if any(not c.satisfied(v.answers[c.id]) for v in panel.answered)]
    ruled = sorted(c.id for c in missed if c.can_fail_case)
    yellow = sorted(c.id for c in missed if not c.can_fail_case)
    parts = ([f"unsatisfied: {', '.join(ruled)}"] if ruled else []) + (
        [f"yellow: {', '.join(yellow)}"] if yellow else []
    )
    return f" ({'; '.join(parts)})" if parts else ""


def _fields(spec: RawEvaluation, scenario_path: Path) -> tuple[str, ...]:
    """`fields:`: a non-empty list of distinct answer properties."""
    raw = spec.settings["fields"]
    names = list(raw) if isinstance(raw, list) else []
    unknown = [str(n) for n in names if not isinstance(n, str) or n not in spec.properties]
    if not names or unknown or len(set(names)) != len(names):
        problem = (
            f"{unknown[0]!r} is not a property of the scenario's JSON schema"
            if unknown
            else ("must be a non-empty list of distinct answer fields")
        )
        raise BenchmarkError(
            scenario_path,
            f"sqe: fields {problem}",
            line=spec.line("fields"),
            fix=f"e.g. fields: [category] (the answer's fields: {', '.join(spec.properties) or '(none)'})",
        )
    return tuple(names)
