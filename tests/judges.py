"""Scripted judges for unit tests: the real judge pipeline over replies the test chooses.

`ScriptedJudge` runs `run_judge` (the request, the strict schema, the parsing of the judge's JSON and
the rubric's pass rule) over a reply the test picks per rubric, checks that reply against the judge
schema it was asked with (as a strict-mode provider would), and wraps the verdict the way the
executor's one-judge panel does: `PanelVerdict("majority", (verdict,), verdict.passed)`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator

from pytest_helmbench.evaluation.judge import run_judge
from pytest_helmbench.evaluation.panel import PanelVerdict
from pytest_helmbench.providers.chat import ChatResponse
from pytest_helmbench.providers.judge_wire import JudgeMessages
from pytest_helmbench.suite.model import Criteria

JUDGE_MODEL = "scripted/judge"


def chat_response(content: str, *, cost_usd: float = 0.002) -> ChatResponse:
    """A completed chat answer carrying `content`."""
    return ChatResponse(content, None, "stop", content, 300, 20, cost_usd, 50.0, 1)


def atomic(answers: Mapping[str, Mapping[str, str]]) -> dict[str, Any]:
    """An atomic rubric's judge answer from {check id: {rationale, answer}}: "<id>_rationale", "<id>"."""
    found: dict[str, Any] = {}
    for check_id, item in answers.items():
        found[f"{check_id}_rationale"] = item["rationale"]
        found[check_id] = item["answer"]
    return found


def gold_reply(criteria: Criteria, gold: Mapping[str, Any], rationale: str = "gold") -> dict[str, Any]:
    """A gold verdict (references.yml form) as the judge's JSON answer for `criteria`'s schema."""
    if criteria.atomic:
        return atomic({c.id: {"rationale": rationale, "answer": gold[c.id]} for c in criteria.checks})
    value = gold[criteria.response_field]
    values = list(value) if isinstance(value, list) else [value]
    verdict: Any = values if criteria.response_type == "multi" else values[0]
    return {"rationale": str(gold.get("rationale", rationale)), criteria.response_field: verdict}


@dataclass(frozen=True)
class JudgeCall:
    """What one scripted judge call was asked."""

    criteria: Criteria
    prompt: str
    text: str
    messages: JudgeMessages


@dataclass
class ScriptedJudge:
    """A Judge callable whose marking model answers `reply(criteria)` (a JSON-able value)."""

    reply: Callable[[Criteria], Any]
    model: str = JUDGE_MODEL
    calls: list[JudgeCall] = field(default_factory=list)

    @classmethod
    def always(cls, verdict: Any) -> ScriptedJudge:
        """The same reply to every rubric."""
        return cls(lambda criteria: verdict)

    def __call__(self, criteria: Criteria, prompt: str, text: str) -> PanelVerdict:
        def send(messages: JudgeMessages, response_format: dict[str, Any]) -> ChatResponse:
            self.calls.append(JudgeCall(criteria, prompt, text, messages))
            content = self.reply(criteria)
            if not isinstance(content, str):
                schema = response_format["json_schema"]["schema"]
                problems = [e.message for e in Draft202012Validator(schema).iter_errors(content)]
                assert not problems, f"scripted reply outside the judge schema of {criteria.name}: {problems}"
                content = json.dumps(content)
            return chat_response(content)

        verdict = run_judge(send, criteria, prompt, text, self.model)
        return PanelVerdict("majority", (verdict,), verdict.passed)
