"""pytest-html columns, cells and extras of a HELMBench case.

pytest-html escapes text and json extras but not custom cells: every cell is passed through
:func:`html.escape` here, and model output only ever goes into text or json extras.
"""

from __future__ import annotations

import html
import json
from typing import Any

from ..execution.outcome import Outcome

try:  # pytest-html is a dependency, but the plugin must not break if it is absent
    from pytest_html import extras as html_extras
except ImportError:  # pragma: no cover
    html_extras = None


def html_extras_for(outcome: Outcome) -> list[dict[str, Any]]:
    """pytest-html extras: model output only ever goes into text/json extras, which are escaped."""
    if html_extras is None:
        return []
    evaluation = {
        "status": str(outcome.status),  # plain data: the report travels through xdist
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
