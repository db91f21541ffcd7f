"""USD as people read it when some calls had no price: "unknown", or a lower bound with the count.

An OpenAI-compatible server (llama.cpp, vLLM, Ollama, LM Studio) reports no cost and has no price
list: its calls are stored with a NULL cost, and a sum over them is not $0.0000. Used by the terminal
summary, pytest-html, `helmbench report` and `helmbench costs`.
"""

from __future__ import annotations


def unpriced_text(calls: int) -> str:
    return f"{calls} call{'s' if calls != 1 else ''} without a price"


def usd(known: float, unpriced: int = 0, *, digits: int = 4) -> str:
    """`$0.0412`; `unknown (3 calls without a price)` when nothing was priced; otherwise
    `≥ $0.0412, 3 calls without a price` (what was priced is a lower bound)."""
    if not unpriced:
        return f"${known:.{digits}f}"
    if known == 0:
        return f"unknown ({unpriced_text(unpriced)})"
    return f"≥ ${known:.{digits}f}, {unpriced_text(unpriced)}"


def usd_cell(known: float, unpriced: int = 0, *, digits: int = 4) -> str:
    """A table cell: `0.0412`, `unknown` or `≥0.0412` (the count goes in a note beside the table)."""
    if not unpriced:
        return f"{known:.{digits}f}"
    return "unknown" if known == 0 else f"≥{known:.{digits}f}"


def run_notes(run_id: int, subset: str, model_calls: int, judge_calls: int) -> list[str]:
    """`helmbench costs`'s lines under the table for one run: a subset, calls without a price."""
    lines = [f"run {run_id} is a {subset} (not the model's whole benchmark)"] if subset else []
    if model_calls or judge_calls:
        parts = [
            f"{unpriced_text(n)} ({who})" for n, who in ((model_calls, "model"), (judge_calls, "judge")) if n
        ]
        lines.append(f"run {run_id}: {', '.join(parts)}: its cost is a lower bound, or unknown")
    return lines
