"""What the embedded local model is asked to answer: the run's schema, with a judge's rationales and a
simulated user's message bounded.

A 135M-parameter model asked for a rationale tends to loop until max_tokens, so every verdict it
gives as a judge would be truncated (an ERROR). llama.cpp turns `maxLength` into its grammar, so a
bounded rationale ends and the verdict after it is still given. Only the local provider does this:
a hosted provider's strict mode may reject keywords it does not support, and the request's cache
key (computed before this) is unchanged.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..chat import ChatRequest

RATIONALE_FIELD = "rationale"
RATIONALE_MAX_CHARS = 160
USER_TURN_FIELD = "message"  # a simulated user's next message (providers/user_agent_wire.py)
USER_TURN_MAX_CHARS = 400


def bound_rationales(schema: Any) -> Any:
    """A copy of `schema` where every string property named `rationale` or `<id>_rationale` (a
    judge's) or `message` (a simulated user's) has a maxLength."""
    if isinstance(schema, list):
        return [bound_rationales(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    bounded = {key: bound_rationales(value) for key, value in schema.items()}
    properties = bounded.get("properties")
    if isinstance(properties, dict):
        for name, field in properties.items():
            rationale = name == RATIONALE_FIELD or name.endswith(f"_{RATIONALE_FIELD}")
            limit = (
                RATIONALE_MAX_CHARS if rationale else USER_TURN_MAX_CHARS if name == USER_TURN_FIELD else None
            )
            if (
                limit is not None
                and isinstance(field, dict)
                and field.get("type") == "string"
                and "maxLength" not in field
            ):
                properties[name] = {**field, "maxLength": limit}
    return bounded


def local_request(request: ChatRequest) -> ChatRequest:
    """The request as the local server gets it."""
    return replace(request, response_format=bound_rationales(request.response_format))
