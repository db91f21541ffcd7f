"""Gold verdicts: the answer a rubric should get on a reference or calibration reply.

A gold verdict is a plain mapping: for an atomic rubric `check id -> "yes" | "no" | "not_applicable"`
(an unquoted YAML yes/no is a boolean: read as the word written), for an options rubric the judge's
own form `{<response_field>: value or list, rationale: …}`. `check_gold` holds one against its rubric.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import BenchmarkError
from .model import ANSWERS, Criteria

Gold = dict[str, Any]
"""A gold verdict, normalised (see the module docstring)."""


def normalise_gold(value: Mapping[str, Any]) -> Gold:
    """YAML's booleans (an unquoted yes/no) become the words "yes"/"no"; everything else as written."""
    return {str(k): ("yes" if v else "no") if isinstance(v, bool) else v for k, v in value.items()}


def check_gold(gold: Mapping[str, Any], criteria: Criteria, path: Path, where: str) -> None:
    """Raise unless `gold` is a complete verdict of `criteria` (`where` names it in the message)."""
    if criteria.atomic:
        ids = [c.id for c in criteria.checks]
        # A conversation-scope check's gold may sit with the last reply it covers (the oracle judge's).
        whole = {c.id for c in criteria.conversation.checks} if criteria.conversation else set()
        missing, extra = [i for i in ids if i not in gold], sorted(set(gold) - set(ids) - whole)
        if missing or extra:
            problem = f"lacks {', '.join(missing)}" if missing else f"has unknown check(s) {', '.join(extra)}"
            raise BenchmarkError(
                path,
                f"{where}: the gold verdict on {criteria.name} {problem}",
                fix=f"give exactly the rubric's check ids: {', '.join(ids)}",
            )
        bad = sorted(k for k, v in gold.items() if v not in ANSWERS)
        if bad:
            raise BenchmarkError(
                path,
                f"{where}: on {criteria.name}, {', '.join(bad)}: not yes, no or not_applicable",
                fix='quote them: "yes", "no" or "not_applicable"',
            )
        return
    field_name = criteria.response_field
    extra = sorted(map(str, set(gold) - {field_name, "rationale"}))
    if field_name not in gold or extra:
        problem = f"has unknown key(s) {', '.join(map(repr, extra))}" if extra else f"lacks '{field_name}'"
        raise BenchmarkError(
            path,
            f"{where}: the gold verdict on {criteria.name} {problem}",
            fix=f'write {{{field_name}: [{", ".join(criteria.pass_values[:1]) or "…"}], rationale: "…"}} '
            "(quote a rationale that has commas in a {…} mapping)",
        )
    value = gold[field_name]
    values = value if isinstance(value, list) else [value]
    if criteria.response_type == "multi" and (not isinstance(value, list) or not value):
        raise BenchmarkError(
            path, f"{where}: '{field_name}' on {criteria.name} must be a non-empty list", fix="e.g. [SAFE]"
        )
    if criteria.response_type == "single" and len(values) != 1:
        raise BenchmarkError(
            path, f"{where}: '{field_name}' on {criteria.name} must be one value", fix="e.g. SAFE"
        )
    bad = [v for v in values if v not in criteria.options]
    if bad:
        raise BenchmarkError(
            path,
            f"{where}: {bad!r} on {criteria.name} is not among its options",
            fix=f"use {', '.join(criteria.options)}",
        )


def gold_values(gold: Mapping[str, Any], criteria: Criteria) -> tuple[str, ...]:
    """An options-form gold verdict's value(s), as a tuple."""
    value = gold.get(criteria.response_field)
    return tuple(value) if isinstance(value, list) else (value,)
