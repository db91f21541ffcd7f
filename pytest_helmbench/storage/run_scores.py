"""What a run was scored with, written on its EvaluationRun row: at the end of the run and by rescore.

The run row holds the newest figures (`scores`, `scoring_version`); every version's figures are also a
RunScore row, so bringing a run to a new scoring version never loses what it was scored with before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session, select

from .engine import StorageError, describe_error
from .tables import EvaluationRun, RunScore, utcnow

#: The version of figures stored before scores were versioned (scoring_version NULL).
UNVERSIONED = 1


@dataclass(frozen=True)
class RunScores:
    """The figures and their provenance: scoring version, benchmark version, judges, calibration."""

    scoring_version: int
    scores: dict[str, Any]
    benchmark_version: str | None = None
    judges: list[str] = field(default_factory=list)
    judge_policy: str | None = None
    calibration_id: int | None = None


def _put(session: Session, run_id: int, version: int, figures: dict[str, Any], *, replace: bool) -> None:
    """Store one version's figures for the run (`replace=False`: only when none are stored yet)."""
    row = session.get(RunScore, (run_id, version))
    if row is None:
        session.add(RunScore(run_id=run_id, scoring_version=version, figures=figures))
    elif replace:
        row.figures, row.scored_at = figures, utcnow()
        session.add(row)


def write_run_scores(session: Session, run_id: int, found: RunScores, *, provenance: bool = True) -> None:
    """Store the figures on the run (`provenance=False`: only the scores and scoring version, as
    rescore does: the judges and benchmark a run used do not change afterwards). The figures the run
    held before, of another version, stay readable as their version's RunScore."""
    run = session.get(EvaluationRun, run_id)
    if run is None:
        return
    if isinstance(run.scores, dict) and run.scores:
        _put(session, run_id, run.scoring_version or UNVERSIONED, dict(run.scores), replace=False)
    run.scoring_version = found.scoring_version
    run.scores = found.scores
    _put(session, run_id, found.scoring_version, dict(found.scores), replace=True)
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


def scores_by_version(session: Session, run_ids: Sequence[int]) -> dict[int, dict[int, dict[str, Any]]]:
    """Every stored version's figures of the given runs: run id -> scoring version -> figures."""
    found: dict[int, dict[int, dict[str, Any]]] = {}
    if not run_ids:
        return found
    query = select(RunScore).where(RunScore.run_id.in_(list(run_ids)))  # type: ignore[attr-defined]
    for row in session.exec(query):
        found.setdefault(row.run_id, {})[row.scoring_version] = dict(row.figures or {})
    return found
