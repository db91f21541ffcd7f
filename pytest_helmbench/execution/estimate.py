"""Pre-run estimate of tokens and USD, before anything is sent.

No tokenizer can be downloaded at run time here, so tokens are estimated by a documented
heuristic: ceil(characters / 4) for the prompt and its JSON schema plus 8 tokens of message
overhead, and a fixed answer size (250 tokens; 150 for a judge's verdict), capped at max_tokens.
Prices come from OpenRouter's /models (per token); a model without a price shows "unknown".
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..evaluation.builtin import builtin_registry
from ..evaluation.judge import JUDGE_INSTRUCTIONS, judge_prompt, judge_schema
from ..evaluation.registry import EvaluatorRegistry
from ..providers.chat import Pricing
from ..suite.cases import Case
from ..suite.prompt import ComposedPrompt, compose

CHARS_PER_TOKEN = 4.0
MESSAGE_OVERHEAD_TOKENS = 8
ANSWER_TOKENS = 250
JUDGE_ANSWER_TOKENS = 150


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN) + MESSAGE_OVERHEAD_TOKENS


@dataclass
class ModelEstimate:
    """Expected usage and cost of one model's selected cases (judge calls on the marking model)."""

    model: str
    cases: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    judge_calls: int = 0
    judge_prompt_tokens: int = 0
    judge_completion_tokens: int = 0
    usd: float | None = 0.0
    judge_usd: float | None = 0.0

    @property
    def total_usd(self) -> float | None:
        if self.usd is None or (self.judge_calls and self.judge_usd is None):
            return None
        return self.usd + (self.judge_usd or 0.0)


def _add_cost(
    current: float | None, pricing: Pricing | None, prompt_tokens: int, completion_tokens: int
) -> float | None:
    if current is None or pricing is None:
        return None
    return current + pricing.cost(prompt_tokens, completion_tokens)


def estimate(
    entries: Iterable[tuple[Case, ComposedPrompt]],
    *,
    max_tokens: int,
    marking_model: str | None,
    pricing: Callable[[str], Pricing | None],
    evaluators: EvaluatorRegistry | None = None,
) -> list[ModelEstimate]:
    """One estimate per model, in model order; each case counted once per repeat it will run.

    A judge call is counted for each case whose evaluation type needs the marking model."""
    registry = evaluators if evaluators is not None else builtin_registry()
    found: dict[str, ModelEstimate] = {}
    answer = "x" * int(ANSWER_TOKENS * CHARS_PER_TOKEN)
    for case, prompt in entries:
        est = found.setdefault(case.model, ModelEstimate(case.model))
        prompt_tokens = estimate_tokens(prompt.text + json.dumps(prompt.response_format))
        completion = min(ANSWER_TOKENS, max_tokens)
        est.cases += 1
        est.prompt_tokens += prompt_tokens
        est.completion_tokens += completion
        est.usd = _add_cost(est.usd, pricing(case.model), prompt_tokens, completion)
        if marking_model and registry.get(case.scenario.evaluation.type).needs_judge:
            judge_tokens = _judge_tokens(case, prompt, answer)
            judge_completion = min(JUDGE_ANSWER_TOKENS, max_tokens)
            est.judge_calls += 1
            est.judge_prompt_tokens += judge_tokens
            est.judge_completion_tokens += judge_completion
            est.judge_usd = _add_cost(est.judge_usd, pricing(marking_model), judge_tokens, judge_completion)
    return list(found.values())


def _judge_tokens(case: Case, prompt: ComposedPrompt, answer: str) -> int:
    """The judge's prompt: the sqe one when the scenario has a rubric, else instructions, prompt, answer."""
    criteria = case.scenario.criteria
    if criteria is None:
        return estimate_tokens(f"{JUDGE_INSTRUCTIONS}\n\n{prompt.text}\n\n{answer}")
    return estimate_tokens(judge_prompt(criteria, prompt.text, answer) + json.dumps(judge_schema(criteria)))


def _usd(value: float | None) -> str:
    return f"${value:.4f}" if value is not None else "unknown (no price in /models)"


def estimate_lines(estimates: list[ModelEstimate]) -> list[str]:
    lines = []
    grand: float | None = 0.0
    for est in estimates:
        tokens = f"~{est.prompt_tokens} prompt + ~{est.completion_tokens} completion tokens"
        lines.append(f"{est.model}: {est.cases} cases | {tokens} | {_usd(est.usd)}")
        if est.judge_calls:
            judge = f"~{est.judge_prompt_tokens} prompt + ~{est.judge_completion_tokens} completion tokens"
            lines.append(f"    judge: {est.judge_calls} calls | {judge} | {_usd(est.judge_usd)}")
        grand = None if grand is None or est.total_usd is None else grand + est.total_usd
    lines.append(
        f"estimated total: {_usd(grand)} "
        f"(heuristic: characters/4 per token, answers ~{ANSWER_TOKENS} tokens; see README)"
    )
    return lines


def write_estimate(
    reporter: Any,
    cases: Iterable[Case],
    *,
    max_tokens: int,
    marking_model: str | None,
    pricing: Callable[[str], Pricing | None],
    evaluators: EvaluatorRegistry | None = None,
) -> None:
    """--helmbench-estimate: the selected cases' estimate as its own terminal section (nothing sent)."""
    lines = estimate_lines(
        estimate(
            ((case, compose(case)) for case in cases),
            max_tokens=max_tokens,
            marking_model=marking_model,
            pricing=pricing,
            evaluators=evaluators,
        )
    )
    if reporter is None:
        return
    reporter.ensure_newline()
    reporter.section("HELMBench estimate (nothing sent)")
    for line in lines:
        reporter.write_line(line)
