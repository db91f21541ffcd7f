"""What the benchmark files say about scoring (version 3): scenario weights and harmful labels.

Two keys, both optional, both checked at load time with errors naming the file, the line and the fix:

- `weights:` in benchmark.yml weighs a scenario by its risk level and its behaviour (a scenario's
  weight is the product of the two, each 1 when unlisted). Weights are a design decision written
  down, never a by-product of how many cases a scenario expands to: every scenario's cases are
  averaged first (reporting/harm_care.py).
- `harmful_labels:` in a scenario's frontmatter names the labels whose choice is a harm in that
  scenario: for a category label (category_match, list_includes) values of the answer's field; for a
  label judged by an options rubric (sqe with `options:`), verdict values. A crisis category on a
  control, say, is a crisis response where none was warranted.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..codes import BEHAVIOUR_CODE
from ..errors import BenchmarkError

RISK_LEVELS = ("none", "low", "moderate", "high", "imminent")  # the C-SSRS screener's ladder
#: A control scenario: no risk of any kind, so any crisis response is over-escalation.
CONTROL_RISK = "none"
#: The largest weight a risk level or behaviour may carry: weights say what matters more, within reason.
MAX_WEIGHT = 100.0
WEIGHT_KINDS = ("risk", "behaviour")

LineAt = Callable[[tuple[str | int, ...]], int | None]


@dataclass(frozen=True)
class ScenarioWeights:
    """benchmark.yml's `weights:`: a factor per risk level and per behaviour (1 when unlisted)."""

    risk: Mapping[str, float] = field(default_factory=dict)
    behaviour: Mapping[str, float] = field(default_factory=dict)

    def weight(self, risk: str | None, behaviour: str) -> float:
        """A scenario's weight: its risk level's factor times its behaviour's."""
        return self.risk.get(risk or "", 1.0) * self.behaviour.get(behaviour, 1.0)

    def as_dict(self) -> dict[str, dict[str, float]]:
        return {"risk": dict(self.risk), "behaviour": dict(self.behaviour)}


def _no_line(where: tuple[str | int, ...]) -> int | None:
    return None


def parse_weights(value: Any, path: Path, line_at: LineAt = _no_line) -> ScenarioWeights:
    """Check benchmark.yml's `weights:` (None: every scenario weighs 1)."""
    if value is None:
        return ScenarioWeights()
    fix = "write e.g. weights: then '  risk: {high: 2, imminent: 2}' or '  behaviour: {P1-B1: 1.5}'"
    if not isinstance(value, dict):
        raise BenchmarkError(
            path, "'weights' must be a mapping of risk and behaviour", line=line_at(("weights",)), fix=fix
        )
    unknown = [str(key) for key in value if key not in WEIGHT_KINDS]
    if unknown:
        raise BenchmarkError(
            path,
            f"weights: unknown key {unknown[0]!r}",
            line=line_at(("weights", unknown[0])),
            fix=f"weigh scenarios by {' or '.join(WEIGHT_KINDS)} only",
        )
    risk = _factors(value.get("risk"), path, line_at, "risk")
    behaviour = _factors(value.get("behaviour"), path, line_at, "behaviour")
    return ScenarioWeights(risk, behaviour)


def _factors(value: Any, path: Path, line_at: LineAt, kind: str) -> dict[str, float]:
    if value is None:
        return {}
    where = ("weights", kind)
    example = "high: 2" if kind == "risk" else "P1-B1: 1.5"
    if not isinstance(value, dict):
        raise BenchmarkError(
            path,
            f"weights: {kind} must be a mapping of {kind} to weight",
            line=line_at(where),
            fix=f"e.g. {example}",
        )
    found: dict[str, float] = {}
    for key, weight in value.items():
        name = str(key)
        if kind == "risk" and name not in RISK_LEVELS:
            raise BenchmarkError(
                path,
                f"weights: risk {name!r} is not a risk level",
                line=line_at((*where, name)),
                fix=f"use one of {', '.join(RISK_LEVELS)}",
            )
        if kind == "behaviour" and not BEHAVIOUR_CODE.fullmatch(name):
            raise BenchmarkError(
                path,
                f"weights: behaviour {name!r} is not a code like 'P1-B1'",
                line=line_at((*where, name)),
                fix="key each behaviour by its pillar and behaviour code, e.g. P1-B1",
            )
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight):
            weight = None
        if weight is None or not 0 < weight <= MAX_WEIGHT:
            raise BenchmarkError(
                path,
                f"weights: {kind} {name}: {value[key]!r} must be a number above 0 and at most {MAX_WEIGHT:g}",
                line=line_at((*where, name)),
                fix=f"e.g. {example} (1 is the default weight)",
            )
        found[name] = float(weight)
    return found


def parse_harmful_labels(
    meta: Mapping[str, Any], path: Path, allowed: tuple[str, ...] | None, line_at: LineAt = _no_line
) -> tuple[str, ...]:
    """A scenario's `harmful_labels:`: a list of labels, each one of `allowed` when the label check
    names its possible values (a schema enum, a rubric's options); () when absent."""
    value = meta.get("harmful_labels")
    if value is None:
        return ()
    where = ("harmful_labels",)
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value):
        raise BenchmarkError(
            path,
            f"harmful_labels {value!r} must be a non-empty list of labels",
            line=line_at(where),
            fix="write e.g. harmful_labels: [HANDOFF, EMERGENCY]",
        )
    if allowed is not None:
        unknown = [label for label in value if label not in allowed]
        if unknown:
            raise BenchmarkError(
                path,
                f"harmful_labels: {', '.join(map(repr, unknown))} is not a label this scenario's label check "
                "can give (or it is the label that passes)",
                line=line_at((*where, value.index(unknown[0]))),
                fix=f"use labels from {', '.join(allowed) or '(none)'}",
            )
    return tuple(dict.fromkeys(value))
