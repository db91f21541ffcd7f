"""What a person reads in the terminal: failure texts and the end-of-session summary."""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..codes import code_list, layout_label, layouts_differ_line
from ..execution.outcome import Outcome
from ..execution.selection import RunSelection, subset_label
from ..execution.unpriced import Unpriced
from ..status import Status
from .analytics import gate, repeat_stats
from .cost_text import usd
from .drift import drift_lines, gap_lines
from .figure_text import figures_line
from .harm_care import by, harm_care, layout_of


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


def failure_text(outcome: Outcome) -> str:
    """The text shown for a failed or errored case: reason, expected vs actual, judge, prompt, response.

    The reason is the first line: pytest's short summary (-rA) and JUnit's message show that line."""
    head = "ERROR" if outcome.status == Status.ERROR else "FAILED"
    layout = f", {outcome.layout}" if outcome.layout != "seed" else ""
    lines = [
        outcome.reason or "(no reason given)",
        f"HELMBench {head} {outcome.case_code} [{outcome.model}{layout}]",
    ]
    if outcome.expected is not None and outcome.expected == outcome.actual:  # another check failed
        lines.append(f"label as expected: {_json(outcome.actual)}")
    elif outcome.expected is not None or outcome.actual is not None:
        lines += [f"expected: {_json(outcome.expected)}", f"actual:   {_json(outcome.actual)}"]
    judge = outcome.details.get("judge")
    if judge:  # an atomic rubric's verdict is its answers per check, an options rubric's its values
        verdict = judge.get("answers") or judge.get("values")
        lines += [f"judge verdict: {verdict}", f"judge rationale: {judge.get('rationale')}"]
    whole = [c for c in outcome.details.get("conversation_checks") or () if isinstance(c, dict)]
    if whole:  # asked once over the whole transcript, shown apart from the per-reply checks
        lines.append("whole-conversation checks (asked once, over every turn):")
        lines += [f"  [{c.get('name')}] {c.get('status')}: {c.get('reason')}" for c in whole]
    extraction = outcome.details.get("extraction")
    if extraction:  # the deployed layout: what the marking model read in the plain reply
        fields = json.dumps(extraction.get("fields"), ensure_ascii=False, default=str)
        lines.append(f"extracted by {extraction.get('model')}: {fields}")
    if outcome.messages:
        lines += ["", f"--- conversation ({outcome.layout} layout) ---", *_transcript(outcome)]
    else:
        lines += ["", "--- composed prompt ---", outcome.prompt]
    lines += ["", "--- raw response ---", outcome.raw_response or "(none)"]
    return "\n".join(lines)


def _transcript(outcome: Outcome) -> list[str]:
    """Every message as sent and each reply, the judged ones with their turn and verdict, the first
    failing one marked."""
    judged = {t.get("turn"): t for t in outcome.details.get("turns") or () if isinstance(t, dict)}
    failing = outcome.details.get("first_failing_turn")
    messages = outcome.messages or []
    turns = reply_turns(messages)
    lines: list[str] = []
    for position, message in enumerate(messages):
        label = f"[{message.get('role', '?')}]"
        turn = turns.get(position)
        verdict = judged.get(turn) if turn is not None else None
        if verdict is not None:
            mark = "  <-- FIRST FAILING TURN" if turn == failing else ""
            label = f"[assistant, turn {turn}: {verdict.get('status')}]{mark}"
        lines += [label, str(message.get("content", ""))]
    return lines


def reply_turns(messages: list[dict[str, str]]) -> dict[int, int]:
    """Position of each turn's judged reply -> its turn index (the number of user messages before it);
    when several assistant messages follow one user message, the last is the model's reply."""
    last: dict[int, int] = {}  # turn index -> position of its last assistant message
    users = 0
    for position, message in enumerate(messages):
        users += message.get("role") == "user"
        if message.get("role") == "assistant":
            last[users] = position
    return {position: turn for turn, position in last.items()}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    return statistics.quantiles(ordered, n=100, method="inclusive")[int(q) - 1]


def _pct(value: float | None) -> str:
    return f"{100.0 * value:.1f}%" if value is not None else "n/a"


def _interval(low: float | None, high: float | None) -> str:
    return f"[95% CI {_pct(low)}-{_pct(high)}]"


def _latency(latencies: list[float]) -> str:
    if not latencies:
        return ""
    p50, p95, p99 = (percentile(latencies, q) for q in (50, 95, 99))
    return f" | latency p50 {p50:.0f} ms, p95 {p95:.0f} ms, p99 {p99:.0f} ms"


def model_lines(
    model: str, tally: Any, selection: RunSelection | None = None, unpriced: Unpriced | None = None
) -> Iterable[str]:
    """One compact block per model: harm rate and care score (the headline, scoring version 3) with the
    critical harm, over-escalation and perfect-reply rates, the counts, critical gate, the behaviours
    with most harm, drift by turn and the instructed-vs-deployed gap (when there is such data), cost; a
    subset run says so (`run 3, subset: 25 of 120 cases`), a cost nobody reported is unknown."""
    results = tally.results
    figures = harm_care(results)
    gates = gate(results).get(model)
    unknown = f" (no harm verdict for {figures.n_harm_unknown})" if figures.n_harm_unknown else ""
    n_passed = sum(r.status == Status.PASSED for r in results)
    yield (
        f"{model}  (run {tally.run_id if tally.run_id is not None else '-'}{_subset(selection)})  "
        f"layout: {layout_label(layout_of(results))}\n"
        f"    {figures_line(figures)}\n"
        f"    {n_passed} passed, {figures.n_scored - n_passed} failed, {figures.n_errors} errors, "
        f"{figures.n_skipped} skipped{unknown}"
    )
    if gates is not None and gates.n_critical:
        detail = {
            "failed": f": {code_list(gates.failed_cases)}",
            "incomplete": f": {len(gates.incomplete_cases)} critical case(s) errored or skipped",
            "passed": "",
        }[gates.status]
        raw, confirmed = len(gates.raw_failed_cases), len(gates.failed_cases)
        failures = f"{confirmed}" if raw == confirmed else f"{raw} raw, {confirmed} confirmed"
        if gates.unconfirmed_cases:
            detail += f"; not confirmed on re-judging: {code_list(gates.unconfirmed_cases)}"
        yield f"    critical gate {gates.status.upper()} ({failures} critical failures){detail}"
    repeats = repeat_stats(results)
    if repeats.k_max > 1:
        yield (
            f"    repeats k={repeats.k_max}: pass^k {_pct(repeats.pass_k)} of {repeats.n_cases} cases "
            f"{_interval(repeats.pass_k_wilson_low, repeats.pass_k_wilson_high)}"
        )
    yield from _most_harm(results)
    for line in (*drift_lines(results), *gap_lines(results)):  # multi-turn and two-layout runs only
        yield f"    {line}"
    cached = f" | {tally.cached} from cache" if tally.cached else ""
    yield (
        f"    tokens {tally.prompt_tokens} prompt + {tally.completion_tokens} completion"
        f" | cost {usd(tally.cost_usd, unpriced.model_calls if unpriced else 0)}"
        f" (+ judge {usd(tally.judge_cost_usd, unpriced.judge_calls if unpriced else 0)})"
        f"{cached}{_latency(tally.latencies)}"
    )


def _most_harm(results: list[Any]) -> Iterable[str]:
    """The (at most three) behaviours with the highest harm rate above 0, when several have a harm rate."""
    rates = [
        (code, f.harm_rate.value) for code, f in by(results, "behaviour").items() if f.harm_rate is not None
    ]
    worst = sorted([item for item in rates if item[1] > 0], key=lambda item: (-item[1], item[0]))[:3]
    if worst and len(rates) > 1:
        yield "    most harm: " + ", ".join(f"{code} {100 * rate:.1f}%" for code, rate in worst)


def _subset(selection: RunSelection | None) -> str:
    label = subset_label(selection.subset, selection.selected, selection.total) if selection else ""
    return f", {label}" if label else ""


def _attempt_lines(tallies: dict[str, Any]) -> Iterable[str]:
    """Reruns (pytest-rerunfailures) and timeouts (pytest-timeout): what the counts above mean."""
    replaced = sum(getattr(t, "replaced", 0) for t in tallies.values())
    if replaced:
        yield (
            f"reruns: {replaced} earlier attempt(s) replaced by a later one; each case is counted once, "
            "by its last attempt (the earlier ones are stored in its evaluation details)"
        )
    timed_out = sum(len(getattr(t, "timed_out", ())) for t in tallies.values())
    if timed_out:
        yield (
            f"timeouts: {timed_out} case(s) timed out (pytest-timeout), counted as errors; the run is "
            "marked interrupted: --helmbench-resume runs them again"
        )


@dataclass(frozen=True)
class SessionSummary:
    """What the end-of-session summary reports: the tallies per model, where results went, and the
    session's stops, skips, resume counts, cost ceiling, verdict (reporting.verdict.Decision) and
    `notes` (plugin.state.SessionNotes: selections and unpriced calls)."""

    tallies: dict[str, Any]
    db: str
    stopped: dict[str, str]
    dry_run_skips: int
    storage_error: str | None
    resume_counts: dict[str, int] | None = None
    max_cost: float | None = None
    spent: float | None = None
    decision: Any = None
    notes: Any = None


#: What a newcomer runs after a first run: printed after "results stored in", from the same folder.
NEXT_STEPS = (
    "next: helmbench report                          # this run as one HTML page",
    "      helmbench serve                           # browse every reply; start a clinician review",
    "      pytest --helmbench-model=openrouter/<id>  # a real model (OPENROUTER_API_KEY; docs/tutorial)",
)


def summary_lines(summary: SessionSummary) -> Iterable[str]:
    """The terminal summary's lines."""
    tallies, notes, max_cost = summary.tallies, summary.notes, summary.max_cost
    dry_run_skips, resume_counts = summary.dry_run_skips, summary.resume_counts
    if dry_run_skips:
        yield (
            f"dry run: {dry_run_skips} case(s) composed and validated; nothing was sent and nothing recorded"
        )
    if resume_counts:
        yield (
            f"resume: {resume_counts.get('done', 0)} case(s) already finished were not run again; "
            f"{resume_counts.get('changed', 0)} changed since (prompt or options) and were run afresh; "
            f"{resume_counts.get('run', 0)} run"
        )
    differ = layouts_differ_line({model: layout_of(t.results) for model, t in tallies.items() if t.results})
    if differ:
        yield f"note: {differ}"
    for model, tally in sorted(tallies.items()):
        yield from model_lines(
            model,
            tally,
            notes.selections.get(model) if notes else None,
            notes.unpriced.get(model) if notes else None,
        )
    yield from _attempt_lines(tallies)
    if max_cost is not None:
        budget_skips = sum(1 for t in tallies.values() for r in t.results if r.status == Status.SKIPPED)
        note = (
            f"; {budget_skips} case(s) skipped at the ceiling (a --helmbench-resume runs them)"
            if budget_skips
            else ""
        )
        yield f"cost ceiling ${max_cost:.4f}: spent ${summary.spent or 0.0:.4f} this session{note}"
    for model, reason in sorted(summary.stopped.items()):
        yield f"STOPPED {model}: {reason} (its remaining cases were not run; the run is marked interrupted)"
    decision = summary.decision
    if decision is not None:
        yield f"verdict: {decision.status.upper()}" + "".join(
            f"\n    {reason}" for reason in decision.reasons
        )
    if summary.storage_error:
        yield f"RESULTS NOT RECORDED: {summary.storage_error}"
    elif tallies:
        yield f"results stored in {summary.db}"
        yield from NEXT_STEPS
