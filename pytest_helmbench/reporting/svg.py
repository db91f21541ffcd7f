"""The few SVG primitives the report's charts are written with (standard library only).

Every text node and attribute value goes through :func:`html.escape`, so a model id or a benchmark
title can never become markup; numbers are written rounded, and NaN or infinite values are never
written at all (callers treat them as missing). Charts are plain markup: they show in a mail client,
a CI artifact viewer and a printout, with or without script.
"""

from __future__ import annotations

import html
import math

#: One colour per series (repeats after ten), distinguishable in print.
PALETTE = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#9467bd",
    "#ff7f0e",
    "#17becf",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
)
GRID = "#e0e0e6"
MUTED = "#666"
INK = "#333"
MISSING_FILL = "#e4e4ea"


def esc(value: object) -> str:
    """Escape text for SVG/HTML content and attribute values."""
    return html.escape("" if value is None else str(value), quote=True)


def num(value: float) -> str:
    """A coordinate as short text: at most two decimals, no trailing zeros."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def finite(value: float | None) -> float | None:
    """The value, or None when it is missing, NaN or infinite."""
    return value if value is not None and math.isfinite(value) else None


def clamp(value: float, low: float, high: float) -> float:
    return max(low, min(high, value))


def colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def score_fill(score: float | None) -> str:
    """Red (0) through yellow to green (100); grey when nothing was scored."""
    if score is None:
        return MISSING_FILL
    value = clamp(score, 0.0, 100.0)
    lightness = 58 if 45 < value < 75 else 64
    return f"hsl({round(1.2 * value)},68%,{lightness}%)"


def percent(fraction: float | None) -> str:
    return "n/a" if fraction is None else f"{100 * fraction:.1f}%"


def points(fraction: float) -> str:
    """A change in percentage points, signed."""
    return f"{'+' if fraction > 0 else ''}{100 * fraction:.1f}"


def clip(text: str, limit: int) -> str:
    """Text shortened to ``limit`` characters with an ellipsis (the full text goes in a tooltip)."""
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def attrs(values: dict[str, object]) -> str:
    """Attribute text; floats are rounded, None values are left out."""
    parts = []
    for key, value in values.items():
        if value is None:
            continue
        text = num(value) if isinstance(value, float) else str(value)
        parts.append(f' {key}="{esc(text)}"')
    return "".join(parts)


def el(tag: str, values: dict[str, object], content: str = "") -> str:
    """One element; ``content`` is markup already built by these helpers."""
    return f"<{tag}{attrs(values)}>{content}</{tag}>" if content else f"<{tag}{attrs(values)}/>"


def tip(text: str) -> str:
    """A tooltip: the SVG <title> child every viewer shows on hover."""
    return f"<title>{esc(text)}</title>"


def text(x: float, y: float, content: str, values: dict[str, object] | None = None, tooltip: str = "") -> str:
    """A text label at (x, y); ``content`` is plain text (escaped here)."""
    body = (tip(tooltip) if tooltip else "") + esc(content)
    return f"<text{attrs({'x': float(x), 'y': float(y), **(values or {})})}>{body}</text>"


def line(x1: float, y1: float, x2: float, y2: float, values: dict[str, object] | None = None) -> str:
    return el("line", {"x1": float(x1), "y1": float(y1), "x2": float(x2), "y2": float(y2), **(values or {})})


def document(width: float, height: float, label: str, body: list[str], css_class: str) -> str:
    """A standalone <svg> whose viewBox matches its size, named for screen readers."""
    head = attrs(
        {
            "xmlns": "http://www.w3.org/2000/svg",
            "class": css_class,
            "viewBox": f"0 0 {num(width)} {num(height)}",
            "width": float(width),
            "height": float(height),
            "role": "img",
            "aria-label": label,
            "font-family": "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif",
            "font-size": 12,
        }
    )
    return f"<svg{head}>{tip(label)}{''.join(body)}</svg>"


def empty_note(message: str) -> str:
    """What a chart shows when it has nothing to draw."""
    return f'<p class="muted empty-chart">{esc(message)}</p>'
