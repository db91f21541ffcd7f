"""A study's figures: final verdicts, rater-rater and judge-human agreement, the calibration they are
stored as, and the run's human-verified headline.

- **Final verdict** of an item: its newest adjudication; else the verdict every rater who rated it gave,
  once every assigned rater has (a skip is no rating); raters who disagree send it to adjudication.
- **Rater-rater agreement**, per study, per rubric version (its hash) and per check: Fleiss' κ and
  Gwet's AC1 over the items rated by two or more raters (safe / unsafe overall; yes / no / not
  applicable per check), the overall ones with a seeded bootstrap interval over items.
- **Judge-human agreement** against the final verdicts: Cohen's κ, AC1, sensitivity to unsafe replies
  and specificity, with bootstrap intervals (reporting/calibration_figures.figures_for, as
  `helmbench calibrate`), overall and per rubric version. Stored as a calibration of the study's judge
  with labeller `human:<study>`: it then covers runs judged by that judge on those rubrics.
- **Human-verified headline**: the run's scoring-v3 figures with each reviewed reply's case given its
  final verdict (safe: passed, no harm; unsafe: failed, harm), and how many replies that covers.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from ..execution.outcome import CaseResult
from ..reporting.agreement import fleiss_kappa, gwet_ac1_counts
from ..reporting.bootstrap import bootstrap_interval
from ..reporting.calibration_figures import figures_for
from ..reporting.headline import headline
from ..reporting.human_verified import verified_result
from ..storage.calibration_store import CalibrationRecord, save_calibration
from ..storage.records import result_query
from ..storage.review_verdicts import final_verdict
from ..storage.tables import Result, ReviewAssignment, ReviewItem, ReviewStudy
from .store import ReviewError, get_study, latest_adjudications, latest_ratings, study_items, study_reviewers

REPLICATES = 2000
VERDICT_SCALE = ("safe", "unsafe")
CHECK_SCALE = ("yes", "no", "not_applicable")


@dataclass(frozen=True)
class ItemState:
    """Where one item stands: the raters' current answers, and its final verdict if it has one."""

    item: ReviewItem
    ratings: dict[int, Any]  # reviewer id -> newest ReviewRating (skips included)
    assigned: int
    final: str | None  # safe | unsafe | None
    source: str  # adjudicated | agreed | disagreement | pending
    adjudication: Any = None

    @property
    def rated(self) -> dict[int, Any]:
        return {r: rating for r, rating in self.ratings.items() if rating.verdict in VERDICT_SCALE}


@dataclass
class StudyState:
    study: ReviewStudy
    items: list[ItemState] = field(default_factory=list)
    raters: list[Any] = field(default_factory=list)

    @property
    def queue(self) -> list[ItemState]:
        return [s for s in self.items if s.source == "disagreement"]


def study_state(session: Session, study_id: int) -> StudyState:
    study = get_study(session, study_id)
    items = study_items(session, study_id)
    ids = [i.id for i in items if i.id is not None]
    ratings = latest_ratings(session, ids)
    adjudications = latest_adjudications(session, ids)
    assigned = (
        Counter(
            session.exec(select(ReviewAssignment.item_id).where(col(ReviewAssignment.item_id).in_(ids))).all()
        )
        if ids
        else Counter()
    )
    state = StudyState(study, raters=study_reviewers(session, study_id))
    for item in items:
        mine = {r: rating for (i, r), rating in ratings.items() if i == item.id}
        verdicts = [rating.verdict for rating in mine.values() if rating.verdict in VERDICT_SCALE]
        adjudication = adjudications.get(item.id or 0)
        verdict = adjudication.verdict if adjudication is not None else None
        final, source = final_verdict(verdict, verdicts, assigned[item.id])  # the report's rule too
        state.items.append(ItemState(item, mine, assigned[item.id], final, source, adjudication))
    return state


def _interval(rows: Sequence[Counter], statistic: Any, seed: int) -> dict[str, Any]:
    value = statistic(rows) if rows else None
    found = bootstrap_interval(list(rows), statistic, REPLICATES, seed) if value is not None else None
    low, high = found if found is not None else (None, None)
    return {"value": value, "low": low, "high": high}


def _kappa(rows: Sequence[Counter], scale: Sequence[str]) -> float | None:
    return fleiss_kappa([[row[label] for label in scale] for row in rows]) if rows else None


def rater_agreement(states: Sequence[ItemState], rubrics: dict[str, Any], seed: int = 0) -> dict[str, Any]:
    """Fleiss' κ and AC1 between raters, overall (with intervals) and per check, over items rated by
    two or more raters."""
    multi = [s for s in states if len(s.rated) >= 2]
    rows = [Counter(r.verdict for r in s.rated.values()) for s in multi]
    checks: dict[str, dict[str, Any]] = {}
    for rubric_hash, rubric in sorted(rubrics.items()):
        for check in rubric.get("checks", ()):
            answered = [
                Counter(
                    r.answers.get(check["id"])
                    for r in s.rated.values()
                    if r.answers.get(check["id"]) in CHECK_SCALE
                )
                for s in multi
                if s.item.rubric_hash == rubric_hash
            ]
            answered = [c for c in answered if sum(c.values()) >= 2]
            if answered:
                checks[f"{rubric['name']}:{check['id']}"] = {
                    "n": len(answered),
                    "fleiss_kappa": _kappa(answered, CHECK_SCALE),
                    "ac1": gwet_ac1_counts(answered, CHECK_SCALE),
                }
    return {
        "n": len(multi),
        "n_raters": len({r for s in states for r in s.rated}),
        "fleiss_kappa": _interval(rows, lambda rs: _kappa(rs, VERDICT_SCALE), seed),
        "ac1": _interval(rows, lambda rs: gwet_ac1_counts(rs, VERDICT_SCALE), seed),
        "checks": checks,
    }


def judge_agreement(states: Sequence[ItemState], rubrics: dict[str, Any], seed: int = 0) -> dict[str, Any]:
    """The judge against the final verdicts: overall and per rubric version (figures_for's shape)."""
    decided = [s for s in states if s.final is not None and s.item.judge_passed is not None]

    def pairs(group: Sequence[ItemState]) -> list[tuple[bool, bool]]:
        return [(s.final == "safe", bool(s.item.judge_passed)) for s in group]

    by_rubric: dict[str, list[ItemState]] = defaultdict(list)
    for s in decided:
        by_rubric[s.item.rubric_hash].append(s)
    return {
        "overall": figures_for(pairs(decided), seed=seed),
        "rubrics": {
            rubrics.get(h, {}).get("name", h): {**figures_for(pairs(group), seed=seed), "rubric_hash": h}
            for h, group in sorted(by_rubric.items())
        },
    }


def study_figures(state: StudyState, seed: int = 0) -> dict[str, Any]:
    """Everything the study page and the stored calibration show: plain JSON."""
    sources = Counter(s.source for s in state.items)
    return {
        "study": state.study.id,
        "n_items": len(state.items),
        "n_final": sources["adjudicated"] + sources["agreed"],
        "n_adjudicated": sources["adjudicated"],
        "n_disagreements": sources["disagreement"],
        "n_pending": sources["pending"],
        "rater_rater": rater_agreement(state.items, state.study.rubrics, seed),
        **judge_agreement(state.items, state.study.rubrics, seed),
    }


def labeller(study_id: int) -> str:
    return f"human:{study_id}"


def store_calibration(engine: Engine, study_id: int) -> tuple[int, dict[str, Any]]:
    """Compute the study's figures and store the judge-human agreement as a calibration of its judge;
    returns the calibration's id and the figures."""
    with Session(engine) as session:
        state = study_state(session, study_id)
        figures = study_figures(state)
        if not state.study.judge:
            raise ReviewError(f"study {study_id}'s run had no judge: there is nothing to calibrate")
        if not figures["overall"]["n"]:
            raise ReviewError(
                f"study {study_id} has no item with a final verdict and a judge verdict yet: "
                "rate (and adjudicate) first"
            )
        decided = sorted(
            (s.item.result_id, s.item.turn or 0, s.item.rubric_hash, s.final or "")
            for s in state.items
            if s.final
        )
        record = CalibrationRecord(
            judge=state.study.judge,
            rubric_hashes=tuple(sorted({s.item.rubric_hash for s in state.items if s.final})),
            label_set_hash=hashlib.sha256(json.dumps(decided).encode()).hexdigest(),
            labeller=labeller(study_id),
            n_items=figures["n_final"],
            figures=figures,
        )
        calibration_id = save_calibration(session, record)
        state.study.calibration_id = calibration_id
        session.add(state.study)
        session.commit()
        return calibration_id, figures


def human_verified(session: Session, study_id: int) -> dict[str, Any]:
    """The run's headline with each reviewed case given its final human verdict, and the coverage."""
    state = study_state(session, study_id)
    finals = {s.item.result_id: s.final for s in state.items if s.final is not None}
    rows = session.connection().execute(result_query([state.study.run_id], Result.evaluation_details))
    pairs = [(row.result_id, CaseResult.from_fields(row._mapping)) for row in rows]
    results = [result for _, result in pairs]
    changed = [
        verified_result(result, finals[result_id]) if result_id in finals and result.scored else result
        for result_id, result in pairs
    ]
    return {
        "judge": headline(results),
        "verified": headline(changed),
        "reviewed": sum(1 for result_id, result in pairs if result_id in finals and result.scored),
        "replies": sum(1 for r in results if r.scored),
        "overturned": sum(1 for a, b in zip(results, changed, strict=True) if a.status != b.status),
    }
