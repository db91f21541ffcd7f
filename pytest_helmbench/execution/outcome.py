"""The outcome of one case: plain JSON-able data that travels from an xdist worker to the controller.

It carries the case's provenance (the exact content of every component it was composed from) so
the controller can store content rows without reloading the benchmark.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from ..errors import HelmbenchError
from ..suite.cases import Case
from ..suite.loader import BenchmarkInfo, Component

PASSED, FAILED, ERROR, SKIPPED = "passed", "failed", "error", "skipped"


def plain(value: Any) -> Any:
    """JSON-safe copy (YAML may hold dates): execnet and the database only take plain data."""
    return json.loads(json.dumps(value, default=str))


# Provenance parts are built once per exact content (keyed by content hash) and shared by every case
# that uses them: thousands of cases share a few hundred. They are read-only from here on.
_PARTS: dict[tuple[str, ...], dict[str, Any]] = {}


def _shared(key: tuple[str, ...], build: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    found = _PARTS.get(key)
    if found is None:
        if len(_PARTS) >= 65536:  # many benchmark versions in one process: never grow without bound
            _PARTS.clear()
        found = _PARTS[key] = build()
    return found


def _component(kind: str, component: Component | None) -> dict[str, Any] | None:
    if component is None:
        return None
    return _shared(
        (kind, component.code, component.hash),
        lambda: {
            "code": component.code,
            "title": component.title,
            "content": component.text,
            "severity": component.severity,
            "style": component.style,
            "meta": plain(component.meta),
            "hash": component.hash,
        },
    )


def _scenario_parts(case: Case, info: BenchmarkInfo) -> dict[str, Any]:
    scenario = case.scenario

    def build() -> dict[str, Any]:
        pillar = info.pillar(scenario.pillar)
        behaviour = info.behaviour(scenario.behaviour)
        criteria = scenario.criteria
        return {
            "benchmark": {"version": info.version, "description": info.description, "hash": info.hash},
            "pillar": {"code": pillar.code, "name": pillar.name, "description": pillar.description},
            "behaviour": {
                "code": behaviour.code,
                "title": behaviour.title,
                "description": behaviour.description,
                "compliance": behaviour.compliance,
            },
            "scenario": {
                "code": scenario.code,
                "title": scenario.title,
                "content": scenario.text,
                "category": scenario.category,
                "response_format": scenario.response_format,
                "evaluation": asdict(scenario.evaluation),
                "criteria": criteria.text if criteria else None,
                "risk": scenario.risk,
                "critical": scenario.critical,
                "meta": plain(scenario.meta),
                "hash": scenario.hash,
                "condition_codes": [c.code for c in scenario.conditions],
                "user_context_codes": [u.code for u in scenario.user_contexts],
            },
        }

    return _shared(("scenario", scenario.code, scenario.hash, info.hash), build)


def provenance(case: Case, info: BenchmarkInfo) -> dict[str, Any]:
    """Everything storage needs to upsert the content rows this case was run with."""
    return {
        **_scenario_parts(case, info),
        "condition": _component("condition", case.condition),
        "user_context": _component("user_context", case.user_context),
        "perturbation": _component("perturbation", case.perturbation),
    }


@dataclass
class Outcome:
    """Status, reason and accounting of one case (a Result row to be)."""

    status: str
    reason: str
    model: str
    case_code: str
    nodeid: str
    prompt: str
    prompt_hash: str
    provenance: dict[str, Any]
    raw_response: str | None = None
    answer: Any = None
    expected: Any = None
    actual: Any = None
    details: dict[str, Any] = field(default_factory=dict)
    latency_ms: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None
    judge_cost_usd: float | None = None
    judge_prompt_tokens: int | None = None
    judge_completion_tokens: int | None = None
    finish_reason: str | None = None
    attempts: int | None = None
    repeat: int = 0
    cached: bool = False
    request_hash: str | None = None
    cache_writes: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        # Every field already holds plain data: a shallow copy, not asdict's deep copy of the provenance.
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Outcome:
        return cls(**data)


class CaseError(HelmbenchError):
    """The case could not be run to a verdict; carries the error Outcome to record."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.reason)
        self.outcome = outcome


class CaseSkipped(HelmbenchError):
    """The case was not run to a verdict on purpose (cost ceiling); carries a skipped Outcome to record."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.reason)
        self.outcome = outcome


class ModelStopped(HelmbenchError):
    """The model was stopped earlier in this session; its remaining cases are skipped."""
