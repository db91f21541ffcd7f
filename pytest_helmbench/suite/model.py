"""The parsed benchmark: immutable dataclasses the loader builds and every later stage reads.

Plain data only (no file reading): the kinds of component and where their files live, components,
sqe rubrics, scenarios, benchmark.yml's descriptions, and `content_hash`, which names one exact version
of a piece of content (stored with results so a changed file is a new version).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from .conversation import Dialogue, plain_words
from .evaluation_spec import EvaluationSpec
from .scoring_spec import ScenarioWeights


@dataclass(frozen=True)
class Kind:
    """One kind of component and where its files live."""

    name: str
    prefix: str
    consolidated: str
    folder: str


CONDITION = Kind("condition", "C", "conditions.md", "conditions")
USER_CONTEXT = Kind("user_context", "U", "user-contexts.md", "user-contexts")
PERTURBATION = Kind("perturbation", "PT", "perturbations.md", "perturbations")
SHARED_KINDS = (CONDITION, USER_CONTEXT)


def content_hash(*parts: Any) -> str:
    """A stable hash of JSON-able parts: identifies one exact version of a piece of content."""
    data = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Component:
    """A condition, user context or perturbation: its prompt text plus metadata."""

    kind: str
    code: str
    title: str
    body: str
    text: str
    meta: dict[str, Any]
    severity: int
    source: Path
    line: int | None
    hash: str
    dialogue: Dialogue | None = None  # a perturbation that is a conversation (suite/conversation.py)

    @property
    def style(self) -> str | None:
        value = self.meta.get("style")
        return str(value) if value is not None else None

    @cached_property
    def words(self) -> str:
        """What the user says first, without tags (the deployed layout's first user message): parsed
        from the body once (the oracles ask for it of every pending perturbation at each lookup)."""
        return self.dialogue.first if self.dialogue is not None else plain_words(self.body)


ANSWERS = ("yes", "no", "not_applicable")
"""What a judge may answer to one atomic check."""
RATIONALE_SUFFIX = "_rationale"
"""The judge gives check `x`'s evidence as `x_rationale` (so no check id may end with it)."""


@dataclass(frozen=True)
class RubricCheck:
    """One atomic check of a rubric: a yes/no question about the reply and which answer satisfies it."""

    id: str
    question: str
    pass_answer: str = "yes"  # "yes" or "no"
    # How "not_applicable" counts; None: strict, as for a check written without `not_applicable:` (a
    # care check answered not_applicable was not done, a harm check answered not_applicable did no harm).
    na_passes: bool | None = None
    required: bool = True  # must be satisfied even under an "at_least N" rule
    #: What the check is worth in the care score (scoring version 3): 1..10, as HealthBench's rubric
    #: items carry points. Only a care check (pass: "yes") earns points; a harm check counts as harm.
    points: int = 1
    #: `tier:` as written: "red" (a failure is a harm and fails the case), "yellow" (a failure lowers
    #: care and never fails the case) or None (the default: red for a harm check; a care check counts in
    #: care and its failure fails the case, as before tiers).
    tier: str | None = None
    #: `scope:` "reply" (asked of every reply) or "conversation" (asked once, over the whole transcript).
    scope: str = "reply"

    @property
    def harm(self) -> bool:
        """Counted as harm: a failure of this check is a harm (a red check; a harm check by default)."""
        return self.tier == "red" or (self.tier is None and self.pass_answer == "no")

    @property
    def effective_tier(self) -> str | None:
        """The tier it is scored by: red, yellow, or None (an untiered care check)."""
        return "red" if self.harm else self.tier

    @property
    def can_fail_case(self) -> bool:
        """Whether its failure can fail the case: every check but a yellow one."""
        return self.tier != "yellow"

    def harmful(self, answer: str) -> bool:
        """Whether one judge's answer is a harm on this (red) check: a harm check answered yes (as
        before tiers); a red care check answered anything that does not satisfy it."""
        if self.pass_answer == "no":
            return answer == "yes"
        return not self.satisfied(answer)

    def __post_init__(self) -> None:
        if self.na_passes is None:
            object.__setattr__(self, "na_passes", self.pass_answer == "no")

    @property
    def care(self) -> bool:
        """Counted in the care score: an untiered care check or any yellow check (not harm)."""
        return not self.harm

    def satisfied(self, answer: str) -> bool:
        return answer == self.pass_answer or (answer == "not_applicable" and self.na_passes)


@dataclass(frozen=True)
class Criteria:
    """An `sqe` rubric: the judge's options, which pass, and the rubric text.

    Two forms: the design note's options form (`options`/`pass_values`), or atomic checks (`checks`,
    each answered yes/no/not_applicable, and a rule: every check satisfied, or at least
    `min_satisfied` of them with every required one)."""

    options: tuple[str, ...]
    pass_values: tuple[str, ...]
    response_field: str
    response_type: str
    text: str
    path: Path
    hash: str
    checks: tuple[RubricCheck, ...] = ()
    min_satisfied: int | None = None  # None: rule "all"
    shared_as: str | None = None  # a shared rubric: its path from the benchmark root, `/rubrics/x.md`
    #: The rubric's `scope: conversation` checks, as a rubric of their own that the judge is asked once
    #: per case over the whole transcript (`checks` above are the per-reply ones); None when it has none.
    conversation: Criteria | None = None
    scope: str = "reply"  # "conversation": this is a rubric's conversation part (the judge is told so)

    @property
    def atomic(self) -> bool:
        return bool(self.checks)

    @property
    def name(self) -> str:
        """How scenarios, references and calibration items name the rubric: its file name beside
        the scenario, or a shared rubric's path from the benchmark root."""
        return self.shared_as or self.path.name

    def answers_pass(self, answers: dict[str, str]) -> bool:
        """The rule applied to one answer per check (a missing answer is not satisfied). A yellow check
        never fails the case, so the rule leaves it out; a red one must be satisfied under any rule."""
        ruled = [c for c in self.checks if c.can_fail_case]
        satisfied = {c.id: c.satisfied(answers.get(c.id, "")) for c in ruled}
        if self.min_satisfied is None:
            return all(satisfied.values())
        required_ok = all(satisfied[c.id] for c in ruled if c.required or c.tier == "red")
        return required_ok and sum(satisfied.values()) >= self.min_satisfied

    def values_pass(self, values: tuple[str, ...]) -> bool:
        """Options form: single, the value is a pass value; multi, non-empty and every value passes."""
        return bool(values) and all(v in self.pass_values for v in values)


@dataclass(frozen=True)
class Check:
    """One evaluation a case must pass: the label check (`evaluation:`, role "evaluation") or one of
    the scenario's `checks:` (role "check"), with the rubric it reads, if any."""

    name: str
    spec: EvaluationSpec
    criteria: Criteria | None
    role: str = "check"


@dataclass(frozen=True)
class Scenario:
    """One scenario with everything needed to expand and run its cases."""

    code: str
    pillar: str
    behaviour: str
    path: Path
    title: str
    meta: dict[str, Any]
    text: str
    response_format: dict[str, Any]
    evaluation: EvaluationSpec
    criteria: Criteria | None
    category: str | None
    risk: str | None
    critical: bool
    refusal_passes: bool
    conditions: tuple[Component, ...]
    user_contexts: tuple[Component, ...]
    perturbations: tuple[Component, ...]
    hash: str
    checks: tuple[Check, ...] = ()  # every evaluation, the label check first
    harmful_labels: tuple[str, ...] = ()  # labels whose choice is a harm here (scoring_spec.py)

    @property
    def schema(self) -> dict[str, Any]:
        return self.response_format["json_schema"]["schema"]


ScenarioOf = Callable[[Path], Scenario]
"""A scenario folder's parsed scenario: a loader's `load_scenario`, or a session's, which parses each
folder once for collection and gives the same object to the oracles' index and the run's record."""


@dataclass(frozen=True)
class PillarInfo:
    code: str
    name: str
    description: str


@dataclass(frozen=True)
class BehaviourInfo:
    code: str
    title: str
    description: str
    compliance: str
    threshold: float | None = None


@dataclass(frozen=True)
class BenchmarkInfo:
    """The contents of benchmark.yml (all optional)."""

    version: str
    description: str
    categories: dict[str, str]
    styles: dict[str, str]
    pillars: dict[str, PillarInfo]
    behaviours: dict[str, BehaviourInfo]
    hash: str
    changelog: dict[str, tuple[str, ...]] = field(default_factory=dict)  # version -> what changed
    present: bool = True  # False: there is no benchmark.yml (every description falls back, unsaid)
    weights: ScenarioWeights = field(default_factory=ScenarioWeights)  # scoring weights (scoring_spec.py)

    def scenario_weight(self, scenario: Scenario) -> float:
        """The weight of a scenario in scoring version 3's figures (its cases averaged first)."""
        return self.weights.weight(scenario.risk, scenario.behaviour)

    def pillar(self, code: str, warn: list[str] | None = None) -> PillarInfo:
        """The pillar's description, falling back to its code (with a warning when benchmark.yml exists
        and does not describe it) when undescribed."""
        if code not in self.pillars:
            if warn is not None and self.present:
                warn.append(f"benchmark.yml describes no pillar {code}: its name falls back to the code")
            return PillarInfo(code, code, "")
        return self.pillars[code]

    def behaviour(self, code: str, warn: list[str] | None = None) -> BehaviourInfo:
        if code not in self.behaviours:
            if warn is not None and self.present:
                warn.append(f"benchmark.yml describes no behaviour {code}: its title falls back to the code")
            return BehaviourInfo(code, code, "", "")
        return self.behaviours[code]
