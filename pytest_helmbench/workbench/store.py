"""A review study in the database: created, raters added with their links' tokens (stored hashed),
ratings and adjudications saved as new revisions, read back for pages, figures and exports.

Every write is one short transaction, safe with many raters saving at once on SQLite (the engine's busy
timeout queues writers) and PostgreSQL (a revision taken twice by one rater's double submit is a unique
violation, retried with the next revision): nothing a rater submitted is lost or overwritten.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from ..errors import HelmbenchError
from ..storage.tables import (
    LLM,
    EvaluationRun,
    ReviewAdjudication,
    ReviewAssignment,
    Reviewer,
    ReviewItem,
    ReviewRating,
    ReviewStudy,
)
from .sampling import Drawn

VERDICTS = ("safe", "unsafe")
ANSWERS = ("yes", "no", "not_applicable")
ROLES = ("rater", "adjudicator")
NOTE_MAX = 4000
REASON_MAX = 4000
NAME_MAX = 80


class ReviewError(HelmbenchError):
    """A review request that cannot be done as asked (unknown study, duplicate rater, bad answer)."""


def new_token() -> str:
    """A link's secret: 256 random bits, URL-safe."""
    return secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    """What is stored of a token: its sha256 (a database leak gives no working link)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def now() -> datetime:
    return datetime.now(UTC)


def _aware(value: datetime) -> datetime:
    """A stored time as UTC (SQLite gives it back without its zone)."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


@dataclass(frozen=True)
class StudySettings:
    run_id: int
    size: int
    raters_per_item: int
    strata: tuple[str, ...]
    include: tuple[str, ...]
    break_items: int = 25
    break_minutes: int = 30


def run_judge(session: Session, run_id: int) -> tuple[EvaluationRun, str]:
    """The run and its model id; an unknown run is a ReviewError."""
    found = session.exec(
        select(EvaluationRun, LLM.model_id)
        .join(LLM, LLM.id == EvaluationRun.llm_id)
        .where(EvaluationRun.id == run_id)
    ).first()
    if found is None:
        raise ReviewError(f"no run {run_id} in this database")
    return found


def create_study(
    engine: Engine, settings: StudySettings, drawn: Sequence[Drawn], rubrics: dict[str, Any]
) -> int:
    """Store the study and its items (in the order raters see them); returns its id."""
    with Session(engine) as session:
        run, _ = run_judge(session, settings.run_id)
        study = ReviewStudy(
            run_id=settings.run_id,
            judge=(run.judges or [None])[0],
            size=settings.size,
            raters_per_item=settings.raters_per_item,
            strata=list(settings.strata),
            include=list(settings.include),
            rubrics={h: r for h, r in rubrics.items() if any(d.candidate.rubric_hash == h for d in drawn)},
            break_items=settings.break_items,
            break_minutes=settings.break_minutes,
        )
        session.add(study)
        session.flush()
        assert study.id is not None
        for position, found in enumerate(drawn, 1):
            c = found.candidate
            session.add(
                ReviewItem(
                    study_id=study.id,
                    position=position,
                    result_id=c.result_id,
                    turn=c.turn,
                    check_name=c.check_name,
                    rubric_hash=c.rubric_hash,
                    stratum=found.stratum,
                    reasons=list(found.reasons),
                    judge_passed=c.judge_passed,
                    judge_answers=dict(c.judge_answers),
                )
            )
        session.commit()
        return study.id


def get_study(session: Session, study_id: int) -> ReviewStudy:
    study = session.get(ReviewStudy, study_id)
    if study is None:
        raise ReviewError(f"no study {study_id} in this database")
    return study


def add_reviewer(engine: Engine, study_id: int, name: str, role: str = "rater") -> str:
    """Add a rater (assigned every item that still needs raters) or an adjudicator; returns the token
    of their link, which is not stored and cannot be shown again."""
    name = name.strip()
    if not name or len(name) > NAME_MAX:
        raise ReviewError(f"a rater's name is 1 to {NAME_MAX} characters")
    if role not in ROLES:
        raise ReviewError(f"role {role!r} is not one of {', '.join(ROLES)}")
    token = new_token()
    with Session(engine) as session:
        study = get_study(session, study_id)
        if session.exec(select(Reviewer).where(Reviewer.study_id == study_id, Reviewer.name == name)).first():
            raise ReviewError(f"study {study_id} already has a rater named {name!r}")
        reviewer = Reviewer(study_id=study_id, name=name, role=role, token_hash=token_hash(token))
        session.add(reviewer)
        session.flush()
        if role == "rater":
            _balance(session, study)
        try:
            session.commit()
        except IntegrityError:
            raise ReviewError(f"study {study_id} already has a rater named {name!r}") from None
    return token


def _balance(session: Session, study: ReviewStudy) -> None:
    """Give every item the study's raters per item (or every rater, while there are fewer), spread
    evenly: each item short of raters goes to the least-loaded raters not on it, then items are moved
    from the most- to the least-loaded rater until loads differ by at most one. Only an item its rater
    has not yet answered (nor skipped) is moved, so nothing a rater did is taken from them."""
    raters = session.exec(
        select(Reviewer.id)
        .where(Reviewer.study_id == study.id, Reviewer.role == "rater")
        .order_by(col(Reviewer.id))
    ).all()
    items = session.exec(
        select(ReviewItem.id).where(ReviewItem.study_id == study.id).order_by(col(ReviewItem.position))
    ).all()
    if not raters or not items:
        return
    current = session.exec(select(ReviewAssignment).where(col(ReviewAssignment.item_id).in_(items))).all()
    touched = set(
        session.exec(
            select(ReviewRating.item_id, ReviewRating.reviewer_id).where(col(ReviewRating.item_id).in_(items))
        ).all()
    )
    plan = assignment_plan(
        list(items),
        list(raters),
        study.raters_per_item,
        {(a.item_id, a.reviewer_id) for a in current},
        touched,
    )
    for assignment in current:
        if (assignment.item_id, assignment.reviewer_id) not in plan:
            session.delete(assignment)
    for item_id, reviewer_id in sorted(plan - {(a.item_id, a.reviewer_id) for a in current}):
        session.add(ReviewAssignment(item_id=item_id, reviewer_id=reviewer_id))


Pair = tuple[int, int]  # (item id, reviewer id)


def assignment_plan(
    items: list[int], raters: list[int], per_item: int, current: set[Pair], kept: set[Pair]
) -> set[Pair]:
    """The balanced assignment (see `_balance`) from the `current` one; pairs in `kept` never move."""
    plan = set(current)
    load = {r: sum(1 for _, rater in plan if rater == r) for r in raters}
    on = {i: {rater for item, rater in plan if item == i} for i in items}
    need = min(per_item, len(raters))
    for item in items:  # fill: each short item to the least-loaded raters not already on it
        while len(on[item]) < need:
            rater = min((r for r in raters if r not in on[item]), key=lambda r: (load[r], r))
            plan.add((item, rater))
            on[item].add(rater)
            load[rater] += 1
    moved = True
    while moved:  # even out: move an unanswered item from the busiest rater to the least busy
        moved = False
        for busy in sorted(raters, key=lambda r: (-load[r], r)):
            idle = min(raters, key=lambda r: (load[r], r))
            if load[busy] - load[idle] <= 1:
                break
            movable = [i for i in items if (i, busy) in plan and (i, busy) not in kept and idle not in on[i]]
            if movable:
                item = movable[-1]  # the last in study order: the busy rater's earlier items stay
                plan.discard((item, busy))
                plan.add((item, idle))
                on[item] = (on[item] - {busy}) | {idle}
                load[busy] -= 1
                load[idle] += 1
                moved = True
                break
    return plan


def reviewer_for(session: Session, token: str) -> Reviewer | None:
    if not token or len(token) > 200:
        return None
    return session.exec(select(Reviewer).where(Reviewer.token_hash == token_hash(token))).first()


def assigned_items(session: Session, reviewer_id: int) -> list[ReviewItem]:
    query = (
        select(ReviewItem)
        .join(ReviewAssignment, ReviewAssignment.item_id == ReviewItem.id)
        .where(ReviewAssignment.reviewer_id == reviewer_id)
        .order_by(ReviewItem.position)
    )
    return list(session.exec(query).all())


def is_assigned(session: Session, reviewer_id: int, item_id: int) -> bool:
    return (
        session.exec(
            select(ReviewAssignment).where(
                ReviewAssignment.reviewer_id == reviewer_id, ReviewAssignment.item_id == item_id
            )
        ).first()
        is not None
    )


def latest_ratings(
    session: Session, item_ids: Sequence[int], reviewer_id: int | None = None
) -> dict[tuple[int, int], ReviewRating]:
    """The newest revision of each (item, rater) answer on these items (of one rater, when given)."""
    if not item_ids:
        return {}
    query = select(ReviewRating).where(col(ReviewRating.item_id).in_(list(item_ids)))
    if reviewer_id is not None:
        query = query.where(ReviewRating.reviewer_id == reviewer_id)
    found: dict[tuple[int, int], ReviewRating] = {}
    for rating in session.exec(query.order_by(ReviewRating.revision)).all():
        found[(rating.item_id, rating.reviewer_id)] = rating
    return found


def rating_history(session: Session, item_id: int, reviewer_id: int) -> list[ReviewRating]:
    query = select(ReviewRating).where(
        ReviewRating.item_id == item_id, ReviewRating.reviewer_id == reviewer_id
    )
    return list(session.exec(query.order_by(ReviewRating.revision)).all())


def check_answer(rubric: dict[str, Any], verdict: str, answers: dict[str, str], skipped: bool) -> None:
    if skipped:
        return
    if verdict not in VERDICTS:
        raise ReviewError("choose safe or unsafe")
    ids = [c["id"] for c in rubric.get("checks", ())]
    missing = [i for i in ids if answers.get(i) not in ANSWERS]
    if missing:
        raise ReviewError(f"answer every check ({len(missing)} left: {', '.join(missing)})")


def save_rating(engine: Engine, reviewer_id: int, item_id: int, answer: dict[str, Any]) -> int:
    """Store a rater's answer on an assigned item as its next revision; returns the revision."""
    skipped = bool(answer.get("skipped"))
    verdict = "skipped" if skipped else str(answer.get("verdict") or "")
    answers = {k: v for k, v in dict(answer.get("answers") or {}).items() if v in ANSWERS}
    note = str(answer.get("note") or "")[:NOTE_MAX]
    for _ in range(5):
        with Session(engine) as session:
            item = session.get(ReviewItem, item_id)
            if item is None or not is_assigned(session, reviewer_id, item_id):
                raise ReviewError("this item is not one of yours")
            study = get_study(session, item.study_id)
            check_answer(study.rubrics.get(item.rubric_hash, {}), verdict, answers, skipped)
            last = session.exec(
                select(func.max(ReviewRating.revision)).where(
                    ReviewRating.item_id == item_id, ReviewRating.reviewer_id == reviewer_id
                )
            ).one()
            revision = (last or 0) + 1
            rating = ReviewRating(
                item_id=item_id,
                reviewer_id=reviewer_id,
                revision=revision,
                verdict=verdict,
                answers=answers,
                note=note,
                created_at=now(),
            )
            try:
                session.add(rating)
                session.flush()
                _count_sitting(session, reviewer_id, study)
                session.commit()
            except IntegrityError:  # the same rater's other request took this revision: take the next
                session.rollback()
                continue
            return revision
    raise ReviewError("could not save the rating: try again")


def _count_sitting(session: Session, reviewer_id: int, study: ReviewStudy) -> None:
    reviewer = session.get(Reviewer, reviewer_id)
    if reviewer is None:
        return
    if reviewer.sitting_started_at is None:
        reviewer.sitting_started_at = now()
        reviewer.sitting_items = 0
    reviewer.sitting_items += 1
    session.add(reviewer)


def break_due(reviewer: Reviewer, study: ReviewStudy) -> bool:
    """A break is suggested after the study's number of items or minutes in one sitting."""
    if reviewer.sitting_started_at is None:
        return False
    minutes = (now() - _aware(reviewer.sitting_started_at)).total_seconds() / 60
    return reviewer.sitting_items >= study.break_items or minutes >= study.break_minutes


def new_sitting(engine: Engine, reviewer_id: int) -> None:
    with Session(engine) as session:
        reviewer = session.get(Reviewer, reviewer_id)
        if reviewer is not None:
            reviewer.sitting_started_at, reviewer.sitting_items = None, 0
            session.add(reviewer)
            session.commit()


def acknowledge_warning(engine: Engine, reviewer_id: int) -> None:
    with Session(engine) as session:
        reviewer = session.get(Reviewer, reviewer_id)
        if reviewer is not None and reviewer.warned_at is None:
            reviewer.warned_at = now()
            session.add(reviewer)
            session.commit()


def save_adjudication(
    engine: Engine, item_id: int, verdict: str, reason: str, reviewer_id: int | None
) -> int:
    """The final verdict on an item, with its reason, as the next revision; returns the revision."""
    reason = reason.strip()[:REASON_MAX]
    if verdict not in VERDICTS:
        raise ReviewError("choose safe or unsafe")
    if not reason:
        raise ReviewError("give the reason for the final verdict")
    for _ in range(5):
        with Session(engine) as session:
            if session.get(ReviewItem, item_id) is None:
                raise ReviewError(f"no item {item_id}")
            last = session.exec(
                select(func.max(ReviewAdjudication.revision)).where(ReviewAdjudication.item_id == item_id)
            ).one()
            revision = (last or 0) + 1
            session.add(
                ReviewAdjudication(
                    item_id=item_id,
                    reviewer_id=reviewer_id,
                    revision=revision,
                    verdict=verdict,
                    reason=reason,
                    created_at=now(),
                )
            )
            try:
                session.commit()
            except IntegrityError:
                session.rollback()
                continue
            return revision
    raise ReviewError("could not save the final verdict: try again")


def latest_adjudications(session: Session, item_ids: Sequence[int]) -> dict[int, ReviewAdjudication]:
    if not item_ids:
        return {}
    query = select(ReviewAdjudication).where(col(ReviewAdjudication.item_id).in_(list(item_ids)))
    found: dict[int, ReviewAdjudication] = {}
    for row in session.exec(query.order_by(ReviewAdjudication.revision)).all():
        found[row.item_id] = row
    return found


def study_items(session: Session, study_id: int) -> list[ReviewItem]:
    return list(
        session.exec(
            select(ReviewItem).where(ReviewItem.study_id == study_id).order_by(ReviewItem.position)
        ).all()
    )


def study_reviewers(session: Session, study_id: int) -> list[Reviewer]:
    return list(
        session.exec(select(Reviewer).where(Reviewer.study_id == study_id).order_by(Reviewer.id)).all()
    )


def studies(session: Session) -> list[ReviewStudy]:
    return list(session.exec(select(ReviewStudy).order_by(col(ReviewStudy.id).desc())).all())
