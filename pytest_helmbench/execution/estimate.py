"""Pre-run estimate of tokens and USD, before anything is sent.

No tokenizer can be downloaded at run time here, so tokens are estimated by a documented
heuristic: ceil(characters / 4) for the prompt and its JSON schema plus 8 tokens of message
overhead, and a fixed answer size (250 tokens; 150 for a judge's verdict), capped at max_tokens.
Prices come from OpenRouter's /models (per token); a model without a price shows "unknown".

Every judge call is counted: one per judged check (the label check and each `checks:` item whose
type needs the marking model) per panel judge, for every reply judged, and one per case for a rubric's
`scope: conversation` checks; in a critical scenario a lone judge's every judged check costs up to
--helmbench-critical-votes calls (the votes stop once the majority is decided, so the count is an
upper bound). A simulated conversation is counted at its
turn limit (the user agent may end it sooner): each later request carries the earlier replies (~250
tokens each) and user turns (~60 tokens each), and each later user turn is one call of the user
model. In the deployed layout each reply also costs one extraction call of the first marking model
(none for a schema of `response` alone). Extractions and simulated user turns are counted with the
judge calls ("helper calls").
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..evaluation.builtin import builtin_registry
from ..evaluation.extraction import nothing_to_extract
from ..evaluation.judge import JUDGE_INSTRUCTIONS, judge_messages, judge_schema
from ..evaluation.registry import EvaluatorRegistry
from ..providers.chat import Pricing
from ..suite.attack_check import stop_criteria
from ..suite.cases import Case
from ..suite.model import Criteria
from ..suite.prompt import ComposedPrompt, compose

CHARS_PER_TOKEN = 4.0
MESSAGE_OVERHEAD_TOKENS = 8
ANSWER_TOKENS = 250
JUDGE_ANSWER_TOKENS = 150
USER_TURN_TOKENS = 60  # a simulated user's message, as the next request carries it


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
    vote_calls: int = 0  # of judge_calls, the most later votes of a lone judge in critical scenarios

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


@dataclass(frozen=True)
class EstimateSettings:
    """What an estimate is priced with, besides the cases: the run's settings that shape its calls.

    `marking_model` is one judge id or the panel's ids (None: no judge); `critical_votes` is a lone
    judge's calls per judged check in a critical scenario; `user_model` is the simulated user's model
    (None: no simulated user)."""

    max_tokens: int
    marking_model: str | Sequence[str] | None
    pricing: Callable[[str], Pricing | None]
    evaluators: EvaluatorRegistry | None = None
    critical_votes: int = 1
    user_model: str | None = None
    # Why prices are missing beyond a model's absence from /models (ClientPool.pricing_problems),
    # asked once the cases are priced.
    price_problems: Callable[[], list[str]] = list

    @property
    def judges(self) -> list[str]:
        marking = self.marking_model
        return [marking] if isinstance(marking, str) else list(marking or [])


def estimate(
    entries: Iterable[tuple[Case, ComposedPrompt]], settings: EstimateSettings
) -> list[ModelEstimate]:
    """One estimate per model, in model order; each case counted once per repeat it will run.

    A judge call is counted for each judged check of a case and each judge of the panel."""
    registry = settings.evaluators if settings.evaluators is not None else builtin_registry()
    found: dict[str, ModelEstimate] = {}
    answer = "x" * int(ANSWER_TOKENS * CHARS_PER_TOKEN)
    for case, prompt in entries:
        est = found.setdefault(case.model, ModelEstimate(case.model))
        est.cases += 1
        simulated = prompt.simulation is not None
        replies = prompt.simulation.turns if simulated else len(prompt.live) or 1
        first = estimate_tokens(prompt.text + json.dumps(prompt.response_format))
        completion = min(ANSWER_TOKENS, settings.max_tokens)
        for reply in range(replies):
            prompt_tokens = first + reply * (completion + USER_TURN_TOKENS)
            est.prompt_tokens += prompt_tokens
            est.completion_tokens += completion
            est.usd = _add_cost(est.usd, settings.pricing(case.model), prompt_tokens, completion)
            extracts = prompt.response_format is None and not nothing_to_extract(case.scenario)
            _add_helpers(
                est, prompt_tokens, settings, extracts=extracts, simulated_turn=simulated and reply > 0
            )
            judged = [*_judged_rubrics(case, registry), *_stop_rubric(case, prompt)]
            for criteria in judged if settings.judges else []:
                judge_tokens = _judge_tokens(criteria, prompt, answer)
                _add_judges(est, judge_tokens, settings, critical=case.scenario.critical)
        for criteria in _judged_rubrics(case, registry) if settings.judges else []:
            if criteria is not None and criteria.conversation is not None:  # asked once, at the end
                history = "x" * int((replies - 1) * (completion + USER_TURN_TOKENS) * CHARS_PER_TOKEN)
                judge_tokens = _judge_tokens(criteria.conversation, prompt, answer) + estimate_tokens(history)
                _add_judges(est, judge_tokens, settings, critical=case.scenario.critical)
    return list(found.values())


def _add_helpers(
    est: ModelEstimate,
    prompt_tokens: int,
    settings: EstimateSettings,
    *,
    extracts: bool,
    simulated_turn: bool,
) -> None:
    """One reply's extraction (deployed layout, unless the schema is the reply alone) and the user
    turn before it (simulated, after the first)."""
    completion = min(JUDGE_ANSWER_TOKENS, settings.max_tokens)
    judges = settings.judges
    user_model = settings.user_model if simulated_turn else None
    helpers = ([judges[0]] if extracts and judges else []) + ([user_model] if user_model else [])
    for helper in helpers:
        est.judge_calls += 1
        est.judge_prompt_tokens += prompt_tokens
        est.judge_completion_tokens += completion
        est.judge_usd = _add_cost(est.judge_usd, settings.pricing(helper), prompt_tokens, completion)


def _add_judges(est: ModelEstimate, judge_tokens: int, settings: EstimateSettings, *, critical: bool) -> None:
    """One judged check of one reply: a call per judge; a lone judge in a critical scenario votes up to
    `critical_votes` times (counted in full: the estimate is an upper bound there)."""
    judges = settings.judges
    judge_completion = min(JUDGE_ANSWER_TOKENS, settings.max_tokens)
    votes = settings.critical_votes if critical and len(judges) == 1 else 1
    for judge in judges:
        for _ in range(votes):
            est.judge_calls += 1
            est.judge_prompt_tokens += judge_tokens
            est.judge_completion_tokens += judge_completion
            est.judge_usd = _add_cost(est.judge_usd, settings.pricing(judge), judge_tokens, judge_completion)
    est.vote_calls += votes - 1


def _judged_rubrics(case: Case, registry: EvaluatorRegistry) -> list[Criteria | None]:
    """The rubric of every check of the case that the marking model judges (None: no rubric)."""
    checks = case.scenario.checks
    if not checks:
        needs = registry.get(case.scenario.evaluation.type).needs_judge
        return [case.scenario.criteria] if needs else []
    return [c.criteria for c in checks if registry.get(c.spec.type).needs_judge]


def _stop_rubric(case: Case, prompt: ComposedPrompt) -> list[Criteria | None]:
    """An attacker's `stop_when`, judged after every reply (suite/attack_check.py); [] otherwise."""
    attack = prompt.simulation.attack if prompt.simulation is not None else None
    criteria = stop_criteria(attack, case.perturbation.source) if attack is not None else None
    return [criteria] if criteria is not None else []


def _judge_tokens(criteria: Criteria | None, prompt: ComposedPrompt, answer: str) -> int:
    """The judge's request: system message, data and schema; without a rubric, instructions, prompt,
    answer."""
    if criteria is None:
        return estimate_tokens(f"{JUDGE_INSTRUCTIONS}\n\n{prompt.text}\n\n{answer}")
    messages = judge_messages(criteria, prompt.text, answer)
    text = messages.system + messages.user("0" * 32) + json.dumps(judge_schema(criteria))
    return estimate_tokens(text)


NO_PRICE = "unknown (no price in /models or --helmbench-prices)"


def _usd(value: float | None) -> str:
    return f"${value:.4f}" if value is not None else NO_PRICE


def estimate_lines(estimates: list[ModelEstimate]) -> list[str]:
    lines = []
    grand: float | None = 0.0
    for est in estimates:
        tokens = f"~{est.prompt_tokens} prompt + ~{est.completion_tokens} completion tokens"
        lines.append(f"{est.model}: {est.cases} cases | {tokens} | {_usd(est.usd)}")
        if est.judge_calls:
            judge = f"~{est.judge_prompt_tokens} prompt + ~{est.judge_completion_tokens} completion tokens"
            lines.append(f"    judge: {est.judge_calls} calls | {judge} | {_usd(est.judge_usd)}")
        if est.vote_calls:
            lines.append(
                f"    of which up to {est.vote_calls} calls are the critical scenarios' further votes "
                "(each judged verdict there is the majority of --helmbench-critical-votes calls; they stop "
                "once the majority is reached)"
            )
        grand = None if grand is None or est.total_usd is None else grand + est.total_usd
    lines.append(
        f"estimated total: {_usd(grand)} "
        f"(heuristic: characters/4 per token, answers ~{ANSWER_TOKENS} tokens; "
        "see docs/how-to/run-at-scale.md)"
    )
    return lines


def write_estimate(reporter: Any, cases: Iterable[Case], settings: EstimateSettings) -> None:
    """--helmbench-estimate: the selected cases' estimate as its own terminal section (nothing sent)."""
    lines = estimate_lines(estimate(((case, compose(case)) for case in cases), settings))
    if any(NO_PRICE in line for line in lines):
        lines += [
            f"{problem}: what is marked unknown has no price; --helmbench-prices FILE gives prices "
            "(a saved /models answer, or YAML `model/id: {prompt: USD per token, completion: …}`)"
            for problem in settings.price_problems()
        ]
    if reporter is None:
        return
    reporter.ensure_newline()
    reporter.section("HELMBench estimate (nothing sent)")
    for line in lines:
        reporter.write_line(line)
