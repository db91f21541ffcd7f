"""The embedded local model's requests: judges' rationales bounded, everything else as asked."""

from __future__ import annotations

from pathlib import Path

from pytest_helmbench.evaluation.judge import judge_schema
from pytest_helmbench.providers.chat import ChatRequest
from pytest_helmbench.providers.local.schema import (
    CHARS_PER_TOKEN,
    FIELD_OVERHEAD_TOKENS,
    RATIONALE_MAX_CHARS,
    RATIONALE_MIN_CHARS,
    REPLY_MAX_CHARS,
    bound_rationales,
    bounds_for,
    local_request,
    without_check_rationales,
)
from pytest_helmbench.suite.scenario_files import parse_criteria
from tests.benchfiles import write

ATOMIC = """---
checks:
  - {id: asks_safety, question: Does it ask about safety?}
  - {id: gives_method, question: Does it give a method?, pass: "no"}
---
What you are judging.
"""


def test_every_judge_rationale_is_bounded_and_nothing_else(tmp_path: Path) -> None:
    criteria = parse_criteria(write(tmp_path / "r" / "reply-criteria.md", ATOMIC))
    assert criteria is not None
    schema = judge_schema(criteria)
    bounded = bound_rationales(schema)
    properties = bounded["json_schema"]["schema"]["properties"]
    assert properties["asks_safety_rationale"] == {"type": "string", "maxLength": RATIONALE_MAX_CHARS}
    assert properties["gives_method_rationale"]["maxLength"] == RATIONALE_MAX_CHARS
    assert "maxLength" not in properties["asks_safety"]
    assert "maxLength" not in schema["json_schema"]["schema"]["properties"]["asks_safety_rationale"]  # a copy


def test_an_answer_schema_bounds_only_its_reply_and_an_existing_bound_is_kept() -> None:
    answer = {
        "type": "object",
        "properties": {"response": {"type": "string"}, "category": {"type": "string", "enum": ["A"]}},
    }
    bounded = bound_rationales(answer)
    assert bounded["properties"]["response"] == {"type": "string", "maxLength": REPLY_MAX_CHARS}
    assert bounded["properties"]["category"] == answer["properties"]["category"]
    options = {"type": "object", "properties": {"rationale": {"type": "string", "maxLength": 50}}}
    assert bound_rationales(options) == options
    plain = {"type": "object", "properties": {"rationale": {"type": "string"}}}
    assert bound_rationales(plain)["properties"]["rationale"]["maxLength"] == RATIONALE_MAX_CHARS


def _atomic(count: int) -> str:
    checks = "\n".join(f"  - {{id: c{i}, question: Does it do thing {i}?}}" for i in range(count))
    return f"---\nchecks:\n{checks}\n---\nWhat you are judging.\n"


def test_rationales_share_one_budget_so_many_checks_get_shorter_ones(tmp_path: Path) -> None:
    criteria = parse_criteria(write(tmp_path / "r" / "reply-criteria.md", _atomic(8)))
    assert criteria is not None
    properties = bound_rationales(judge_schema(criteria))["json_schema"]["schema"]["properties"]
    lengths = {properties[f"c{i}_rationale"]["maxLength"] for i in range(8)}
    assert lengths == {60}  # 480 characters shared by eight, not 8 x 160


def test_the_bounds_fit_the_request_max_tokens_so_the_json_always_closes(tmp_path: Path) -> None:
    criteria = parse_criteria(write(tmp_path / "r" / "reply-criteria.md", _atomic(10)))
    assert criteria is not None
    schema = judge_schema(criteria)
    for max_tokens in (128, 256, 512):
        bounds = bounds_for(schema, max_tokens)
        fields = 20  # ten rationales, ten answers
        worst = bounds.rationale * 10 / CHARS_PER_TOKEN + FIELD_OVERHEAD_TOKENS * (fields + 1)
        assert worst <= max_tokens or bounds.rationale == RATIONALE_MIN_CHARS
    assert bounds_for(schema, 128).rationale < bounds_for(schema, 512).rationale
    reply = {"type": "object", "properties": {"response": {"type": "string"}}}
    assert bounds_for(reply, 512).reply == REPLY_MAX_CHARS
    assert bounds_for(reply, 200).reply < REPLY_MAX_CHARS


def test_the_local_request_changes_only_its_response_format() -> None:
    fmt = {
        "type": "json_schema",
        "json_schema": {
            "name": "v",
            "strict": True,
            "schema": {"type": "object", "properties": {"rationale": {"type": "string"}}},
        },
    }
    request = ChatRequest("local/smollm2", [{"role": "user", "content": "hi"}], fmt, temperature=0.0)
    sent = local_request(request)
    assert sent.messages == request.messages and sent.temperature == 0.0 and sent.model == request.model
    assert sent.response_format["json_schema"]["schema"]["properties"]["rationale"]["maxLength"] == 160
    assert "maxLength" not in request.response_format["json_schema"]["schema"]["properties"]["rationale"]


def test_an_atomic_judge_answers_its_checks_alone_on_the_local_model(tmp_path: Path) -> None:
    criteria = parse_criteria(write(tmp_path / "r" / "reply-criteria.md", _atomic(10)))
    assert criteria is not None
    full = judge_schema(criteria)
    request = ChatRequest("local/smollm2", [{"role": "user", "content": "x"}], full, max_tokens=512)
    sent = local_request(request).response_format["json_schema"]["schema"]
    assert list(sent["properties"]) == [f"c{i}" for i in range(10)] == sent["required"]
    assert sent["additionalProperties"] is False
    assert "c0_rationale" in full["json_schema"]["schema"]["properties"]  # the run's schema is untouched
    options = {
        "type": "json_schema",
        "json_schema": {
            "name": "verdict",
            "schema": {
                "type": "object",
                "properties": {"rationale": {"type": "string"}, "label": {"type": "string"}},
            },
        },
    }
    assert without_check_rationales(options) == options  # an options rubric keeps its one rationale
    answer = {
        "type": "json_schema",
        "json_schema": {
            "name": "answer",
            "schema": {"type": "object", "properties": {"x_rationale": {"type": "string"}}},
        },
    }
    assert without_check_rationales(answer) == answer  # only a judge's schema
