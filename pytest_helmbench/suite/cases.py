"""Expand scenarios into test cases (parsed benchmark -> test cases) and select them by code."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from ..codes import code_sort_key
from .model import Component, Scenario

_SEGMENT = re.compile(r"^(P|B|S|C|U|PT)([1-9]\d*|(?<=U)0)$")
#: A scenario's or perturbation's `locale: unknown`: the messages say the user is away from wherever a
#: profile places them (abroad, travelling), so where they are is unknown whatever the profile says.
UNKNOWN_LOCALE = "unknown"


@dataclass(frozen=True)
class Case:
    """One combination of scenario, condition, optional user context and perturbation, for one model."""

    scenario: Scenario
    condition: Component
    user_context: Component | None
    perturbation: Component
    model: str
    layout: str = "seed"  # "seed" (one instructed user message) or "deployed" (suite/prompt.py)

    @cached_property
    def locale(self) -> str | None:
        """Where the user is: what the conversation says first (the perturbation's `locale:`, then
        the scenario's), else the user context's stored profile; None when nothing says, or when the
        messages say the user is away from it (`locale: unknown`)."""
        for meta in (
            self.perturbation.meta,
            self.scenario.meta,
            self.user_context and self.user_context.meta,
        ):
            if meta and meta.get("locale"):
                found = str(meta["locale"])
                return None if found == UNKNOWN_LOCALE else found
        return None

    @property
    def language(self) -> str | None:
        """The language the user writes in: the perturbation's `language:` (None: untagged, English)."""
        value = self.perturbation.meta.get("language")
        return str(value) if value else None

    @property
    def declines_resources(self) -> bool:
        """The user asks not to be given hotlines (`declines_resources: true`), in their stored profile
        (the user context) or in the message itself (the perturbation): the same wish, honoured alike."""
        in_profile = self.user_context is not None and self.user_context.meta.get("declines_resources")
        return bool(in_profile or self.perturbation.meta.get("declines_resources"))

    @cached_property
    def code(self) -> str:
        parts = [self.scenario.code, self.condition.code]
        if self.user_context is not None:
            parts.append(self.user_context.code)
        parts.append(self.perturbation.code)
        return "-".join(parts)

    @cached_property
    def sort_key(self) -> tuple[object, ...]:
        """Numeric order of (code, model), built from the components' cached keys: the same order as
        `code_sort_key(code)` (no user context sorts before U1) without parsing every case's code."""
        context = code_sort_key(self.user_context.code) if self.user_context is not None else ()
        return (
            code_sort_key(self.scenario.code),
            code_sort_key(self.condition.code),
            context,
            code_sort_key(self.perturbation.code),
            self.model,
            self.layout != "seed",  # seed first, then deployed
        )

    @property
    def segments(self) -> dict[str, str]:
        """The code split by kind: {'P': 'P1', 'B': 'B1', 'S': 'S1', 'C': 'C1', 'PT': 'PT1'} (+ 'U')."""
        pillar, behaviour, scenario = self.scenario.code.split("-")
        found = {
            "P": pillar,
            "B": behaviour,
            "S": scenario,
            "C": self.condition.code,
            "PT": self.perturbation.code,
        }
        if self.user_context is not None:
            found["U"] = self.user_context.code
        return found


def expand(
    scenario: Scenario,
    models: list[str],
    layouts: tuple[str, ...] = ("seed",),
    keep: Callable[[Case], bool] | None = None,
) -> list[Case]:
    """conditions x ({no user context} + user contexts) x perturbations x models x layouts,
    numerically ordered.

    `keep` (a selection by code) is asked once per code, of its first model's and layout's case: a
    code it leaves out is never built for the other models and layouts (nine models over the shipped
    benchmark: half a million cases)."""
    if not models or not layouts:
        return []
    contexts: list[Component | None] = [None, *scenario.user_contexts]
    cases: list[Case] = []
    for condition in scenario.conditions:
        for context in contexts:
            for perturbation in scenario.perturbations:
                first = Case(scenario, condition, context, perturbation, models[0], layouts[0])
                if keep is not None and not keep(first):
                    continue
                cases += [
                    first
                    if (model, layout) == (models[0], layouts[0])
                    else Case(scenario, condition, context, perturbation, model, layout)
                    for model in models
                    for layout in layouts
                ]
    return cases


def case_by_code(scenario: Scenario, code: str, model: str = "", layout: str = "seed") -> Case | None:
    """`scenario`'s case whose code is `code` (None when it has none), found from the code's segments,
    not by expanding every case of the scenario to compare codes."""
    parts = code.strip().removeprefix(f"{scenario.code}-").split("-")
    if code.strip() == "-".join(parts) or len(parts) not in (2, 3):
        return None
    condition = _component(scenario.conditions, parts[0])
    context = _component(scenario.user_contexts, parts[1]) if len(parts) == 3 else None
    perturbation = _component(scenario.perturbations, parts[-1])
    if condition is None or perturbation is None or (len(parts) == 3 and context is None):
        return None
    return Case(scenario, condition, context, perturbation, model, layout)


def _component(components: tuple[Component, ...], code: str) -> Component | None:
    return next((component for component in components if component.code == code), None)


@dataclass(frozen=True)
class Selector:
    """A segment-aware code pattern: `P1-B1-S1` selects that scenario only (never P1-B1-S10).

    Each dash-separated segment names one kind (P, B, S, C, U, PT) and must equal the case's
    segment of that kind; `U0` selects the cases without a user context.
    """

    pattern: str
    segments: tuple[tuple[str, str], ...]

    @classmethod
    def parse(cls, pattern: str) -> Selector:
        segments = []
        for part in pattern.strip().split("-"):
            match = _SEGMENT.match(part.strip().upper())
            if not match:
                raise ValueError(
                    f"{pattern!r}: segment {part!r} is not a code such as P1, B2, S3, C1, U2 "
                    "(U0: no user context) or PT4"
                )
            segments.append((match.group(1), match.group(1) + match.group(2)))
        return cls(pattern, tuple(segments))

    def matches(self, segments: dict[str, str]) -> bool:
        for kind, value in self.segments:
            if kind == "U" and value == "U0":
                if "U" in segments:
                    return False
            elif segments.get(kind) != value:
                return False
        return True

    def may_match_scenario(self, scenario_code: str) -> bool:
        """Whether a case of scenario `scenario_code` (`P1-B1-S1`) can match: its P, B and S segments
        do (a selection then skips the scenarios it cannot keep without expanding their cases)."""
        found = dict(zip(("P", "B", "S"), scenario_code.split("-"), strict=False))
        return all(found.get(kind) == value for kind, value in self.segments if kind in ("P", "B", "S"))


def parse_selectors(values: list[str]) -> list[Selector]:
    """Comma-separated patterns from every occurrence of the option (any pattern may match)."""
    return [Selector.parse(p) for value in values for p in value.split(",") if p.strip()]
