"""Judge calibrations: written by `helmbench calibrate`, looked up for every judged run and for reports.

A calibration says how well one judge (model id) agreed with gold verdicts on one set of rubrics. The
rubrics are identified by the hash of their texts, the set by `rubrics_hash` (sha256 of the sorted,
distinct rubric hashes, see `rubrics_hash`), so a run can find the calibration that measured exactly
its judge on exactly its rubrics — or, with `covering_calibration`, one that measured them among others.
The newest wins: a judge recalibrated after a rubric edit replaces its older figures.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session, col, select

from .engine import StorageError, describe_error, safe_url
from .tables import EvaluationRun, JudgeCalibration


def rubrics_hash(rubric_hashes: Iterable[str]) -> str:
    """The identity of a set of rubrics: sha256 of its distinct rubric hashes, sorted, one per line.

    Order and repeats do not matter (two scenarios may share a rubric text)."""
    return hashlib.sha256("\n".join(sorted(set(rubric_hashes))).encode()).hexdigest()


@dataclass(frozen=True)
class CalibrationRecord:
    """What `helmbench calibrate` measured, to be stored (JudgeCalibration is the stored row).

    `figures` holds, per rubric and overall, each agreement figure with its interval and item count;
    it must be plain JSON with finite numbers (an undefined figure is None, never NaN)."""

    judge: str  # the marking model's id
    rubric_hashes: tuple[str, ...]  # one per rubric calibrated on (any order; stored sorted, distinct)
    label_set_hash: str  # the gold verdicts' identity: a changed label is another label set
    labeller: str  # who gave the gold verdicts ("authors": not clinicians)
    n_items: int
    figures: dict[str, Any]
    judge_settings: dict[str, Any] = field(default_factory=dict)  # the judge's recorded model config
    benchmark_version: str | None = None

    def __post_init__(self) -> None:
        if not self.rubric_hashes:
            raise ValueError("a calibration names at least one rubric hash")
        if self.n_items < 0:
            raise ValueError(f"n_items must not be negative (got {self.n_items})")
        for name in ("figures", "judge_settings"):
            try:
                json.dumps(getattr(self, name), allow_nan=False)
            except (TypeError, ValueError) as exc:
                raise ValueError(
                    f"calibration {name} must be plain JSON with finite numbers: {exc}"
                ) from None

    @property
    def rubrics_hash(self) -> str:
        return rubrics_hash(self.rubric_hashes)

    def row(self) -> JudgeCalibration:
        return JudgeCalibration(
            judge=self.judge,
            judge_settings=self.judge_settings,
            rubric_hashes=sorted(set(self.rubric_hashes)),
            rubrics_hash=self.rubrics_hash,
            label_set_hash=self.label_set_hash,
            labeller=self.labeller,
            n_items=self.n_items,
            figures=self.figures,
            benchmark_version=self.benchmark_version,
        )


@contextmanager
def _storage_errors(session: Session, action: str) -> Iterator[None]:
    """A driver error as a one-line StorageError naming the database (its password hidden)."""
    try:
        yield
    except SQLAlchemyError as exc:
        url = session.get_bind().engine.url  # the bind may be a Connection
        where = safe_url(url.render_as_string(hide_password=False))
        raise StorageError(f"cannot {action} calibrations in {where}: {describe_error(exc)}") from None


def save_calibration(engine_or_session: Engine | Session, record: CalibrationRecord) -> int:
    """Store a calibration and return its id. Given an engine, it is committed here; given a session,
    it is only flushed: the caller's transaction decides."""
    if isinstance(engine_or_session, Session):
        return _add(engine_or_session, record)
    with Session(engine_or_session) as session:
        calibration_id = _add(session, record)
        with _storage_errors(session, "store"):
            session.commit()
        return calibration_id


def _add(session: Session, record: CalibrationRecord) -> int:
    row = record.row()
    with _storage_errors(session, "store"):
        session.add(row)
        session.flush()
    assert row.id is not None
    return row.id


def _newest_first(query: Any) -> Any:
    return query.order_by(col(JudgeCalibration.created_at).desc(), col(JudgeCalibration.id).desc())


def matching_calibration(session: Session, judge_id: str, rubrics_hash: str) -> JudgeCalibration | None:
    """The newest calibration of this judge on exactly this set of rubrics (see `rubrics_hash`)."""
    query = select(JudgeCalibration).where(
        JudgeCalibration.judge == judge_id, JudgeCalibration.rubrics_hash == rubrics_hash
    )
    with _storage_errors(session, "read"):
        return session.exec(_newest_first(query)).first()


def covering_calibration(
    session: Session, judge_id: str, rubric_hashes: Iterable[str]
) -> JudgeCalibration | None:
    """The newest calibration of this judge whose rubrics include all of these: a run of part of the
    benchmark (`-k`, a sample) judges with some of the calibrated rubrics, and their figures still hold."""
    wanted = set(rubric_hashes)
    with _storage_errors(session, "read"):
        for calibration in session.exec(
            _newest_first(select(JudgeCalibration).where(JudgeCalibration.judge == judge_id))
        ):
            if wanted <= set(calibration.rubric_hashes):
                return calibration
    return None


def latest_calibrations(session: Session) -> list[JudgeCalibration]:
    """The newest calibration of each judge on each set of rubrics, newest first (for reports)."""
    seen: set[tuple[str, str]] = set()
    latest: list[JudgeCalibration] = []
    with _storage_errors(session, "read"):
        for calibration in session.exec(_newest_first(select(JudgeCalibration))):
            key = (calibration.judge, calibration.rubrics_hash)
            if key not in seen:
                seen.add(key)
                latest.append(calibration)
    return latest


def run_calibrations(session: Session, run_ids: Sequence[int]) -> dict[int, JudgeCalibration]:
    """The calibration each of these runs was judged under (runs without one are left out)."""
    query = (
        select(EvaluationRun.id, JudgeCalibration)
        .join(JudgeCalibration, col(JudgeCalibration.id) == EvaluationRun.calibration_id)
        .where(col(EvaluationRun.id).in_(list(run_ids)))
    )
    with _storage_errors(session, "read"):
        return {run_id: calibration for run_id, calibration in session.exec(query)}
