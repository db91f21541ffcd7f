"""The HELMBench summary as pytest-html shows it in its summary section: per model the harm rate and the
care score with their intervals (the headline, scoring version 3), the other version 3 figures, the
counts, the critical gate and the cost, as the terminal summary says them.

pytest-html inserts these fragments unescaped (`|safe`), so every value is escaped here.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from ..codes import layout_label
from ..execution.selection import RunSelection, subset_label
from ..execution.unpriced import Unpriced
from ..status import Status
from .analytics import gate
from .cost_text import usd
from .figure_text import figure_text
from .harm_care import harm_care, layout_of


def _row(model: str, tally: Any, selection: RunSelection | None, unpriced: Unpriced) -> str:
    figures = harm_care(tally.results)
    found = figures.as_json()
    gates = gate(tally.results).get(model)
    n_passed = sum(r.status == Status.PASSED for r in tally.results)
    if gates is None or not gates.n_critical:
        gate_text = "no critical cases"
    else:
        raw, confirmed = len(gates.raw_failed_cases), len(gates.failed_cases)
        gate_text = f"{gates.status} ({confirmed} confirmed, {raw} raw critical failures)"
    run = f"run {tally.run_id}" if tally.run_id is not None else "not recorded"
    label = subset_label(selection.subset, selection.selected, selection.total) if selection else ""
    cells = [
        (model, "model"),
        (f"{run}, {label}" if label else run, "run"),
        (layout_label(layout_of(tally.results)), "layout"),
        (figure_text("harm_rate", found["harm_rate"]), "harm-rate"),
        (figure_text("care_score", found["care_score"]), "care-score"),
        (
            " | ".join(
                figure_text(name, found[name], interval=False)
                for name in ("critical_harm_rate", "over_escalation_rate", "perfect_reply_rate")
            ),
            "rates",
        ),
        (
            f"{n_passed} passed, {figures.n_scored - n_passed} failed, {figures.n_errors} errors, "
            f"{figures.n_skipped} skipped",
            "counts",
        ),
        (gate_text, "gate"),
        (
            f"{usd(tally.cost_usd, unpriced.model_calls)} "
            f"(+ judge {usd(tally.judge_cost_usd, unpriced.judge_calls)})",
            "cost",
        ),
    ]
    tds = "".join(f'<td class="helmbench-{cls}">{html.escape(text)}</td>' for text, cls in cells)
    return f"<tr>{tds}</tr>"


HEAD = (
    "Model",
    "Run",
    "Layout",
    "Harm rate",
    "Care score",
    "Other rates",
    "Cases",
    "Critical gate",
    "Cost (USD)",
)


def session_summary_html(
    tallies: Mapping[str, Any],
    selections: Mapping[str, RunSelection],
    unpriced: Mapping[str, Unpriced],
    dry_run_skips: int = 0,
) -> str:
    """One fragment: a table with a row per model (nothing sent in a dry run: a line says so)."""
    parts = ['<div id="helmbench-summary" class="helmbench-summary"><h3>HELMBench summary</h3>']
    if dry_run_skips:
        parts.append(
            f"<p>dry run: {dry_run_skips} case(s) composed and validated; nothing was sent and nothing "
            "recorded</p>"
        )
    if tallies:
        head = "".join(f"<th>{html.escape(name)}</th>" for name in HEAD)
        rows = "".join(
            _row(model, tallies[model], selections.get(model), unpriced.get(model, Unpriced()))
            for model in sorted(tallies)
        )
        parts.append(
            f'<table class="helmbench-models"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'
        )
    parts.append("</div>")
    return "".join(parts)
