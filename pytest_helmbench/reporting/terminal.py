"""What a person reads during and after a run: failure texts, pytest-html extras, the terminal summary."""

from __future__ import annotations

import html
import json
import statistics
from collections.abc import Iterable
from typing import Any

from ..execution.outcome import Outcome
from .analytics import gate, repeat_stats, score, scores_by

try:  # pytest-html is a dependency, but the plugin must not break if it is absent
    from pytest_html import extras as html_extras
except ImportError:  # pragma: no cover
    html_extras = None


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


def failure_text(outcome: Outcome) -> str:
    """The text shown for a failed or errored case: reason, expected vs actual, judge, prompt, response."""
    head = "ERROR" if outcome.status == "error" else "FAILED"
    lines = [f"HELMBench {head} {outcome.case_code} [{outcome.model}]: {outcome.reason}"]
    if outcome.expected is not None or outcome.actual is not None:
        lines += [f"expected: {_json(outcome.expected)}", f"actual:   {_json(outcome.actual)}"]
    judge = outcome.details.get("judge")
    if judge:
        lines += [f"judge verdict: {judge.get('values')}", f"judge rationale: {judge.get('rationale')}"]
    lines += [
        "",
        "--- composed prompt ---",
        outcome.prompt,
        "",
        "--- raw response ---",
        outcome.raw_response or "(none)",
    ]
    return "\n".join(lines)


def html_extras_for(outcome: Outcome) -> list[dict[str, Any]]:
    """pytest-html extras: model output only ever goes into text/json extras, which are escaped."""
    if html_extras is None:
        return []
    evaluation = {
        "status": outcome.status,
        "reason": outcome.reason,
        "expected": outcome.expected,
        "actual": outcome.actual,
    }
    extras = [
        html_extras.text(outcome.prompt, name="Composed prompt"),
        html_extras.text(outcome.raw_response or "(none)", name="Raw response"),
        html_extras.json(evaluation, name="Evaluation"),
    ]
    judge = outcome.details.get("judge")
    if judge:
        extras.append(
            html_extras.json(
                {"verdict": judge.get("values"), "rationale": judge.get("rationale")}, name="Judge verdict"
            )
        )
    return extras


def html_cells(outcome: Outcome | None) -> list[str]:
    """Escaped cells for the extra pytest-html columns (model, code, expected, actual, cost, latency)."""
    if outcome is None:
        return ["<td></td>"] * len(HTML_COLUMNS)
    values = [
        outcome.model,
        outcome.case_code,
        _short(outcome.expected),
        _short(outcome.actual),
        f"{outcome.cost_usd:.6f}" if outcome.cost_usd is not None else "",
        f"{outcome.latency_ms:.0f} ms" if outcome.latency_ms is not None else "",
    ]
    return [f"<td>{html.escape(v)}</td>" for v in values]


HTML_COLUMNS = ("Model", "Code", "Expected", "Actual", "Cost (USD)", "Latency")


def _short(value: Any) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    return statistics.quantiles(ordered, n=100, method="inclusive")[int(q) - 1]


def _pct(value: float | None) -> str:
    return f"{100.0 * value:.1f}%" if value is not None else "n/a"


def model_lines(model: str, tally: Any) -> Iterable[str]:
    """One compact block per model: score, pass rate, errors, critical gate, cost, worst behaviours."""
    results = tally.results
    summary = score(results)
    gates = gate(results).get(model)
    score_text = f"{summary.score:.1f}/100" if summary.score is not None else "n/a"
    yield (
        f"{model}  (run {tally.run_id if tally.run_id is not None else '-'})\n"
        f"    score {score_text} | pass rate {_pct(summary.pass_rate)} [95% CI {_pct(summary.wilson_low)}-{_pct(summary.wilson_high)}] | "
        f"{summary.n_passed} passed, {summary.n_failed} failed, {summary.n_errors} errors, {summary.n_skipped} skipped"
    )
    if gates is not None and gates.n_critical:
        detail = {
            "failed": f": {', '.join(gates.failed_cases[:5])}"
            + (" ..." if len(gates.failed_cases) > 5 else ""),
            "incomplete": f": {len(gates.incomplete_cases)} critical case(s) errored or skipped",
            "passed": "",
        }[gates.status]
        yield f"    critical gate {gates.status.upper()} ({len(gates.failed_cases)} critical failures){detail}"
    repeats = repeat_stats(results)
    if repeats.k_max > 1:
        yield f"    repeats k={repeats.k_max}: pass^k {_pct(repeats.pass_k)} of {repeats.n_cases} cases [95% CI {_pct(repeats.pass_k_wilson_low)}-{_pct(repeats.pass_k_wilson_high)}]"
    behaviours = [(code, s) for code, s in scores_by(results, "behaviour").items() if s.score is not None]
    worst = sorted(behaviours, key=lambda item: (item[1].score, item[0]))[:3]
    if worst and len(behaviours) > 1:
        yield "    worst behaviours: " + ", ".join(f"{code} {s.score:.1f}" for code, s in worst)
    latency = ""
    if tally.latencies:
        latency = f" | latency p50 {percentile(tally.latencies, 50):.0f} ms, p95 {percentile(tally.latencies, 95):.0f} ms, p99 {percentile(tally.latencies, 99):.0f} ms"
    cached = f" | {tally.cached} from cache" if tally.cached else ""
    yield (
        f"    tokens {tally.prompt_tokens} prompt + {tally.completion_tokens} completion | cost ${tally.cost_usd:.4f}"
        f" (+ judge ${tally.judge_cost_usd:.4f}){cached}{latency}"
    )


def summary_lines(
    tallies: dict[str, Any],
    db: str,
    stopped: dict[str, str],
    dry_run_skips: int,
    storage_error: str | None,
    *,
    resume_counts: dict[str, int] | None = None,
    max_cost: float | None = None,
    spent: float | None = None,
    decision: Any = None,
) -> Iterable[str]:
    """The terminal summary's lines."""
    if dry_run_skips:
        yield f"dry run: {dry_run_skips} case(s) composed and validated; nothing was sent and nothing recorded"
    if resume_counts:
        yield (
            f"resume: {resume_counts.get('done', 0)} case(s) already finished were not run again; "
            f"{resume_counts.get('changed', 0)} changed since (prompt or options) and were run afresh; {resume_counts.get('run', 0)} run"
        )
    for model, tally in sorted(tallies.items()):
        yield from model_lines(model, tally)
    if max_cost is not None:
        budget_skips = sum(1 for t in tallies.values() for r in t.results if r.status == "skipped")
        note = (
            f"; {budget_skips} case(s) skipped at the ceiling (a --helmbench-resume runs them)"
            if budget_skips
            else ""
        )
        yield f"cost ceiling ${max_cost:.4f}: spent ${spent or 0.0:.4f} this session{note}"
    for model, reason in sorted(stopped.items()):
        yield f"STOPPED {model}: {reason} (its remaining cases were not run; the run is marked interrupted)"
    if decision is not None:
        yield f"verdict: {decision.status.upper()}" + "".join(
            f"\n    {reason}" for reason in decision.reasons
        )
    if storage_error:
        yield f"RESULTS NOT RECORDED: {storage_error}"
    elif tallies:
        yield f"results stored in {db}"
