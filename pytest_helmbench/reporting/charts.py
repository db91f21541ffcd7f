"""The report's charts as inline SVG, drawn in Python so they need no script to be seen.

Each function takes plain records (built by :mod:`.html_report` from the analytics) and returns one
``<svg>`` (or a short note when there is nothing to draw). Every value is clamped into its axis, so
no mark leaves the viewBox; every label is escaped; every mark carries a ``<title>`` tooltip and
``data-*`` attributes naming its model (and behaviour, condition or factor level), which is all the
page's script uses to add hover highlighting and model filtering.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .svg import (
    GRID,
    INK,
    MUTED,
    clamp,
    clip,
    colour,
    document,
    el,
    empty_note,
    finite,
    line,
    percent,
    points,
    score_fill,
    text,
    tip,
)

LEFT = 240  # width of the row-label column
LABEL_CHARS = 34  # row labels longer than this are shortened (the tooltip has them whole)
NOTHING_SCORED = "No scored results."
HEAT_W, HEAT_H = 84, 40  # heatmap cell size


@dataclass(frozen=True)
class ScoreRow:
    """One series' headline numbers: score, pass rate with its 95% interval, and pass^k."""

    series: int
    label: str
    score: float | None  # 0..100
    pass_rate: float | None  # 0..1
    low: float
    high: float
    n: int  # scored attempts
    k: int = 1
    pass_k: float | None = None  # shown when k > 1


@dataclass(frozen=True)
class Cell:
    """One model's results in one behaviour or condition."""

    score: float | None
    pass_rate: float | None
    n: int  # scored attempts
    errors: int = 0


@dataclass(frozen=True)
class Column:
    """A behaviour or condition: its code, title and (for conditions) severity."""

    code: str
    title: str = ""
    severity: int | None = None


@dataclass(frozen=True)
class Matrix:
    """Series (rows) by behaviours or conditions (columns); a cell is None when nothing was run."""

    rows: tuple[str, ...]
    columns: tuple[Column, ...]
    cells: tuple[tuple[Cell | None, ...], ...]

    def cell(self, row: int, column: int) -> Cell | None:
        cells = self.cells[row] if row < len(self.cells) else ()
        return cells[column] if column < len(cells) else None


@dataclass(frozen=True)
class Effect:
    """One factor level's paired effect on one series' pass rate (-1..1) with its interval."""

    series: int
    label: str  # the series label
    factor: str  # condition, user_context or style
    factor_name: str
    level: str
    title: str
    delta: float
    low: float
    high: float
    n: int


@dataclass(frozen=True)
class CostBar:
    """One run's spending on model calls and judge calls (USD)."""

    series: int
    run: int
    label: str
    model_usd: float
    judge_usd: float


Scale = Callable[[float], float]


def _row_label(x: float, y: float, label: str, fill: str = INK, limit: int = LABEL_CHARS) -> str:
    return text(x, y, clip(label, limit), {"text-anchor": "end", "fill": fill}, tooltip=label)


def _fraction(value: float | None) -> float | None:
    value = finite(value)
    return None if value is None else clamp(value, 0.0, 1.0)


def _score(value: float | None) -> float | None:
    value = finite(value)
    return None if value is None else clamp(value, 0.0, 100.0)


def score_chart(rows: Sequence[ScoreRow]) -> str:
    """Score bars (0-100) per series, with the pass rate, its 95% interval and pass^k on the same axis."""
    if not rows:
        return empty_note(NOTHING_SCORED)
    row_h, plot_w, top = 30, 400, 24
    height = top + len(rows) * row_h + 26

    def xs(fraction: float) -> float:
        return LEFT + fraction * plot_w

    body = []
    for tick in (0, 25, 50, 75, 100):
        body.append(line(xs(tick / 100), top - 6, xs(tick / 100), top + len(rows) * row_h, {"stroke": GRID}))
        body.append(text(xs(tick / 100), top - 10, str(tick), {"text-anchor": "middle", "fill": MUTED}))
    for i, row in enumerate(rows):
        y = top + i * row_h + row_h / 2
        body.append(_row_label(LEFT - 8, y + 4, row.label))
        body.append(_score_marks(row, y, xs))
        body.append(text(xs(1) + 10, y + 4, _score_text(row), {"fill": INK}))
    legend = "bar: score (0-100); dot and line: pass rate % with 95% interval"
    legend += "; diamond: pass^k" if any(r.k > 1 and r.pass_k is not None for r in rows) else ""
    body.append(text(LEFT, height - 8, legend, {"fill": MUTED}))
    return document(xs(1) + 300, height, "score and pass rate per model", body, "score-chart")


def _score_text(row: ScoreRow) -> str:
    score = _score(row.score)
    if score is None:
        return "nothing scored"
    interval = f"[{percent(row.low)}\u2013{percent(row.high)}]"
    words = f"score {score:.1f} \u00b7 pass {percent(row.pass_rate)} {interval}"
    if row.k > 1 and row.pass_k is not None:
        words += f" \u00b7 pass^{row.k} {percent(row.pass_k)}"
    return words


def _score_marks(row: ScoreRow, y: float, xs: Scale) -> str:
    """The bar, interval, dot and diamond of one row (a dash when nothing was scored)."""
    score, rate = _score(row.score), _fraction(row.pass_rate)
    group = {"class": "rate", "data-model": row.label, "data-series": row.series}
    if score is None or rate is None:
        return el("g", group, text(xs(0) + 4, y + 4, "\u2013", {"fill": MUTED}))
    paint = colour(row.series)
    low, high = _fraction(row.low) or 0.0, _fraction(row.high)
    high = 1.0 if high is None else high
    marks = [
        el(
            "rect",
            {"class": "score-bar", "x": xs(0), "y": y - 8, "width": max(xs(score / 100) - xs(0), 0.5)}
            | {"height": 16, "fill": paint, "fill-opacity": 0.25},
            tip(f"{row.label}: score {score:.1f}"),
        ),
        line(xs(low), y, xs(high), y, {"class": "ci", "stroke": paint, "stroke-width": 2}),
        el(
            "circle",
            {"class": "point", "cx": xs(rate), "cy": float(y), "r": 5, "fill": paint},
            tip(f"{row.label}: pass rate {percent(rate)} [{percent(low)}, {percent(high)}] over {row.n}"),
        ),
    ]
    pass_k = _fraction(row.pass_k)
    if row.k > 1 and pass_k is not None:
        cx, d = xs(pass_k), 5
        path = f"M{cx:.1f} {y - d:.1f}L{cx + d:.1f} {y:.1f}L{cx:.1f} {y + d:.1f}L{cx - d:.1f} {y:.1f}Z"
        marks.append(
            el(
                "path",
                {"class": "passk", "d": path, "fill": "#fff", "stroke": paint, "stroke-width": 2},
                tip(f"{row.label}: pass^{row.k} {percent(pass_k)}"),
            )
        )
    return el("g", group, "".join(marks))


#: A heatmap cell resting on fewer scored cases than this is drawn faded with a dashed outline.
LOW_N = 10
HEAT_LABEL_CHARS = 40  # a model's column label longer than this is shortened (the tooltip has it whole)
HEAT_TITLE_CHARS = 34  # a behaviour's title beside its code, likewise
HEAT_LEFT = 320  # the behaviour labels' column
_CHAR_W = 6.6  # a generous width of one 12 px character, to leave room for rotated labels
_COS, _SIN = 0.766, 0.643  # the column labels are turned 40 degrees


def heatmap_chart(matrix: Matrix, pillar_names: dict[str, str] | None = None) -> str:
    """Behaviours (rows, grouped by pillar, code and title written beside them) by series (columns);
    each cell coloured by score (red 0 to green 100) with the score and how many cases it rests on.

    Behaviours run down the page, so many of them never widen the chart; the series' labels are
    turned, so a long model id costs height, not a column's width. A page wider than its box scrolls
    inside its own box (``.chart``)."""
    if not matrix.rows or not matrix.columns:
        return empty_note(NOTHING_SCORED)
    cw, ch = HEAT_W, HEAT_H
    labels = [clip(label, HEAT_LABEL_CHARS) for label in matrix.rows]
    top = 16 + max(len(label) for label in labels) * _CHAR_W * _SIN
    body = []
    for i, (label, shown) in enumerate(zip(matrix.rows, labels, strict=True)):
        x, y = HEAT_LEFT + i * cw + cw / 2, top - 8
        turn = {"transform": f"rotate(-40 {x:.1f} {y:.1f})", "font-weight": 600, "class": "heat-model"}
        body.append(el("g", {"data-series": i}, text(x, y, shown, turn, label)))
    y = top
    for pillar, columns in _by_pillar(matrix.columns):
        name = (pillar_names or {}).get(pillar, "")
        body.append(text(4, y + 18, f"{pillar} {name}".strip(), {"font-weight": 700, "class": "heat-pillar"}))
        y += 26
        for j, column in columns:
            body.append(_behaviour_label(column, y + ch / 2 + 4))
            for i, label in enumerate(matrix.rows):
                body.append(_heat_cell(i, label, column, matrix.cell(i, j), HEAT_LEFT + i * cw, y))
            y += ch
    legend = f"number: v2 pass score; n: scored cases; faded, dashed: fewer than {LOW_N} (read with care)"
    body.append(text(4, y + 18, legend, {"fill": MUTED}))
    last_label = len(labels[-1]) * _CHAR_W * _COS - cw / 2
    width = max(HEAT_LEFT + cw * len(matrix.rows) + max(last_label, 0.0) + 12, 4 + len(legend) * _CHAR_W)
    return document(width, y + 28, "score by behaviour and model", body, "heatmap")


def _by_pillar(columns: Sequence[Column]) -> list[tuple[str, list[tuple[int, Column]]]]:
    """The behaviours (with their index in the matrix) grouped by pillar, in the matrix's order."""
    groups: dict[str, list[tuple[int, Column]]] = {}
    for j, column in enumerate(columns):
        groups.setdefault(column.code.split("-")[0], []).append((j, column))
    return list(groups.items())


def _behaviour_label(column: Column, y: float) -> str:
    """The row's label: the behaviour's code, then its title (shortened; the tooltip has it whole)."""
    words = f"{column.code}: {column.title}" if column.title else column.code
    code = text(12, y, column.code, {"font-weight": 600, "class": "heat-code"}, words)
    if not column.title:
        return code
    return code + text(72, y, clip(column.title, HEAT_TITLE_CHARS), {"class": "heat-title"}, words)


def _heat_cell(row: int, label: str, column: Column, cell: Cell | None, x: float, y: float) -> str:
    w, h = HEAT_W, HEAT_H
    score = _score(cell.score) if cell else None
    name = f"{column.code} {column.title}".strip()
    n = cell.n if cell else 0
    low = score is not None and n < LOW_N
    if cell is None or score is None:
        detail = "nothing scored" + (f", {cell.errors} errors" if cell and cell.errors else "")
    else:
        detail = f"score {score:.1f}, pass rate {percent(cell.pass_rate)} over {n} scored"
        detail += f", {cell.errors} errors" if cell.errors else ""
        detail += f" (fewer than {LOW_N}: read with care)" if low else ""
    marks = {"stroke": INK, "stroke-dasharray": "3 2", "fill-opacity": 0.45} if low else {}
    rect = el(
        "rect",
        {"class": "cell low-n" if low else "cell", "x": x + 1, "y": y + 1, "width": w - 2, "height": h - 2}
        | {"rx": 3, "fill": score_fill(score), "data-model": label, "data-behaviour": column.code}
        | {"data-score": "" if score is None else f"{score:.2f}", "data-n": n}
        | marks,
        tip(f"{label} \u00b7 {name}: {detail}"),
    )
    value = "\u2013" if score is None else f"{score:.1f}"
    words = text(x + w / 2, y + h / 2 - 2, value, {"text-anchor": "middle", "class": "cell-value"})
    if cell is not None and score is not None:
        count = f"n={n}" + (" \u00b7 few" if low else "")
        style = {"text-anchor": "middle", "class": "cell-n", "font-size": 10, "fill": INK}
        words += text(x + w / 2, y + h / 2 + 11, count, style | ({"font-style": "italic"} if low else {}))
    return el("g", {"class": "cell-group", "data-series": row}, rect + words)


def conditions_chart(matrix: Matrix) -> str:
    """Grouped bars: each series' score under each condition (a safe model keeps its height)."""
    if not matrix.rows or not matrix.columns:
        return empty_note(NOTHING_SCORED)
    n_rows, n_cols = len(matrix.rows), len(matrix.columns)
    bw = max(12, min(36, 520 // (n_rows * n_cols)))
    gap, plot_h, top, left = 18, 180, 18, 44
    gw = n_rows * bw + gap
    width = max(left + gw * n_cols + 20, 420)
    height = top + plot_h + 44 + 18 * n_rows + 8
    base = top + plot_h
    body = []
    for tick in (0, 25, 50, 75, 100):
        y = base - plot_h * tick / 100
        body.append(line(left, y, left + gw * n_cols, y, {"stroke": GRID}))
        body.append(text(left - 6, y + 4, str(tick), {"text-anchor": "end", "fill": MUTED}))
    for j, column in enumerate(matrix.columns):
        x0 = left + j * gw + gap / 2
        centre = x0 + n_rows * bw / 2
        about = f"{column.code}: {column.title}" if column.title else column.code
        if column.severity is not None:
            about += f" (severity {column.severity})"
            body.append(
                text(centre, base + 30, f"sev {column.severity}", {"text-anchor": "middle", "fill": MUTED})
            )
        body.append(
            text(centre, base + 16, column.code, {"text-anchor": "middle", "font-weight": 600}, about)
        )
        for i, label in enumerate(matrix.rows):
            slot = _BarSlot(x0 + i * bw, bw, base, plot_h)
            body.append(_condition_bar(label, i, column, matrix.cell(i, j), slot))
    for i, label in enumerate(matrix.rows):
        y = base + 44 + i * 18
        body.append(el("rect", {"x": left, "y": y, "width": 12, "height": 12, "fill": colour(i)}))
        body.append(text(left + 18, y + 10, clip(label, 60), {"class": "legend-label"}, label))
    return document(width, height, "score per condition and model", body, "conditions")


@dataclass(frozen=True)
class _BarSlot:
    """Where one bar of the conditions chart stands: its left edge `x` and width `bw`, the baseline
    `base` (score 0) and the plot's height `plot_h` (score 100)."""

    x: float
    bw: int
    base: float
    plot_h: float


def _condition_bar(label: str, index: int, column: Column, cell: Cell | None, slot: _BarSlot) -> str:
    x, bw, base, plot_h = slot.x, slot.bw, slot.base, slot.plot_h
    score = _score(cell.score) if cell else None
    if cell is None or score is None:
        return text(x + bw / 2, base - 4, "\u2013", {"text-anchor": "middle", "fill": "#999"})
    height = max(plot_h * score / 100, 1.0)
    about = f" ({column.title})" if column.title else ""
    bar = el(
        "rect",
        {"class": "bar", "x": float(x), "y": base - height, "width": float(bw - 2), "height": height}
        | {"fill": colour(index), "data-series": index, "data-model": label, "data-condition": column.code}
        | {"data-score": f"{score:.2f}"},
        tip(f"{label} \u00b7 {column.code}{about}: score {score:.1f} over {cell.n} scored"),
    )
    if bw < 24:
        return bar
    value = text(x + (bw - 2) / 2, base - height - 4, f"{score:.0f}", {"text-anchor": "middle", "fill": INK})
    return bar + value


def forest_chart(effects: Sequence[Effect]) -> str:
    """Each factor level's paired change in pass rate (points) with its 95% interval, grouped by factor."""
    if not effects:
        return empty_note(
            "No factor could be paired with its baseline (each scenario needs its baseline case "
            "and a case differing in one factor)."
        )
    row_h, plot_w, top = 22, 360, 24
    n_groups = len({e.factor for e in effects})
    height = top + (len(effects) + n_groups) * row_h + 10
    x0 = LEFT + 60

    def xs(value: float) -> float:
        return x0 + (clamp(value, -1.0, 1.0) + 1) / 2 * plot_w

    body = []
    for tick in (-1.0, -0.5, 0.0, 0.5, 1.0):
        stroke = "#555" if tick == 0 else GRID
        body.append(line(xs(tick), top - 6, xs(tick), height - 6, {"stroke": stroke}))
        body.append(text(xs(tick), top - 10, points(tick), {"text-anchor": "middle", "fill": MUTED}))
    row, last = 0, None
    for effect in effects:
        if effect.factor != last:
            body.append(text(4, top + row * row_h + 15, effect.factor_name, {"font-weight": 600}))
            row, last = row + 1, effect.factor
        body.append(_effect_row(effect, top + row * row_h + row_h / 2, x0, xs))
        row += 1
    return document(x0 + plot_w + 230, height, "per-factor effects with 95% intervals", body, "forest")


def _effect_row(effect: Effect, y: float, x0: float, xs: Scale) -> str:
    paint = colour(effect.series)
    name = f"{effect.level} {effect.title}".strip()
    delta = finite(effect.delta) or 0.0
    low, high = finite(effect.low), finite(effect.high)
    low, high = (delta if low is None else low), (delta if high is None else high)
    words = f"{points(delta)} pts [{points(low)}, {points(high)}] n={effect.n}"
    marks = "".join(
        [
            line(xs(low), y, xs(high), y, {"class": "ci", "stroke": paint, "stroke-width": 2}),
            line(xs(low), y - 4, xs(low), y + 4, {"stroke": paint}),
            line(xs(high), y - 4, xs(high), y + 4, {"stroke": paint}),
            el(
                "circle",
                {"class": "point", "cx": xs(delta), "cy": float(y), "r": 4.5, "fill": paint},
                tip(f"{effect.label} \u00b7 {effect.factor_name} {name}: {words}"),
            ),
        ]
    )
    group = {"class": "effect", "data-series": effect.series, "data-model": effect.label}
    group |= {"data-factor": effect.factor}
    return "".join(
        [
            text(14, y + 4, clip(name, 22), tooltip=name),
            _row_label(x0 - 8, y + 4, effect.label, paint, limit=24),
            el("g", group | {"data-level": effect.level}, marks),
            text(x0 + 370, y + 4, words, {"fill": INK}),
        ]
    )


def _usd(value: float) -> float:
    return max(finite(value) or 0.0, 0.0)


def cost_chart(bars: Sequence[CostBar]) -> str:
    """Stacked bars per run: model calls (solid) and judge calls (light)."""
    if not bars:
        return empty_note("No run to show.")
    row_h, plot_w, top = 24, 360, 8
    amounts = [(_usd(bar.model_usd), _usd(bar.judge_usd)) for bar in bars]
    largest = max([model + judge for model, judge in amounts] + [1e-9])
    body = []
    for i, (bar, (model, judge)) in enumerate(zip(bars, amounts, strict=True)):
        y = top + i * row_h
        model_w, judge_w = plot_w * model / largest, plot_w * judge / largest
        paint = colour(bar.series)
        body.append(_row_label(LEFT - 8, y + 16, bar.label))
        marks = el(
            "rect",
            {"class": "cost-model", "x": LEFT, "y": y + 4, "width": max(model_w, 0.5), "height": row_h - 8}
            | {"fill": paint},
            tip(f"model calls ${model:.6f}"),
        ) + el(
            "rect",
            {"class": "cost-judge", "x": LEFT + model_w, "y": y + 4, "width": judge_w, "height": row_h - 8}
            | {"fill": paint, "fill-opacity": 0.4},
            tip(f"judge calls ${judge:.6f}"),
        )
        body.append(el("g", {"class": "cost", "data-run": bar.run, "data-series": bar.series}, marks))
        words = f"${model + judge:.4f}" + (f"  (judge ${judge:.4f})" if judge else "")
        body.append(text(LEFT + model_w + judge_w + 8, y + 16, words, {"fill": INK}))
    body.append(
        text(LEFT, top + len(bars) * row_h + 16, "solid: model calls; light: judge calls", {"fill": MUTED})
    )
    return document(LEFT + plot_w + 220, top + len(bars) * row_h + 26, "cost per run", body, "cost")
