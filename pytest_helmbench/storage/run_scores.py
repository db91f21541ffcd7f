"""What a run was scored with, written on its EvaluationRun row: at the end of the run and by rescore."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session

from .engine import StorageError, describe_error
from .tables import EvaluationRun


@dataclass(frozen=True)
class RunScores:
    """The figures and their provenance: scoring version, benchmark version, judges, calibration."""

    scoring_version: int
    scores: dict[str, Any]
    benchmark_version: str | None = None
    judges: list[str] = field(default_factory=list)
    judge_policy: str | None = None
    calibration_id: int | None = None


def write_run_scores(session: Session, run_id: int, found: RunScores, *, provenance: bool = True) -> None:
    """Store the figures on the run (`provenance=False`: only the scores and scoring version, as
    rescore does: the judges and benchmark a run used do not change afterwards)."""
    run = session.get(EvaluationRun, run_id)
    if run is None:
        return
    run.scoring_version = found.scoring_version
    run.scores = found.scores
    if provenance:
        run.benchmark_version = found.benchmark_version
        run.judges = list(found.judges)
        run.judge_policy = found.judge_policy
        run.calibration_id = found.calibration_id
    session.add(run)
    try:
        session.flush()
    except SQLAlchemyError as exc:
        raise StorageError(f"cannot store the scores of run {run_id}: {describe_error(exc)}") from None
