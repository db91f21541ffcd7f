"""Read JSON text that comes from outside (a model's answer, a provider's body) into plain values
that every database stores and every later stage can walk without recursing too deep.

Python's `json.loads` is more lenient than the standard: it reads NaN and Infinity (PostgreSQL's
JSON type rejects them), keeps the last of two equal keys (another reader keeps the first, so the
answer is ambiguous), turns `1e999` into infinity, accepts unpaired UTF-16 surrogates (not Unicode
text: UTF-8 encoders refuse them), and recurses once per nesting level (10,000 nested arrays raise
RecursionError, here or in jsonschema). Answers are read `strict` (RFC 8259 as I-JSON, RFC 7493,
narrows it; anything else is a JsonRejected naming why); provider bodies `tolerant`, where a number
that is not one reads as null (its meaning, say a cost, becomes unknown) rather than losing an answer.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable
from typing import Any

MAX_DEPTH = 64  # nesting levels, as for YAML; a real answer or body is a few levels deep

_SURROGATE = re.compile("[\ud800-\udfff]")  # after json decoding, any left is unpaired
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # how JSON text writes one


class JsonRejected(ValueError):
    """The text parses as Python JSON but is not standard, storable JSON; `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _reject_constant(name: str) -> Any:
    raise JsonRejected(f"{name} is not allowed (standard JSON has no NaN or Infinity)")


def _finite_or_reject(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JsonRejected(f"the number {text[:40]} is out of range")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits)
        raise JsonRejected(f"a {len(text)}-digit integer is out of range") from None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise JsonRejected(f"duplicate key {key[:80]!r} in one object")
            seen.add(key)
    return found


def _null(_: str) -> None:
    return None


def _finite_or_null(text: str) -> float | None:
    value = float(text)
    return value if math.isfinite(value) else None


def _int_or_null(text: str) -> int | None:
    """Beyond a double's range it is out of range, as for floats: float() of it would raise."""
    try:
        value = int(text)
    except ValueError:
        return None
    return value if abs(value) <= sys.float_info.max else None


def _check_shape(value: Any, max_depth: int, *, unicode: bool) -> None:
    """Iteratively (never recursing): nesting at most `max_depth`; with `unicode`, no unpaired
    surrogate in any string or key."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, str):
            if unicode and _SURROGATE.search(item):
                raise JsonRejected("a string holds an unpaired UTF-16 surrogate, which is not Unicode text")
            continue
        if isinstance(item, dict):
            children: Any = item.values()
            if unicode:
                stack.extend((key, level) for key in item)
        elif isinstance(item, list):
            children = item
        else:
            continue
        if level > max_depth:
            raise JsonRejected(f"nested deeper than {max_depth} levels")
        stack.extend((child, level + 1) for child in children if isinstance(child, (str, dict, list)))


def _load(text: str, max_depth: int, unicode: bool, **hooks: Callable[..., Any]) -> Any:
    try:
        value = json.loads(text, **hooks)
    except RecursionError:
        raise JsonRejected(f"nested deeper than {max_depth} levels") from None
    if _may_break_shape(text, max_depth, unicode):
        _check_shape(value, max_depth, unicode=unicode)
    return value


def _may_break_shape(text: Any, max_depth: int, unicode: bool) -> bool:
    """Whether the value parsed from `text` needs `_check_shape`'s walk: a text with no more brackets
    than `max_depth` cannot nest deeper, and one with no surrogate nor a \\u escape of one cannot hold an
    unpaired one (the walk was an eighth of an oracle run, whose bodies pass both tests)."""
    if not isinstance(text, str) or text.count("[") + text.count("{") > max_depth:
        return True
    return unicode and (_SURROGATE.search(text) is not None or _SURROGATE_ESCAPE.search(text) is not None)


def loads_strict(text: str, max_depth: int = MAX_DEPTH) -> Any:
    """Standard JSON only: no NaN/Infinity, no out-of-range number, no duplicate key, no unpaired
    surrogate, at most `max_depth` levels. Raises json.JSONDecodeError (syntax) or JsonRejected;
    both are ValueErrors."""
    return _load(
        text,
        max_depth,
        True,
        parse_constant=_reject_constant,
        parse_float=_finite_or_reject,
        parse_int=_int,
        object_pairs_hook=_unique_keys,
    )


def loads_tolerant(text: str, max_depth: int = MAX_DEPTH) -> Any:
    """A provider's body: NaN, Infinity and out-of-range numbers read as null, the last of equal keys
    wins; deeper than `max_depth` is a JsonRejected. Raises ValueError like `loads_strict`."""
    return _load(
        text, max_depth, False, parse_constant=_null, parse_float=_finite_or_null, parse_int=_int_or_null
    )


def response_text(text: str) -> str:
    """The reply a user reads in `text`: a whole JSON answer's `response`, else the text itself (a
    plain reply). The simulated user reads earlier replies this way, the oracle judge a graded text."""
    try:
        data = json.loads(text)
    except ValueError:
        return text
    if isinstance(data, dict) and isinstance(data.get("response"), str):
        return data["response"]
    return text
