"""What the terminal summary counts of one model in this session: each case once, by its last attempt.

pytest-rerunfailures reports every attempt of a case, and each one is recorded (the recorder
replaces the case's Result and keeps the earlier attempts in its details); the tally does the same
in memory, so the summary, the exit verdict and the stored counters agree with pytest's own count.
Cost, tokens and latencies are what was paid: every attempt's stay in the totals.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..execution.outcome import CaseResult, Outcome
from ..status import PYTEST_TIMEOUT, TIMEOUT_DETAIL, Status


@dataclass
class Tally:
    """What the terminal summary says of one model."""

    results: list[CaseResult] = field(default_factory=list)
    cost_usd: float = 0.0
    judge_cost_usd: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: int = 0
    latencies: list[float] = field(default_factory=list)
    run_id: int | None = None
    replaced: int = 0  # attempts superseded by a later attempt of the same case (reruns)
    timed_out: set[tuple[str, int, str]] = field(default_factory=set)  # cases whose last attempt timed out
    _slots: dict[tuple[str, int, str], int] = field(default_factory=dict, repr=False)

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)

    def add(self, outcome: Outcome) -> None:
        """Count `outcome`; a later attempt of a case (case code and repeat) replaces the earlier one."""
        result = CaseResult.from_outcome(outcome)
        key = (outcome.case_code, outcome.repeat, outcome.layout)
        slot = self._slots.get(key)
        if slot is None:
            self._slots[key] = len(self.results)
            self.results.append(result)
        else:
            self.results[slot] = result
            self.replaced += 1
        if outcome.status == Status.ERROR and outcome.details.get(TIMEOUT_DETAIL) == PYTEST_TIMEOUT:
            self.timed_out.add(key)
        else:
            self.timed_out.discard(key)
        self.cost_usd += outcome.cost_usd or 0.0
        self.judge_cost_usd += outcome.judge_cost_usd or 0.0
        self.prompt_tokens += outcome.prompt_tokens or 0
        self.completion_tokens += outcome.completion_tokens or 0
        self.cached += outcome.cached
        if outcome.latency_ms is not None and not outcome.cached:
            self.latencies.append(outcome.latency_ms)

    def unfinished(self) -> bool:
        """A case skipped at the cost ceiling or timed out: the run is not complete (resumable)."""
        return bool(self.timed_out) or self.count(Status.SKIPPED) > 0
