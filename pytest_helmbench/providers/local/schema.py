"""What the embedded local model is asked to answer: the run's schema, with every free-text field
bounded so that its JSON always closes within max_tokens.

A 135M-parameter model asked for a rationale tends to loop until max_tokens, and sometimes loops in
its reply too, so its answers were truncated (an ERROR the run's own settings caused). llama.cpp
turns `maxLength` into its grammar, so a bounded field ends and the fields after it are still given.
The bounds are fitted to the request's max_tokens: a judge's rationales share one budget (eight
checks get shorter rationales than one), a reply and a simulated user's message get their own.
Only the local provider does this: a hosted provider's strict mode may reject keywords it does not
support, and the request's cache key (computed before this) is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ...suite.evaluation_spec import REPLY_FIELD
from ..chat import ChatRequest

RATIONALE_FIELD = "rationale"
RATIONALE_MAX_CHARS = 160  # one rationale, when the budget allows
RATIONALE_MIN_CHARS = 40  # never shorter: a verdict still cites its evidence
RATIONALE_BUDGET_CHARS = 480  # every rationale of one answer together
USER_TURN_FIELD = "message"  # a simulated user's next message (providers/user_agent_wire.py)
USER_TURN_MAX_CHARS = 400
REPLY_MAX_CHARS = 800  # the reply the user reads: a few short paragraphs
CHARS_PER_TOKEN = 2.5  # worst case of SmolLM2's tokenizer on looping or non-Latin text
FIELD_OVERHEAD_TOKENS = 16  # a key, its quotes, an enum answer and the whitespace the grammar allows


@dataclass(frozen=True)
class Bounds:
    """maxLength per kind of free-text field, for one request."""

    rationale: int
    reply: int
    user_turn: int


def bounds_for(schema: Any, max_tokens: int | None) -> Bounds:
    """The bounds that fit `max_tokens` (None: unbounded tokens, the default bounds)."""
    fields = _string_fields(schema)
    rationales = sum(1 for name in fields if _is_rationale(name))
    share = RATIONALE_BUDGET_CHARS // max(rationales, 1)
    bounds = Bounds(
        rationale=max(RATIONALE_MIN_CHARS, min(RATIONALE_MAX_CHARS, share)),
        reply=REPLY_MAX_CHARS,
        user_turn=USER_TURN_MAX_CHARS,
    )
    if max_tokens is None or not fields:
        return bounds
    room = int((max_tokens - FIELD_OVERHEAD_TOKENS * (_property_count(schema) + 1)) * CHARS_PER_TOKEN)
    wanted = bounds.rationale * rationales + sum(
        bounds.reply if name == REPLY_FIELD else bounds.user_turn
        for name in fields
        if not _is_rationale(name)
    )
    if wanted <= room:
        return bounds
    scale = max(room, 0) / wanted
    return Bounds(
        rationale=max(RATIONALE_MIN_CHARS, int(bounds.rationale * scale)),
        reply=max(RATIONALE_MIN_CHARS, int(bounds.reply * scale)),
        user_turn=max(RATIONALE_MIN_CHARS, int(bounds.user_turn * scale)),
    )


def bound_rationales(schema: Any, bounds: Bounds | None = None) -> Any:
    """A copy of `schema` where every string property named `rationale` or `<id>_rationale` (a
    judge's), `response` (the reply) or `message` (a simulated user's) has a maxLength; a bound the
    schema sets itself is kept."""
    bounds = bounds or bounds_for(schema, None)
    if isinstance(schema, list):
        return [bound_rationales(item, bounds) for item in schema]
    if not isinstance(schema, dict):
        return schema
    bounded = {key: bound_rationales(value, bounds) for key, value in schema.items()}
    properties = bounded.get("properties")
    if isinstance(properties, dict):
        for name, field in properties.items():
            limit = _limit(name, bounds)
            if limit is not None and _unbounded_string(field):
                properties[name] = {**field, "maxLength": limit}
    return bounded


def local_request(request: ChatRequest) -> ChatRequest:
    """The request as the local server gets it: an atomic rubric's judge answers its checks alone,
    every other free-text field bounded."""
    schema = without_check_rationales(request.response_format)
    bounds = bounds_for(schema, request.max_tokens)
    return replace(request, response_format=bound_rationales(schema, bounds))


def without_check_rationales(response_format: Any) -> Any:
    """An atomic rubric's judge schema without its `<id>_rationale` fields (a copy; anything else as
    it is). Their keys and text were three quarters of the embedded judge's answer (about 360 of 460
    tokens for ten checks), its largest cost on two cores, and a 135M model's rationales say
    nothing; the verdicts are unchanged, and the stored rationale lists the answers alone."""
    if not isinstance(response_format, dict):
        return response_format
    wire = response_format.get("json_schema")
    schema = wire.get("schema") if isinstance(wire, dict) and wire.get("name") == "verdict" else None
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return response_format
    kept = {k: v for k, v in properties.items() if not k.endswith(f"_{RATIONALE_FIELD}")}
    if len(kept) == len(properties):
        return response_format
    required = [k for k in schema.get("required", []) if k in kept]
    return {
        **response_format,
        "json_schema": {**wire, "schema": {**schema, "properties": kept, "required": required}},
    }


def _is_rationale(name: str) -> bool:
    return name == RATIONALE_FIELD or name.endswith(f"_{RATIONALE_FIELD}")


def _limit(name: str, bounds: Bounds) -> int | None:
    if _is_rationale(name):
        return bounds.rationale
    return {REPLY_FIELD: bounds.reply, USER_TURN_FIELD: bounds.user_turn}.get(name)


def _unbounded_string(field: Any) -> bool:
    return isinstance(field, dict) and field.get("type") == "string" and "maxLength" not in field


def _string_fields(schema: Any) -> list[str]:
    """The names of every free-text property this provider bounds, at any depth."""
    if isinstance(schema, list):
        return [name for item in schema for name in _string_fields(item)]
    if not isinstance(schema, dict):
        return []
    found = [name for value in schema.values() for name in _string_fields(value)]
    properties = schema.get("properties")
    if isinstance(properties, dict):
        found += [
            name
            for name, field in properties.items()
            if _unbounded_string(field) and _limit(name, Bounds(1, 1, 1)) is not None
        ]
    return found


def _property_count(schema: Any) -> int:
    """How many properties the answer holds, at any depth: each costs its key and punctuation."""
    if isinstance(schema, list):
        return sum(_property_count(item) for item in schema)
    if not isinstance(schema, dict):
        return 0
    properties = schema.get("properties")
    own = len(properties) if isinstance(properties, dict) else 0
    return own + sum(_property_count(value) for value in schema.values())
