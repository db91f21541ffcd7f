"""Scoring version 3's figures as one line of text: the terminal summary, `helmbench report` and
`helmbench rescore` say them the same way (harm rate and care score first: they are the headline).

Reads the stored form (`{"value", "ci_low", "ci_high"}` or None per figure: headline.py, the report's
JSON), so a live session and a stored run print alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .harm_care import HarmCare

#: (figure, label) in the order a line gives them.
LABELS = (
    ("harm_rate", "harm"),
    ("care_score", "care"),
    ("critical_harm_rate", "critical harm"),
    ("over_escalation_rate", "over-escalation"),
    ("perfect_reply_rate", "perfect replies"),
)
LAYOUT_NAMES = {"seed": "instructed", "deployed": "deployed", "mixed": "instructed and deployed"}


def _number(name: str, value: float) -> str:
    return f"{value:.1f}" if name == "care_score" else f"{100 * value:.1f}%"


def figure_text(name: str, figure: Mapping[str, Any] | None, *, interval: bool = True) -> str:
    """`harm 12.0% [95% CI 8.1%-16.2%]`, `care 71.3/100 [...]`, `harm n/a` (nothing scored)."""
    label = dict(LABELS)[name]
    if figure is None or figure.get("value") is None:
        return f"{label} n/a"
    text = f"{label} {_number(name, figure['value'])}" + ("/100" if name == "care_score" else "")
    low, high = figure.get("ci_low"), figure.get("ci_high")
    if interval and low is not None and high is not None:
        text += f" [95% CI {_number(name, low)}-{_number(name, high)}]"
    return text


def figures_line(
    figures: Mapping[str, Any] | HarmCare, *, intervals: tuple[str, ...] = ("harm_rate", "care_score")
) -> str:
    """Every figure, harm and care first; intervals only for the ones named (a line stays readable)."""
    found = figures.as_json() if isinstance(figures, HarmCare) else figures
    return " | ".join(figure_text(name, found.get(name), interval=name in intervals) for name, _ in LABELS)


def basis_note(figures: HarmCare) -> str:
    """`from 8 of 215 results`: said beside a headline that rests on fewer than half of its results
    (the rest errored or were skipped), or `harm from 8 of 215 results` when the harm of most scored
    replies could not be told; empty when the figures stand on most of the results."""
    total = figures.n_scored + figures.n_errors + figures.n_skipped
    known = figures.n_scored - figures.n_harm_unknown
    if total and figures.n_scored < total / 2:
        return f"from {figures.n_scored} of {total} results"
    if 0 < known < figures.n_scored / 2:  # none known: the harm rate already says n/a
        return f"harm from {known} of {total} results"
    return ""
