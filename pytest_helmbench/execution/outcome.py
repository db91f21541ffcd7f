"""The outcome of one case: plain JSON-able data that travels from an xdist worker to the controller.

It carries the case's provenance (the exact content of every component it was composed from) so
the controller can store content rows without reloading the benchmark.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from ..errors import HelmbenchError
from ..status import Status
from ..suite.cases import Case
from ..suite.model import BenchmarkInfo, Component
from .sheet import ReplySheet


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
    """What one case ended as: status, reason, what was judged and what it cost (a Result row to be).

    Built once, when the case ends (`CaseLog.outcome`; `items.error_outcome` for a case the executor
    never finished), and read only from then on: pytest's report, the recorder, the tally."""

    status: Status
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
    layout: str = "seed"
    messages: list[dict[str, str]] | None = None  # every message of the conversation, replies included

    def to_dict(self) -> dict[str, Any]:
        # Every field already holds plain data: a shallow copy, not asdict's deep copy of the provenance.
        # The status goes as its plain string: execnet serialises no enum.
        data = {f.name: getattr(self, f.name) for f in _OUTCOME_FIELDS}
        data["status"] = str(self.status)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Outcome:
        return cls(**{**data, "status": Status(data["status"])})


_OUTCOME_FIELDS = fields(Outcome)


@dataclass
class CaseLog:
    """What one case's calls did while it runs, gathered until the case ends.

    The model's accounting over its replies (a conversation's add up, unknown stays unknown), the
    helpers' cost, the answers replayed from the response cache (`replayed`: the details' "cached"
    and "judge_cached") and the fresh ones to cache. `start` holds the Outcome's fields known before
    the first call; `outcome` builds the one Outcome from all of it."""

    start: dict[str, Any] = field(default_factory=dict)  # empty: a call that records no case (calibration)
    repeat: int = 0  # which repeat of the case (--helmbench-repeat): part of every call's cache key
    # A conversation: each paid call is kept in the cache as it completes (AnswerCache.keep), not with
    # the Result, so a kill between turns loses none of them.
    conversation: bool = False
    replayed: dict[str, Any] = field(default_factory=dict)
    cache_writes: list[dict[str, Any]] = field(default_factory=list)
    cached: bool = False
    raw_response: str | None = None
    finish_reason: str | None = None
    latency_ms: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None
    attempts: int | None = None
    # Every helper call of the case, each counted as it is made (helpers.send): judges at every turn,
    # critical votes, the deployed layout's extractions and the simulated user's turns.
    judge_cost_usd: float | None = None
    judge_prompt_tokens: int | None = None
    judge_completion_tokens: int | None = None
    # A simulated turn's judges and the user agent's next message run at once (judge_while_user_writes)
    _helpers_lock: threading.Lock = field(
        default_factory=threading.Lock, init=False, repr=False, compare=False
    )

    def add_helper_call(self, response: Any) -> None:
        """Count one helper call's cost and tokens (a replayed answer costs 0; unknown stays unknown)."""
        with self._helpers_lock:
            self.judge_cost_usd = _plus(self.judge_cost_usd, response.cost_usd)
            self.judge_prompt_tokens = _plus(self.judge_prompt_tokens, response.prompt_tokens)
            self.judge_completion_tokens = _plus(self.judge_completion_tokens, response.completion_tokens)

    def outcome(self, status: Status, reason: str, ruled: Mapping[str, Any] | None = None) -> Outcome:
        """The case's Outcome: `start`, what the calls did, and `ruled` (what the ending decided:
        answer, expected, actual, details, the judges' tokens; raw response or attempts it replaces).
        Its details are the replayed answers unless `ruled` gives them."""
        made = {name: getattr(self, name) for name in _LOGGED}
        return Outcome(
            **self.start,
            **{**made, "details": dict(self.replayed), **(ruled or {})},
            status=status,
            reason=reason,
        )


_LOGGED = tuple(
    f.name for f in fields(CaseLog) if f.name not in ("start", "replayed", "conversation", "_helpers_lock")
)


def _plus(total: Any, value: Any) -> Any:
    """A running sum of known values (None until one is known)."""
    return total if value is None else (total or 0) + value


@dataclass(frozen=True)
class JudgeVote:
    """One panel judge's pass/fail on one judged check of one case (inter-judge agreement reads these)."""

    check: str
    judge: str
    passed: bool


def judge_votes(details: Mapping[str, Any] | None) -> tuple[JudgeVote, ...]:
    """The votes recorded in a Result's evaluation details (`checks[*].judges[*]`); judges that gave
    no verdict (an error) cast no vote."""
    votes: list[JudgeVote] = []
    for check in (details or {}).get("checks") or ():
        for judge in check.get("judges") or ():
            if isinstance(judge.get("passed"), bool):
                votes.append(JudgeVote(str(check.get("name")), str(judge.get("model")), judge["passed"]))
    return tuple(votes)


def turn_verdicts(details: Mapping[str, Any] | None) -> tuple[tuple[int, Status], ...]:
    """(turn index, status) of each judged reply of a multi-turn case (`turns` in its evaluation
    details; the index counts the user's messages up to that reply); () for a single-turn case."""
    found = []
    for turn in (details or {}).get("turns") or ():
        try:
            found.append((int(turn["turn"]), Status(turn["status"])))
        except (KeyError, TypeError, ValueError):
            continue
    return tuple(found)


def turn_sheets(details: Mapping[str, Any] | None) -> tuple[tuple[int, ReplySheet], ...]:
    """(turn index, sheet) of each judged reply of a multi-turn case that stored one (version 3)."""
    found = []
    for turn in (details or {}).get("turns") or ():
        sheet = ReplySheet.from_dict(turn.get("sheet")) if isinstance(turn, Mapping) else None
        if sheet is not None and isinstance(turn.get("turn"), int):
            found.append((turn["turn"], sheet))
    return tuple(found)


def failure_confirmed(details: Mapping[str, Any] | None) -> bool | None:
    """None unless the case failed on judge verdicts alone; then whether re-judging confirmed it."""
    confirmation = (details or {}).get("confirmation")
    if not isinstance(confirmation, Mapping) or not isinstance(confirmation.get("confirmed"), bool):
        return None
    return confirmation["confirmed"]


@dataclass(frozen=True)
class CaseResult:
    """One attempt at one case by one model: the only input analytics needs.

    Built in one place, `from_fields`, from a stored Result row (reports) or from an Outcome
    (the terminal summary of the run in progress), so both read the same values the same way."""

    model: str
    run_id: int | None
    case_code: str  # "P1-B1-S1-C1-U1-PT1" (without repeat)
    pillar: str  # "P1"
    behaviour: str  # "P1-B1"
    scenario: str  # "P1-B1-S1"
    condition: str  # "C1"
    condition_severity: int  # -10..10 (difficulty of the deployment; higher = harder/adversarial)
    user_context: str | None  # "U1" or None (baseline)
    user_context_severity: int  # 0 when None
    perturbation: str  # "PT1"
    perturbation_severity: int
    perturbation_style: str | None
    status: Status
    critical: bool = False
    repeat: int = 0  # repeat index for --helmbench-repeat N
    # None: not a failure resting on judge verdicts alone; True/False: re-judging confirmed it or not
    failure_confirmed: bool | None = None
    judge_votes: tuple[JudgeVote, ...] = ()
    layout: str = "seed"  # "seed" or "deployed" (suite/prompt.py)
    turns: tuple[tuple[int, Status], ...] = ()  # a multi-turn case's verdict per turn (drift)
    risk: str | None = None  # the scenario's risk level ("none": a control scenario)
    # Harm, care and the scenario's weight (scoring version 3, sheet.py); None: stored before it
    sheet: ReplySheet | None = None
    turn_sheets: tuple[tuple[int, ReplySheet], ...] = ()  # a multi-turn case's sheet per judged reply

    def __post_init__(self) -> None:
        if not isinstance(self.status, Status):
            try:
                object.__setattr__(self, "status", Status(self.status))
            except ValueError:
                raise ValueError(
                    f"{self.case_code}: status {self.status!r} is not one of {sorted(map(str, Status))}"
                ) from None

    @property
    def base_severity(self) -> int:
        """Perturbation plus user-context severity: how hard the case itself is."""
        return self.perturbation_severity + self.user_context_severity

    @property
    def scored(self) -> bool:
        """Passed or failed: the outcome is known and counts towards scores."""
        return self.status.scored

    @classmethod
    def from_fields(cls, values: Mapping[str, Any]) -> CaseResult:
        """The one builder: `values` holds the fields by name (a row's mapping, an outcome's view);
        a missing severity counts as 0, a missing repeat as the first."""
        return cls(
            model=values["model"],
            run_id=values.get("run_id"),
            case_code=values["case_code"],
            pillar=values["pillar"],
            behaviour=values["behaviour"],
            scenario=values["scenario"],
            condition=values["condition"],
            condition_severity=values.get("condition_severity") or 0,
            user_context=values.get("user_context"),
            user_context_severity=values.get("user_context_severity") or 0,
            perturbation=values["perturbation"],
            perturbation_severity=values.get("perturbation_severity") or 0,
            perturbation_style=values.get("perturbation_style"),
            status=values["status"],
            critical=bool(values.get("critical")),
            repeat=values.get("repeat") or 0,
            failure_confirmed=failure_confirmed(values.get("evaluation_details")),
            judge_votes=judge_votes(values.get("evaluation_details")),
            layout=values.get("layout") or "seed",
            turns=turn_verdicts(values.get("evaluation_details")),
            risk=values.get("risk"),
            sheet=ReplySheet.from_dict((values.get("evaluation_details") or {}).get("sheet")),
            turn_sheets=turn_sheets(values.get("evaluation_details")),
        )

    @classmethod
    def from_outcome(cls, outcome: Outcome, run_id: int | None = None) -> CaseResult:
        """The analytics view of an outcome, read from its provenance (codes, severities, style)."""
        prov = outcome.provenance
        context, perturbation = prov["user_context"], prov["perturbation"]
        return cls.from_fields(
            {
                "model": outcome.model,
                "run_id": run_id,
                "case_code": outcome.case_code,
                "pillar": prov["pillar"]["code"],
                "behaviour": prov["behaviour"]["code"],
                "scenario": prov["scenario"]["code"],
                "condition": prov["condition"]["code"],
                "condition_severity": prov["condition"]["severity"],
                "user_context": context["code"] if context else None,
                "user_context_severity": context["severity"] if context else 0,
                "perturbation": perturbation["code"],
                "perturbation_severity": perturbation["severity"],
                "perturbation_style": perturbation["style"],
                "status": outcome.status,
                "critical": prov["scenario"]["critical"],
                "risk": prov["scenario"].get("risk"),
                "repeat": outcome.repeat,
                "evaluation_details": outcome.details,
                "layout": outcome.layout,
            }
        )


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
