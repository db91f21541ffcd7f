"""Calls nobody priced: an OpenAI-compatible server (llama.cpp, vLLM, Ollama, LM Studio) reports no
cost and publishes no price list, so its answers carry a NULL cost, never $0 (a free local model's
does say 0). Counted per run or session so that every sum of USD can say it is incomplete."""

from __future__ import annotations

from dataclasses import dataclass

from .outcome import Outcome


@dataclass(frozen=True)
class Unpriced:
    """Answered calls without a price: the model's, and Results whose judge answered unpriced."""

    model_calls: int = 0
    judge_calls: int = 0

    def __add__(self, other: Unpriced) -> Unpriced:
        return Unpriced(self.model_calls + other.model_calls, self.judge_calls + other.judge_calls)

    @property
    def total(self) -> int:
        return self.model_calls + self.judge_calls


def unpriced_of(outcome: Outcome) -> Unpriced:
    """A model answer (it has a latency) not replayed from the cache and without a cost; a judge that
    answered (its tokens are known) without a cost."""
    model = outcome.cost_usd is None and outcome.latency_ms is not None and not outcome.cached
    judge = outcome.judge_cost_usd is None and outcome.judge_prompt_tokens is not None
    return Unpriced(int(model), int(judge))
