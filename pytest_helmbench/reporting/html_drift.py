"""The report's "Drift" section: pass rate by turn index (chart and table) and the instructed-vs-deployed
gap per behaviour (table), for each model row of the page; nothing at all without such data.

The figures come from :mod:`.drift`; every piece of text goes through :func:`.html_tables.e`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..codes import code_sort_key
from .drift import LayoutGap, TurnRate, layout_gaps, layout_key, signed_points, turn_pass_rates
from .drift_chart import DriftLine, drift_chart
from .html_tables import e, sortable_table
from .series import Series, pct

TURNS_EXPLAIN = (
    "Pass rate of the judged replies of multi-turn cases at each turn index: the number of user "
    "messages up to the reply (a scripted conversation is judged once, at its last user turn; a "
    "simulated one at every reply). Only passed and failed replies count; whiskers are 95% Wilson "
    "intervals. A line that falls means the model gives way the longer it is pressed."
)
GAP_EXPLAIN = (
    "The same cases (model, run, case code and repeat) sent in both layouts, paired: the seed "
    "(instructed) pass rate minus the deployed pass rate per behaviour, in percentage points, with a "
    "95% Newcombe paired interval. Positive: the model is safer when told the rules than when deployed "
    "behind a plain system prompt. Only pairs whose both cases were scored count."
)


@dataclass(frozen=True)
class DriftData:
    """What the section shows: one chart line per model row and layout, and each row's gaps."""

    lines: tuple[DriftLine, ...]
    gaps: tuple[tuple[int, str, LayoutGap], ...]  # (model row, its label, gap)

    def __bool__(self) -> bool:
        return bool(self.lines or self.gaps)


def drift_data(series: Sequence[Series]) -> DriftData:
    """Turn rates and gaps of every model row (a row holds one model's results)."""
    grouped: list[tuple[int, str, str, list[TurnRate]]] = []
    for i, s in enumerate(series):
        by_layout: dict[str, list[TurnRate]] = {}
        for rate in turn_pass_rates(s.results):
            by_layout.setdefault(rate.layout, []).append(rate)
        grouped += [(i, s.label, layout, rates) for layout, rates in by_layout.items()]
    several = len({r.layout for s in series for r in s.results}) > 1  # name layouts only then
    lines = tuple(DriftLine(i, label, layout, tuple(rates), several) for i, label, layout, rates in grouped)
    gaps = tuple((i, s.label, gap) for i, s in enumerate(series) for gap in layout_gaps(s.results))
    return DriftData(lines, gaps)


def _rate(rate: TurnRate) -> str:
    return (
        f"turn {rate.turn}: {e(pct(rate.pass_rate))} "
        f'<span class="ci">[{100 * rate.low:.1f}&ndash;{100 * rate.high:.1f}%] n={rate.n_scored}</span>'
    )


def turns_table(lines: Sequence[DriftLine]) -> str:
    """Each line's first and last turn with its rate and interval, and the change between them."""
    rows = []
    for found in sorted(lines, key=lambda d: (d.series, layout_key(d.layout))):
        first, last = found.rates[0], found.rates[-1]
        one = last is first  # a single turn index: nothing to compare
        change = "&ndash;" if one else f"{signed_points(last.pass_rate - first.pass_rate)} pts"
        rows.append(
            f'<tr data-series="{found.series}"><th scope="row">{e(found.label)}</th>'
            f"<td>{e(found.layout)}</td><td>{_rate(first)}</td>"
            f'<td>{"&ndash;" if one else _rate(last)}</td><td class="num">{change}</td></tr>'
        )
    head = ["Model", "Layout", "First turn (95% CI)", "Last turn (95% CI)", "Change"]
    return sortable_table("drift-table", head, rows)


def gap_table(gaps: Sequence[tuple[int, str, LayoutGap]], titles: Mapping[str, str]) -> str:
    """Per model row and behaviour: both layouts' pass rates over the pairs and the paired gap."""
    rows = []
    ordered = sorted(gaps, key=lambda item: (item[0], code_sort_key(item[2].behaviour)))
    for i, label, g in ordered:
        title = titles.get(g.behaviour, "")
        rows.append(
            f'<tr data-series="{i}"><th scope="row">{e(label)}</th>'
            f"<td><code>{e(g.behaviour)}</code> {e(title)}</td>"
            f'<td class="num">{e(pct(g.seed_rate))}</td><td class="num">{e(pct(g.deployed_rate))}</td>'
            f'<td class="num gap">{signed_points(g.delta)} pts <span class="ci">'
            f"[{signed_points(g.low)}, {signed_points(g.high)}]</span></td>"
            f'<td class="num">{g.n_pairs}</td></tr>'
        )
    head = ["Model", "Behaviour", "Seed pass rate", "Deployed pass rate", "Gap (95% CI)", "Pairs"]
    return sortable_table("gap-table", head, rows)


def drift_section(series: Sequence[Series], titles: Mapping[str, str]) -> tuple[str, str]:
    """The section and its navigation link; both empty when no multi-turn or paired case was scored."""
    data = drift_data(series)
    if not data:
        return "", ""
    parts = ['<section id="drift-section">', "<h2>Drift</h2>"]
    if data.lines:
        parts += [
            "<h3>Pass rate by turn</h3>",
            f'<p class="explain">{e(TURNS_EXPLAIN)}</p>',
            f'<div id="drift" class="chart" aria-label="pass rate by turn index">'
            f"{drift_chart(data.lines)}</div>",
            turns_table(data.lines),
        ]
    if data.gaps:
        parts += [
            '<h3 id="layout-gap">Instructed vs deployed</h3>',
            f'<p class="explain">{e(GAP_EXPLAIN)}</p>',
            gap_table(data.gaps, titles),
        ]
    parts.append("</section>")
    return "\n".join(parts), ' <a href="#drift-section">Drift</a>'
