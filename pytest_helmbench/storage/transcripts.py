"""Every Result of one run with what was said and how it was judged (storage -> the Inspect log).

The flat export rows (records.py) leave out the conversation, the reply and the verdicts; an Inspect
eval log (reporting/inspect_log.py) needs exactly those: the messages as sent, the provider's raw
body, the evaluation details (each check's verdict and the judges' rationales) and the tokens of the
model and of its judges. Rows are streamed from one joined query (records.result_query), in storage
order, so a run of any size is read in constant memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlmodel import Session, select

from .records import result_query
from .tables import Benchmark, EvaluationRun, Result


@dataclass(frozen=True)
class Transcript:
    """One stored Result of a run, its codes, conversation, reply, verdicts and accounting."""

    result_id: int
    case_code: str
    layout: str  # "seed" or "deployed" (a Result stored before layouts were recorded: seed)
    repeat: int
    status: str  # passed | failed | error | skipped
    reason: str
    pillar: str
    behaviour: str
    scenario: str
    condition: str
    user_context: str | None
    perturbation: str
    critical: bool
    prompt: str  # the one user message, or the messages rendered as text
    messages: list[dict[str, Any]] | None  # every message as sent, replies included (None: just `prompt`)
    raw_response: str | None  # the provider's body (or its error body)
    expected: Any
    actual: Any
    details: dict[str, Any]  # the evaluation details: checks, judges, turns, confirmation …
    prompt_tokens: int | None
    completion_tokens: int | None
    cost_usd: float | None
    judge_prompt_tokens: int | None
    judge_completion_tokens: int | None
    judge_cost_usd: float | None
    latency_ms: float | None
    finish_reason: str | None
    cached: bool
    prompt_hash: str
    created_at: datetime | None


@dataclass(frozen=True)
class RunBenchmark:
    """The benchmark content a run was stored against: its version and content hash."""

    version: str
    content_hash: str


def run_benchmark(session: Session, run_id: int) -> RunBenchmark:
    """The benchmark row of a run (every run has one: EvaluationRun.benchmark_id is required)."""
    query = (
        select(Benchmark.version, Benchmark.content_hash)
        .join(EvaluationRun, EvaluationRun.benchmark_id == Benchmark.id)
        .where(EvaluationRun.id == run_id)
    )
    version, content_hash = session.exec(query).one()
    return RunBenchmark(version, content_hash)


def iter_transcripts(session: Session, run_id: int) -> Iterator[Transcript]:
    """Every Result of the run, in storage order, streamed."""
    query = result_query(
        [run_id],
        Result.reason,
        Result.prompt,
        Result.messages,
        Result.raw_response,
        Result.expected,
        Result.actual,
        Result.evaluation_details,
        Result.prompt_tokens,
        Result.completion_tokens,
        Result.cost_usd,
        Result.judge_prompt_tokens,
        Result.judge_completion_tokens,
        Result.judge_cost_usd,
        Result.latency_ms,
        Result.finish_reason,
        Result.cached,
        Result.prompt_hash,
        Result.created_at,
    ).execution_options(yield_per=500)
    for row in session.connection().execute(query):
        yield Transcript(
            result_id=row.result_id,
            case_code=row.case_code,
            layout=row.layout,
            repeat=row.repeat or 0,
            status=row.status,
            reason=row.reason or "",
            pillar=row.pillar,
            behaviour=row.behaviour,
            scenario=row.scenario,
            condition=row.condition,
            user_context=row.user_context,
            perturbation=row.perturbation,
            critical=bool(row.critical),
            prompt=row.prompt or "",
            messages=row.messages if isinstance(row.messages, list) else None,
            raw_response=row.raw_response,
            expected=row.expected,
            actual=row.actual,
            details=row.evaluation_details if isinstance(row.evaluation_details, dict) else {},
            prompt_tokens=row.prompt_tokens,
            completion_tokens=row.completion_tokens,
            cost_usd=row.cost_usd,
            judge_prompt_tokens=row.judge_prompt_tokens,
            judge_completion_tokens=row.judge_completion_tokens,
            judge_cost_usd=row.judge_cost_usd,
            latency_ms=row.latency_ms,
            finish_reason=row.finish_reason,
            cached=bool(row.cached),
            prompt_hash=row.prompt_hash,
            created_at=row.created_at,
        )
