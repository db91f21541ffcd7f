"""Which judged replies of a run a study asks people to rate (`helmbench review create`).

A reply can be reviewed when it was judged on an atomic rubric (checks answered yes / no / not
applicable) and the rubric on disk is exactly the one it was judged with (the scenario's content hash,
which covers its rubrics, is unchanged since the run): the raters answer the same checks the judge did.
A conversation is reviewed on the reply that decided it (its first failing reply, else its last).

The sample is drawn where it informs most: first the over-sampled groups asked for (`--include`: judge
disagreements, critical scenarios, replies with numbers in no entry of resources.yml), up to half the
study, then the rest in turn from every stratum (`--strata`: rubric, judge verdict, condition, layout,
behaviour), so a small study still reaches every rubric with both verdicts. Every order is a fixed
pseudo-random one (sha256 of the reply), so the same run and options always give the same study; the
items are then shown in another such order, so their position says nothing about why they were drawn.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlmodel import Session, col

from ..errors import HelmbenchError
from ..storage.records import result_query
from ..storage.tables import Result, Scenario
from ..suite.loader import BenchmarkLoader
from ..suite.model import Criteria
from ..suite.model import Scenario as LoadedScenario
from .replies import (
    check_answers,
    check_passed,
    deciding_reply,
    judged_replies,
    judges_disagree,
    unknown_numbers,
)

STRATA = ("rubric", "verdict", "condition", "layout", "behaviour")
INCLUDE = ("disagreements", "critical", "unknown-numbers")
DEFAULT_STRATA = ("rubric", "verdict", "condition", "layout")


class SamplingError(HelmbenchError):
    """A study cannot be drawn as asked (an unknown stratum, no judged reply to review)."""


@dataclass(frozen=True)
class Candidate:
    """One reviewable reply: its Result, turn, the rubric check the judge answered, and what it is."""

    result_id: int
    turn: int | None
    check_name: str
    rubric_hash: str
    judge_passed: bool | None
    judge_answers: dict[str, str]
    traits: dict[str, str]  # stratum name -> value
    groups: frozenset[str] = frozenset()  # the --include groups it belongs to

    @property
    def order(self) -> str:
        return _digest(f"{self.result_id}/{self.turn}")


@dataclass(frozen=True)
class Drawn:
    candidate: Candidate
    stratum: str
    reasons: tuple[str, ...]


@dataclass
class Pool:
    """Every reviewable reply of a run, the rubrics they were judged with, and what was left out."""

    candidates: list[Candidate] = field(default_factory=list)
    rubrics: dict[str, dict[str, Any]] = field(default_factory=dict)  # hash -> the rubric as judged
    changed: set[str] = field(default_factory=set)  # scenarios whose files changed since the run
    unjudged: int = 0  # scored replies without an atomic rubric verdict


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def parse_names(value: str | None, known: Sequence[str], option: str) -> tuple[str, ...]:
    """`rubric,verdict` -> the names, each checked against the known ones."""
    names = tuple(n.strip() for n in (value or "").split(",") if n.strip())
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SamplingError(f"{option}: unknown {', '.join(unknown)} (known: {', '.join(known)})")
    return names


def rubric_snapshot(criteria: Criteria, scenario: str) -> dict[str, Any]:
    """The rubric as raters answer it (stored with the study: the file on disk may change later)."""
    return {
        "name": criteria.name if criteria.shared_as else f"{scenario}/{criteria.name}",
        "file": criteria.name,  # how calibration items name it
        "checks": [
            {
                "id": c.id,
                "question": c.question,
                "pass": c.pass_answer,
                "na_passes": c.na_passes,
                "required": c.required,
                "tier": c.tier,
            }
            for c in criteria.checks
        ],
        "min_satisfied": criteria.min_satisfied,
    }


class _Scenarios:
    def __init__(self, loader: BenchmarkLoader) -> None:
        self.loader = loader
        self.found: dict[str, LoadedScenario | None] = {}

    def get(self, code: str) -> LoadedScenario | None:
        if code not in self.found:
            try:
                self.found[code] = self.loader.load_scenario(self.loader.scenarios_dir / code)
            except HelmbenchError:
                self.found[code] = None
        return self.found[code]


def _rows(session: Session, run_id: int) -> Iterator[Any]:
    """The run's scored Results with their codes (the storage layer's joined query), streamed."""
    query = (
        result_query(
            [run_id],
            Result.evaluation_details,
            Result.parsed_answer,
            Result.raw_response,
            Scenario.content_hash.label("content_hash"),
        )
        .where(col(Result.status).in_(("passed", "failed")))
        .execution_options(yield_per=1000)
    )
    yield from session.connection().execute(query)


def reviewable(session: Session, run_id: int, loader: BenchmarkLoader) -> Pool:
    """Every reply of the run that can be reviewed on the rubric it was judged with."""
    pool = Pool()
    scenarios = _Scenarios(loader)
    for row in _rows(session, run_id):
        result_id, status, details, code = row.result_id, row.status, row.evaluation_details, row.scenario
        scenario = scenarios.get(code)
        if scenario is None or scenario.hash != row.content_hash:
            pool.changed.add(code)
            continue
        rubrics = {
            c.name: c.criteria for c in scenario.checks if c.criteria is not None and c.criteria.atomic
        }
        replies = judged_replies(details, row.parsed_answer, row.raw_response, status)
        reply = deciding_reply(
            replies, (details or {}).get("first_failing_turn") if isinstance(details, dict) else None
        )
        check = next(
            (
                c
                for c in (reply.checks if reply else ())
                if str(c.get("name")) in rubrics and check_answers(c)
            ),
            None,
        )
        if reply is None or check is None:
            pool.unjudged += 1
            continue
        criteria = rubrics[str(check["name"])]
        pool.rubrics.setdefault(criteria.hash, rubric_snapshot(criteria, code))
        passed = check_passed(check)
        groups = {"critical"} if row.critical else set()
        if judges_disagree(details):
            groups.add("disagreements")
        if unknown_numbers(details):
            groups.add("unknown-numbers")
        traits = {
            "rubric": pool.rubrics[criteria.hash]["name"],
            "verdict": "pass" if passed else "fail" if passed is False else "none",
            "condition": row.condition,
            "layout": row.layout,  # "seed" when stored before layouts were
            "behaviour": row.behaviour,
        }
        pool.candidates.append(
            Candidate(
                result_id,
                reply.turn,
                str(check["name"]),
                criteria.hash,
                passed,
                check_answers(check),
                traits,
                frozenset(groups),
            )
        )
    return pool


def _round_robin(queues: Iterable[list[Candidate]], taken: set[str], limit: int) -> Iterator[Candidate]:
    queues = [list(q) for q in queues]
    count = 0
    while count < limit and any(queues):
        for queue in queues:
            while queue and queue[0].order in taken:
                queue.pop(0)
            if queue and count < limit:
                candidate = queue.pop(0)
                taken.add(candidate.order)
                count += 1
                yield candidate


def draw(
    candidates: Sequence[Candidate], size: int, strata: Sequence[str], include: Sequence[str]
) -> list[Drawn]:
    """At most `size` candidates: the included groups first (up to half), then every stratum in turn;
    returned in the order raters see them."""
    ordered = sorted(candidates, key=lambda c: c.order)
    taken: set[str] = set()
    reasons: dict[str, list[str]] = defaultdict(list)
    chosen: list[Candidate] = []
    groups = [[c for c in ordered if name in c.groups] for name in include]
    for candidate in _round_robin(groups, taken, size // 2 if len(strata) else size):
        chosen.append(candidate)
    for candidate in chosen:
        reasons[candidate.order] += [name for name in include if name in candidate.groups]
    by_stratum: dict[tuple[str, ...], list[Candidate]] = defaultdict(list)
    for candidate in ordered:
        by_stratum[tuple(candidate.traits[s] for s in strata)].append(candidate)
    keys = sorted(by_stratum, key=lambda k: _digest("/".join(k)))
    for candidate in _round_robin([by_stratum[k] for k in keys], taken, size - len(chosen)):
        chosen.append(candidate)
        reasons[candidate.order].append("stratified")
    shown = sorted(chosen, key=lambda c: _digest("shown/" + c.order))
    return [
        Drawn(c, " ".join(f"{s}={c.traits[s]}" for s in strata) or "all", tuple(reasons[c.order]))
        for c in shown
    ]
