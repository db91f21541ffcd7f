"""The report's drift chart: pass rate by turn index, one line per model and layout, as inline SVG.

Drawn with the primitives of :mod:`.svg` like the other charts (:mod:`.charts`): no script needed
to see it, every value clamped into the axes, every label escaped, every point a ``<title>``
tooltip and ``data-series`` / ``data-model`` attributes for the page's highlighting and model filter.
Each point carries its 95 % Wilson interval as a whisker; the seed layout is a solid line with
filled dots, the deployed layout a dashed line with open dots, so layouts stay apart in print.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .drift import TurnRate
from .svg import GRID, MUTED, clamp, clip, colour, document, el, empty_note, line, percent, text, tip


@dataclass(frozen=True)
class DriftLine:
    """One model row's pass rates by turn index in one layout."""

    series: int  # the model row (colour, filter)
    label: str  # the model row's label
    layout: str
    rates: tuple[TurnRate, ...]  # in turn order
    show_layout: bool = False  # name the layout in the legend (the page holds several)

    @property
    def name(self) -> str:
        return f"{self.label} ({self.layout})" if self.show_layout else self.label


def drift_chart(lines: Sequence[DriftLine]) -> str:
    """Pass rate (0-100 %) by turn index with 95 % whiskers; one line per model and layout."""
    lines = [found for found in lines if found.rates]
    if not lines:
        return empty_note("No multi-turn case was scored.")
    first = min(r.turn for found in lines for r in found.rates)
    last = max(r.turn for found in lines for r in found.rates)
    slots = last - first + 1
    step = clamp(600 / slots, 14.0, 90.0)
    left, top, plot_h = 52.0, 16.0, 200.0
    plot_w = step * slots
    base = top + plot_h

    def xs(turn: int, k: int) -> float:
        spread = min(6.0, step / (len(lines) + 1))
        return left + (turn - first + 0.5) * step + (k - (len(lines) - 1) / 2) * spread

    def ys(fraction: float) -> float:
        return base - plot_h * clamp(fraction, 0.0, 1.0)

    body = []
    for tick in (0, 25, 50, 75, 100):
        body.append(line(left, ys(tick / 100), left + plot_w, ys(tick / 100), {"stroke": GRID}))
        body.append(text(left - 6, ys(tick / 100) + 4, f"{tick}%", {"text-anchor": "end", "fill": MUTED}))
    every = max(1, round(28 / step))  # a label every few turns when they are close together
    for turn in range(first, last + 1):
        if (turn - first) % every == 0 or turn == last:
            x = left + (turn - first + 0.5) * step
            body.append(text(x, base + 16, str(turn), {"text-anchor": "middle", "fill": MUTED}))
    body.append(text(left, base + 34, "turn index (user messages up to the reply)", {"fill": MUTED}))
    for k, found in enumerate(lines):
        body.append(_line(found, k, xs, ys))
    legend_top = base + 52
    for k, found in enumerate(lines):
        y = legend_top + k * 18
        paint, dashed = colour(found.series), found.layout != "seed"
        sample = {"stroke": paint, "stroke-width": 2} | ({"stroke-dasharray": "6 4"} if dashed else {})
        body.append(line(left, y + 6, left + 26, y + 6, sample))
        body.append(text(left + 34, y + 10, clip(found.name, 70), {"class": "legend-label"}, found.name))
    height = legend_top + len(lines) * 18 + 6
    body.append(
        text(left + plot_w + 12, top + 12, "dot: pass rate", {"fill": MUTED})
        + text(left + plot_w + 12, top + 28, "whisker: 95% interval", {"fill": MUTED})
    )
    return document(left + plot_w + 170, height, "pass rate by turn index per model", body, "drift")


def _line(found: DriftLine, k: int, xs: Callable[[int, int], float], ys: Callable[[float], float]) -> str:
    """The dashed or solid path through a line's points, and each point with its whisker."""
    paint, dashed = colour(found.series), found.layout != "seed"
    path = " ".join(f"{xs(r.turn, k):.1f},{ys(r.pass_rate):.1f}" for r in found.rates)
    style = {"fill": "none", "stroke": paint, "stroke-width": 2, "stroke-opacity": 0.7}
    marks = [el("polyline", {"class": "drift-path", "points": path} | style | _dash(dashed))]
    for r in found.rates:
        x = xs(r.turn, k)
        words = (
            f"{found.name} \u00b7 turn {r.turn}: pass rate {percent(r.pass_rate)} "
            f"[{percent(r.low)}, {percent(r.high)}] over {r.n_scored} scored replies"
        )
        point = {"class": "point", "cx": x, "cy": ys(r.pass_rate), "r": 4.5, "stroke": paint}
        point |= {"fill": "#fff" if dashed else paint, "stroke-width": 2, "data-turn": r.turn}
        marks += [
            line(x, ys(r.low), x, ys(r.high), {"class": "ci", "stroke": paint, "stroke-width": 1.5}),
            line(x - 3, ys(r.low), x + 3, ys(r.low), {"stroke": paint}),
            line(x - 3, ys(r.high), x + 3, ys(r.high), {"stroke": paint}),
            el("circle", point, tip(words)),
        ]
    group = {"class": "drift-line", "data-series": found.series, "data-model": found.label}
    return el("g", group | {"data-layout": found.layout}, "".join(marks))


def _dash(dashed: bool) -> dict[str, object]:
    return {"stroke-dasharray": "6 4"} if dashed else {}
