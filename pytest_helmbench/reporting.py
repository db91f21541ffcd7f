"""What a person reads during and after a run: failure texts, pytest-html extras, the terminal summary."""

from __future__ import annotations

import html
import json
import statistics
from typing import Any, Iterable

from .outcome import Outcome

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
    lines += ["", "--- composed prompt ---", outcome.prompt, "", "--- raw response ---", outcome.raw_response or "(none)"]
    return "\n".join(lines)


def html_extras_for(outcome: Outcome) -> list[dict[str, Any]]:
    """pytest-html extras: model output only ever goes into text/json extras, which are escaped."""
    if html_extras is None:
        return []
    evaluation = {"status": outcome.status, "reason": outcome.reason, "expected": outcome.expected, "actual": outcome.actual}
    extras = [
        html_extras.text(outcome.prompt, name="Composed prompt"),
        html_extras.text(outcome.raw_response or "(none)", name="Raw response"),
        html_extras.json(evaluation, name="Evaluation"),
    ]
    judge = outcome.details.get("judge")
    if judge:
        extras.append(html_extras.json({"verdict": judge.get("values"), "rationale": judge.get("rationale")}, name="Judge verdict"))
    return extras


def html_cells(outcome: Outcome | None) -> list[str]:
    """Escaped cells for the extra pytest-html columns (model, code, expected, actual, cost, latency)."""
    if outcome is None:
        return ["<td></td>"] * len(HTML_COLUMNS)
    values = [
        outcome.model, outcome.case_code, _short(outcome.expected), _short(outcome.actual),
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


def summary_lines(tallies: dict[str, Any], db: str, stopped: dict[str, str], dry_run_skips: int, storage_error: str | None) -> Iterable[str]:
    """The terminal summary's lines, one block per model."""
    if dry_run_skips:
        yield f"dry run: {dry_run_skips} case(s) composed and validated; nothing was sent and nothing recorded"
    for model, t in sorted(tallies.items()):
        evaluated = t.passed + t.failed
        rate = f"{100.0 * t.passed / evaluated:.1f}%" if evaluated else "n/a"
        yield (
            f"{model}: run {t.run_id if t.run_id is not None else '-'} | {t.passed} passed, {t.failed} failed, "
            f"{t.errors} errors, {t.skipped} skipped | pass rate {rate}"
        )
        latency = ""
        if t.latencies:
            latency = f" | latency p50 {percentile(t.latencies, 50):.0f} ms, p95 {percentile(t.latencies, 95):.0f} ms"
        yield (
            f"    tokens {t.prompt_tokens} prompt + {t.completion_tokens} completion | cost ${t.cost_usd:.4f}"
            f" (+ judge ${t.judge_cost_usd:.4f}){latency}"
        )
    for model, reason in sorted(stopped.items()):
        yield f"STOPPED {model}: {reason} (its remaining cases were not run; the run is marked interrupted)"
    if storage_error:
        yield f"RESULTS NOT RECORDED: {storage_error}"
    elif tallies:
        yield f"results stored in {db}"
