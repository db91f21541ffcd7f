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

from dataclasses import dataclass, field, replace
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


@dataclass
class _Walked:
    """What one walk of a schema found: each free-text property to bound (the copy's `properties`
    mapping and the property's name) and how many properties the answer holds, at any depth."""

    open_fields: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    properties: int = 0


def bounds_for(schema: Any, max_tokens: int | None) -> Bounds:
    """The bounds that fit `max_tokens` (None: unbounded tokens, the default bounds)."""
    found = _Walked()
    _walk(schema, found)
    return _fit(found, max_tokens)


def bound_rationales(schema: Any, bounds: Bounds | None = None) -> Any:
    """A copy of `schema` where every string property named `rationale` or `<id>_rationale` (a
    judge's), `response` (the reply) or `message` (a simulated user's) has a maxLength; a bound the
    schema sets itself is kept."""
    found = _Walked()
    bounded = _walk(schema, found)
    return _bound(bounded, found, bounds or _fit(found, None))


def local_request(request: ChatRequest) -> ChatRequest:
    """The request as the local server gets it: an atomic rubric's judge answers its checks alone,
    every other free-text field bounded (one walk of the schema: copied, measured, then bounded)."""
    found = _Walked()
    bounded = _walk(without_check_rationales(request.response_format), found)
    return replace(request, response_format=_bound(bounded, found, _fit(found, request.max_tokens)))


def _fit(found: _Walked, max_tokens: int | None) -> Bounds:
    """The bounds for a walked schema's fields within `max_tokens` (None: the default bounds)."""
    fields = [name for _, name in found.open_fields]
    rationales = sum(1 for name in fields if _is_rationale(name))
    share = RATIONALE_BUDGET_CHARS // max(rationales, 1)
    bounds = Bounds(
        rationale=max(RATIONALE_MIN_CHARS, min(RATIONALE_MAX_CHARS, share)),
        reply=REPLY_MAX_CHARS,
        user_turn=USER_TURN_MAX_CHARS,
    )
    if max_tokens is None or not fields:
        return bounds
    room = int((max_tokens - FIELD_OVERHEAD_TOKENS * (found.properties + 1)) * CHARS_PER_TOKEN)
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


def _walk(schema: Any, found: _Walked) -> Any:
    """A deep copy of `schema`, noting in `found` its free-text properties and its property count."""
    if isinstance(schema, list):
        return [_walk(item, found) for item in schema]
    if not isinstance(schema, dict):
        return schema
    copy = {key: _walk(value, found) for key, value in schema.items()}
    properties = copy.get("properties")
    if isinstance(properties, dict):
        found.properties += len(properties)
        found.open_fields += [
            (properties, name)
            for name, value in properties.items()
            if _unbounded_string(value) and _limit(name, Bounds(1, 1, 1)) is not None
        ]
    return copy


def _bound(bounded: Any, found: _Walked, bounds: Bounds) -> Any:
    """The walked copy with each of its free-text properties given its maxLength (in place)."""
    for properties, name in found.open_fields:
        properties[name] = {**properties[name], "maxLength": _limit(name, bounds)}
    return bounded


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


def _unbounded_string(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") == "string" and "maxLength" not in value
