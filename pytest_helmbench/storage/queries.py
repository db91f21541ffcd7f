"""Read stored runs back as analytics inputs (storage -> analytics): runs, case results, failures, labels.

Every loader takes the run ids to read; ``None`` means the latest run of each model. A report without
run ids (`load_report_data(session)`) goes further: each model's headline is the latest Result of every
case across its runs of the latest run's benchmark and settings (coverage.py), so a subset run never
stands for the model. Results are read with one joined query of plain columns, not ORM objects, so tens
of thousands of rows load in a fraction of a second.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session, select

from ..codes import code_sort_key
from ..errors import HelmbenchError
from ..execution.outcome import CaseResult
from ..status import UNSUCCESSFUL, Status
from .coverage import Coverage, Unpriced, coverage_of, headline_run_ids, pick_headline, unpriced_calls
from .labels import Labels, labels_for
from .records import result_query
from .review_verdicts import ResultKey, human_verdicts
from .run_scores import scores_by_version
from .tables import LLM, EvaluationRun, Result

__all__ = ["Coverage", "Labels", "Unpriced"]  # re-exported: the report reads them from here

log = logging.getLogger(__name__)

#: Result statuses shown in the failure drill-down.
FAILURE_STATUSES = tuple(sorted(UNSUCCESSFUL))


class DatasetError(HelmbenchError):
    """The requested runs cannot be read (empty database, unknown run id, unreadable database)."""


@dataclass(frozen=True)
class RunInfo:
    """One EvaluationRun: one model in one pytest session, with its counters and accounting."""

    id: int
    model: str
    status: str
    session_id: str
    started_at: datetime
    finished_at: datetime | None
    total_tests: int  # passed + failed (the evaluated cases)
    passed: int
    failed: int
    errors: int
    skipped: int
    cost_usd: float
    judge_cost_usd: float
    prompt_tokens: int
    completion_tokens: int
    options: dict[str, Any] = field(default_factory=dict)
    # What the run was scored with (migration 0004); None / () for a run stored before it.
    benchmark_version: str | None = None
    scoring_version: int | None = None  # None: scoring version 1
    scores: dict[str, Any] | None = None  # the stored headline figures
    judges: tuple[str, ...] = ()
    judge_policy: str | None = None
    calibration_id: int | None = None
    # What its session selected (migration 0005); None for a run stored before it.
    subset: bool | None = None
    selected_cases: int | None = None
    benchmark_cases: int | None = None
    unpriced: Unpriced = field(default_factory=Unpriced)  # calls stored without a price
    # Every scoring version's figures (RunScore, migration 0009): version 2's stay readable after rescore
    scores_by_version: dict[int, dict[str, Any]] = field(default_factory=dict)

    @property
    def total_cost_usd(self) -> float:
        """What is known to have been paid: with unpriced calls, a lower bound."""
        return self.cost_usd + self.judge_cost_usd


@dataclass(frozen=True)
class FailureTurn:
    """One judged reply of a multi-turn case (`turns` in its evaluation details)."""

    turn: int  # user messages up to the reply
    status: str  # passed, failed or error
    reason: str


@dataclass(frozen=True)
class FailureRow:
    """A failed or errored attempt with everything a person needs to see why."""

    result_id: int
    run_id: int
    model: str
    case_code: str
    repeat: int
    status: Status  # failed or error
    reason: str
    behaviour: str
    scenario: str
    critical: bool
    prompt: str
    raw_response: str | None
    parsed_answer: Any
    expected: Any
    actual: Any
    judge_verdict: tuple[str, ...] | None  # the judge's values, for sqe
    judge_rationale: str | None
    judge_raw: str | None  # the judge's unusable answer, when the judge erred
    layout: str = "seed"  # how the case was sent
    messages: tuple[dict[str, str], ...] | None = None  # as sent, replies included (None: just `prompt`)
    turns: tuple[FailureTurn, ...] = ()  # a multi-turn case's verdict per judged reply
    first_failing_turn: int | None = None  # the turn index of its first failed reply


@dataclass(frozen=True)
class ReportData:
    """Everything a report needs, read once from the database."""

    runs: list[RunInfo]
    results: list[CaseResult]
    failures: list[FailureRow]
    labels: Labels
    source: str = ""  # where the data came from (a password-free database URL)
    generated_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    calibrations: dict[int, CalibrationView] = field(default_factory=dict)  # run id -> its judge's
    # model -> how much of the benchmark its headline covers; empty when exactly the given runs are shown
    coverage: dict[str, Coverage] = field(default_factory=dict)
    # run id -> (case code, layout, repeat) -> the final verdict of a review study (safe | unsafe)
    human: dict[int, dict[ResultKey, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class CalibrationView:
    """The calibration a run was judged under (JudgeCalibration, as the report shows it)."""

    id: int
    judge: str
    labeller: str
    n_items: int
    figures: dict[str, Any]
    created_at: datetime


# ---------------------------------------------------------------------------------------------
# Run selection


def latest_run_ids(session: Session) -> list[int]:
    """The latest run of each model (highest id: ids grow with time), in id order."""
    query = select(func.max(EvaluationRun.id)).group_by(EvaluationRun.llm_id)
    return sorted(int(run_id) for run_id in session.exec(query).all() if run_id is not None)


def resolve_run_ids(
    session: Session, run_ids: Sequence[int] | None = None, *, all_runs: bool = False
) -> list[int]:
    """Check the requested runs exist; ``None`` means the latest per model (or every run with all_runs).

    Raises DatasetError with a one-line message when the database holds no run or an id is unknown.
    """
    try:
        known = set(session.exec(select(EvaluationRun.id)).all())
        if not known:
            raise DatasetError("the database holds no evaluation run yet (run the benchmark first)")
        if run_ids is None:
            return sorted(known) if all_runs else latest_run_ids(session)
    except SQLAlchemyError as exc:
        raise DatasetError(
            f"cannot read the database: {exc.__class__.__name__}: {exc.args[0] if exc.args else exc}"
        ) from None
    wanted = list(dict.fromkeys(int(r) for r in run_ids))
    missing = [r for r in wanted if r not in known]
    if missing:
        ids = ", ".join(str(r) for r in missing)
        raise DatasetError(f"no run with id {ids} (known runs: {_ranges(sorted(known))})")
    return wanted


def _ranges(ids: list[int]) -> str:
    """Compact id list for messages: 1-4, 7, 9-10."""
    parts: list[str] = []
    start = prev = ids[0]
    for value in ids[1:] + [None]:  # type: ignore[list-item]
        if value is not None and value == prev + 1:
            prev = value
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if value is not None:
            start = prev = value
    return ", ".join(parts)


def _selected(session: Session, run_ids: Sequence[int] | None) -> list[int]:
    return resolve_run_ids(session, run_ids) if run_ids is None else [int(r) for r in run_ids]


# ---------------------------------------------------------------------------------------------
# Loaders


def load_runs(session: Session, run_ids: Sequence[int] | None = None) -> list[RunInfo]:
    """The selected runs in model order, then run id."""
    ids = _selected(session, run_ids)
    if not ids:
        return []
    query = (
        select(EvaluationRun, LLM.model_id)
        .join(LLM, LLM.id == EvaluationRun.llm_id)
        .where(EvaluationRun.id.in_(ids))
    )
    unpriced = unpriced_calls(session, ids)
    versions = scores_by_version(session, ids)
    runs = [
        RunInfo(
            id=run.id,
            model=model,
            status=run.status,
            session_id=run.session_id,
            started_at=run.started_at,
            finished_at=run.finished_at,
            total_tests=run.total_tests,
            passed=run.passed_tests,
            failed=run.failed_tests,
            errors=run.error_tests,
            skipped=run.skipped_tests,
            cost_usd=run.cost_usd,
            judge_cost_usd=run.judge_cost_usd,
            prompt_tokens=run.prompt_tokens,
            completion_tokens=run.completion_tokens,
            options=dict(run.options or {}),
            benchmark_version=run.benchmark_version,
            scoring_version=run.scoring_version,
            scores=run.scores,
            judges=tuple(run.judges or ()),
            judge_policy=run.judge_policy,
            calibration_id=run.calibration_id,
            subset=run.subset,
            selected_cases=run.selected_cases,
            benchmark_cases=run.benchmark_cases,
            unpriced=unpriced.get(run.id, Unpriced()),
            scores_by_version=versions.get(run.id, {}),
        )
        for run, model in session.exec(query).all()
    ]
    return sorted(runs, key=lambda r: (code_sort_key(r.model), r.id))


def load_case_results(session: Session, run_ids: Sequence[int] | None = None) -> list[CaseResult]:
    """One CaseResult per stored Result of the selected runs (every status), in storage order."""
    ids = _selected(session, run_ids)
    if not ids:
        return []
    query = result_query(ids, Result.evaluation_details)  # judge votes and re-judging live there
    return [CaseResult.from_fields(row._mapping) for row in session.connection().execute(query)]


def load_failures(
    session: Session, run_ids: Sequence[int] | None = None, only: set[int] | None = None
) -> list[FailureRow]:
    """Failed and errored attempts of the selected runs (of these Result ids only, when given), by
    model, run, case code and repeat."""
    ids = _selected(session, run_ids)
    if not ids:
        return []
    query = result_query(
        ids,
        Result.reason,
        Result.prompt,
        Result.raw_response,
        Result.parsed_answer,
        Result.expected,
        Result.actual,
        Result.evaluation_details,
        Result.messages,
    ).where(Result.status.in_(FAILURE_STATUSES))
    failures = []
    for row in session.connection().execute(query):
        if only is not None and row.result_id not in only:
            continue
        details = row.evaluation_details if isinstance(row.evaluation_details, dict) else {}
        judge = details.get("judge") if isinstance(details.get("judge"), dict) else None
        verdict = judge.get("values") if judge else None
        failures.append(
            FailureRow(
                result_id=row.result_id,
                run_id=row.run_id,
                model=row.model,
                case_code=row.case_code,
                repeat=row.repeat or 0,
                status=Status(row.status),
                reason=row.reason or "",
                behaviour=row.behaviour,
                scenario=row.scenario,
                critical=bool(row.critical),
                prompt=row.prompt or "",
                raw_response=row.raw_response,
                parsed_answer=row.parsed_answer,
                expected=row.expected,
                actual=row.actual,
                judge_verdict=tuple(str(v) for v in verdict)
                if isinstance(verdict, list)
                else (str(verdict),)
                if verdict
                else None,
                judge_rationale=str(judge["rationale"])
                if judge and judge.get("rationale") is not None
                else None,
                judge_raw=str(details["judge_raw"]) if details.get("judge_raw") is not None else None,
                layout=row.layout,
                **_conversation(row.messages, details),
            )
        )
    return sorted(
        failures, key=lambda f: (code_sort_key(f.model), f.run_id, code_sort_key(f.case_code), f.repeat)
    )


def _conversation(messages: Any, details: dict[str, Any]) -> dict[str, Any]:
    """A failure's transcript, judged replies and first failing turn (malformed entries left out)."""
    turns, failing = details.get("turns"), details.get("first_failing_turn")
    found = [t for t in turns if isinstance(t, dict)] if isinstance(turns, list) else []
    shown = [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else None
    return {
        "messages": None
        if shown is None
        else tuple({"role": str(m.get("role")), "content": str(m.get("content") or "")} for m in shown),
        "turns": tuple(
            FailureTurn(t["turn"], str(t.get("status")), str(t.get("reason") or ""))
            for t in found
            if isinstance(t.get("turn"), int)
        ),
        "first_failing_turn": failing if isinstance(failing, int) else None,
    }


def load_labels(session: Session, run_ids: Sequence[int] | None = None) -> Labels:
    """Names and titles of the codes the selected runs used (the latest content row of each code)."""
    return labels_for(session, _selected(session, run_ids))


def load_calibrations(session: Session, run_ids: Sequence[int]) -> dict[int, CalibrationView]:
    """The calibration each run recorded (runs judged uncalibrated, or by nobody, are left out)."""
    from .calibration_store import run_calibrations

    return {
        run_id: CalibrationView(c.id or 0, c.judge, c.labeller, c.n_items, dict(c.figures), c.created_at)
        for run_id, c in run_calibrations(session, run_ids).items()
    }


def load_report_data(
    session: Session, run_ids: Sequence[int] | None = None, *, source: str = ""
) -> ReportData:
    """Runs, results, failures and labels of the given runs; without run ids, each model's headline
    (the latest Result of every case across its runs of the same benchmark and settings)."""
    ids = resolve_run_ids(session, run_ids)
    try:
        if run_ids is None:
            return _headline_data(session, source)
        return ReportData(
            runs=load_runs(session, ids),
            results=load_case_results(session, ids),
            failures=load_failures(session, ids),
            labels=load_labels(session, ids),
            source=source,
            calibrations=load_calibrations(session, ids),
            human=human_verdicts(session, ids),
        )
    except SQLAlchemyError as exc:
        raise DatasetError(
            f"cannot read the database: {exc.__class__.__name__}: {exc.args[0] if exc.args else exc}"
        ) from None


def _headline_data(session: Session, source: str) -> ReportData:
    """Every model's headline Results, the runs they came from, and the coverage of each."""
    groups = headline_run_ids(session)
    candidates = sorted(run_id for ids in groups.values() for run_id in ids)
    query = result_query(candidates, Result.evaluation_details)
    kept = pick_headline(session.connection().execute(query))
    totals = dict(session.exec(select(EvaluationRun.id, EvaluationRun.benchmark_cases)).all())
    models = dict(
        session.exec(select(EvaluationRun.id, LLM.model_id).join(LLM, LLM.id == EvaluationRun.llm_id)).all()
    )
    coverage = {}
    for anchor in groups:
        model = models[anchor]
        mine = [row for row in kept if row.model == model]
        coverage[model] = coverage_of(model, mine, totals.get(anchor), anchor)
    used = sorted({run_id for c in coverage.values() for run_id in c.run_ids})
    return ReportData(
        runs=load_runs(session, used),
        results=[CaseResult.from_fields(row._mapping) for row in kept],
        failures=load_failures(session, used, {row.result_id for row in kept}),
        labels=load_labels(session, used),
        source=source,
        calibrations=load_calibrations(session, used),
        coverage=coverage,
        human=human_verdicts(session, used),
    )


@dataclass(frozen=True)
class StoredReply:
    """One scored Result as the item statistics read it: its model, scenario and checks' records."""

    model: str
    scenario: str
    checks: Sequence[Any]
    case_code: str = ""


def load_stored_replies(session: Session, run_ids: Sequence[int] | None = None) -> list[StoredReply]:
    """The scored Results (passed or failed) of the selected runs, with their checks' stored records,
    for the item statistics (reporting/items.py); a conversation gives the reply its Result shows."""
    ids = _selected(session, run_ids)
    if not ids:
        return []
    query = result_query(ids, Result.evaluation_details).where(
        Result.status.in_((Status.PASSED, Status.FAILED))
    )
    found = []
    for row in session.connection().execute(query):
        details = row.evaluation_details if isinstance(row.evaluation_details, dict) else {}
        checks = [c for c in details.get("checks") or () if isinstance(c, dict)]
        found.append(StoredReply(row.model, row.scenario, checks, row.case_code))
    return found
