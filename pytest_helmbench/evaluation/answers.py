"""Read a model's content as a JSON answer and check it against the scenario's schema."""

from __future__ import annotations

import json
import re
from typing import Any

from jsonschema import Draft202012Validator

from ..jsontext import JsonRejected, loads_strict

_FENCED = re.compile(r"^```(?:json|JSON)?[ \t]*\n(?P<body>.*?)\n?```$", re.DOTALL)


class AnswerInvalid(Exception):
    """The content is not a usable answer: the model failed (not an error of the call)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def parse_json_content(content: str | None) -> Any:
    """Parse content as standard JSON (jsontext.loads_strict: no NaN, duplicate key or deep nesting, so
    what is stored is what every database accepts); a ```json fence around it is tolerated, nothing else."""
    if content is None or not content.strip():
        raise AnswerInvalid("empty response (no content)")
    text = content.strip()
    fenced = _FENCED.match(text)
    if fenced:
        text = fenced.group("body")
    try:
        return loads_strict(text)
    except json.JSONDecodeError as exc:
        raise AnswerInvalid(
            f"response is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    except JsonRejected as exc:
        raise AnswerInvalid(f"response is not standard JSON: {exc.reason}") from None


_VALIDATORS: dict[int, tuple[dict[str, Any], Draft202012Validator]] = {}


def _validator(schema: dict[str, Any]) -> Draft202012Validator:
    """One validator per schema object (a scenario's schema is shared by all its cases); building
    one per answer cost more than validating."""
    found = _VALIDATORS.get(id(schema))
    if found is None or found[0] is not schema:
        if len(_VALIDATORS) >= 4096:  # schemas built per call by some caller: never grow without bound
            _VALIDATORS.clear()
        found = _VALIDATORS[id(schema)] = (schema, Draft202012Validator(schema))
    return found[1]


def schema_violations(answer: Any, schema: dict[str, Any]) -> list[str]:
    """Every way the answer breaks the schema, as 'path: message' lines (sorted, deterministic)."""
    validator = _validator(schema)
    problems = []
    for error in validator.iter_errors(answer):
        path = "/".join(str(p) for p in error.absolute_path) or "(root)"
        problems.append(f"{path}: {error.message}")
    return sorted(problems)
