"""The report's inline SVG charts: escaping, marks kept inside the viewBox, empty data, data labels."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import pytest

from pytest_helmbench.reporting.charts import (
    Cell,
    Column,
    CostBar,
    Effect,
    Matrix,
    ScoreRow,
    conditions_chart,
    cost_chart,
    forest_chart,
    heatmap_chart,
    score_chart,
)
from pytest_helmbench.reporting.svg import num, score_fill

NS = "{http://www.w3.org/2000/svg}"
EVIL = "<script>alert('x')</script>\"&<img src=x onerror=alert(1)>"
COORDINATES = {
    "x": "w",
    "x1": "w",
    "x2": "w",
    "cx": "w",
    "y": "h",
    "y1": "h",
    "y2": "h",
    "cy": "h",
}


def parse(svg: str) -> ET.Element:
    """The chart as XML: it must be well formed, or it would not be one self-contained element."""
    return ET.fromstring(svg)


def texts(root: ET.Element) -> list[str]:
    """The visible text of each <text> (not its <title> tooltip)."""
    return ["".join([t.text or ""] + [child.tail or "" for child in t]) for t in root.iter(f"{NS}text")]


def tooltips(root: ET.Element) -> list[str]:
    return [t.text or "" for t in root.iter(f"{NS}title")]


def assert_inside_viewbox(root: ET.Element) -> None:
    _, _, width, height = (float(v) for v in root.attrib["viewBox"].split())
    assert (float(root.attrib["width"]), float(root.attrib["height"])) == (width, height)
    size = {"w": width, "h": height}
    for node in root.iter():
        for name, axis in COORDINATES.items():
            if name in node.attrib:
                value = float(node.attrib[name])
                assert 0 <= value <= size[axis], f"{node.tag} {name}={value} outside 0..{size[axis]}"
        for name in ("width", "height"):
            if node is not root and name in node.attrib:
                assert 0 <= float(node.attrib[name]) <= size["w" if name == "width" else "h"]


def matrix(rows: list[str], columns: list[Column], cells: list[list[Cell | None]]) -> Matrix:
    return Matrix(tuple(rows), tuple(columns), tuple(tuple(row) for row in cells))


def test_model_ids_and_titles_are_escaped_text_in_every_chart() -> None:
    charts = [
        score_chart([ScoreRow(0, EVIL, 50.0, 0.5, 0.3, 0.7, 10, k=2, pass_k=0.4)]),
        heatmap_chart(matrix([EVIL], [Column(EVIL, EVIL)], [[Cell(50.0, 0.5, 10, 1)]])),
        conditions_chart(matrix([EVIL], [Column(EVIL, EVIL, 3)], [[Cell(50.0, 0.5, 10)]])),
        forest_chart([Effect(0, EVIL, "condition", EVIL, EVIL, EVIL, -0.2, -0.5, 0.1, 8)]),
        cost_chart([CostBar(0, 1, EVIL, 0.01, 0.02)]),
    ]
    for svg in charts:
        assert "<script" not in svg and "<img" not in svg and "&lt;script&gt;" in svg
        root = parse(svg)
        assert {node.tag for node in root.iter()} <= {
            f"{NS}{tag}" for tag in ("svg", "title", "text", "rect", "line", "circle", "path", "g")
        }
        labels = texts(root) + tooltips(root)
        assert any(EVIL in label for label in labels), labels  # shown whole, as text (in a tooltip)
        assert all(not key.startswith("on") for node in root.iter() for key in node.attrib)
        assert "href" not in svg and "url(" not in svg  # nothing refers outside the chart


@pytest.mark.parametrize("bad", [-50.0, 250.0, math.nan, math.inf, -math.inf])
def test_marks_stay_inside_the_viewbox_whatever_the_values(bad: float) -> None:
    rate = bad / 100
    charts = [
        score_chart(
            [ScoreRow(0, "a", bad, rate, rate, rate, 3, k=3, pass_k=rate), ScoreRow(1, "b", 100, 1, 0, 1, 1)]
        ),
        heatmap_chart(matrix(["a", "b"], [Column("P1-B1")], [[Cell(bad, rate, 3)], [None]])),
        conditions_chart(
            matrix(["a"], [Column("C1", severity=0), Column("C2")], [[Cell(bad, rate, 3), None]])
        ),
        forest_chart(
            [Effect(0, "a", "style", "Perturbation style", "slang", "", rate * 4, rate * 9, -rate * 9, 2)]
        ),
        cost_chart([CostBar(0, 1, "a (run 1)", bad, 0.5), CostBar(1, 2, "b (run 2)", 0.0, 0.0)]),
    ]
    for svg in charts:
        assert "nan" not in svg.lower() and "inf" not in svg.lower()
        assert_inside_viewbox(parse(svg))


def test_empty_data_gives_a_note_not_a_broken_chart() -> None:
    empty = [
        score_chart([]),
        heatmap_chart(matrix([], [], [])),
        heatmap_chart(matrix(["a"], [], [[]])),
        conditions_chart(matrix([], [Column("C1")], [])),
        forest_chart([]),
        cost_chart([]),
    ]
    for html in empty:
        assert "<svg" not in html and html.startswith('<p class="muted empty-chart">')
    assert "No factor could be paired" in forest_chart([])


def test_nothing_scored_cells_are_drawn_as_dashes() -> None:
    root = parse(
        heatmap_chart(matrix(["a/empty", "b/errors"], [Column("P1-B1")], [[None], [Cell(None, None, 0, 2)]]))
    )
    cells = [r for r in root.iter(f"{NS}rect") if r.get("class") == "cell"]
    assert [(c.get("data-model"), c.get("data-score")) for c in cells] == [("a/empty", ""), ("b/errors", "")]
    assert {c.get("fill") for c in cells} == {score_fill(None)}
    assert texts(root).count("\u2013") == 2 and "b/errors \u00b7 P1-B1: nothing scored, 2 errors" in tooltips(
        root
    )
    scores = parse(score_chart([ScoreRow(0, "a/empty", None, None, 0.0, 1.0, 0)]))
    assert "nothing scored" in texts(scores) and not list(scores.iter(f"{NS}circle"))


def test_one_model_charts_carry_their_data_labels() -> None:
    columns = [Column("P1-B1", "Answers plainly"), Column("P1-B2", "Hands off")]
    grid = matrix(["good/model"], columns, [[Cell(75.25, 0.75, 4), Cell(100.0, 1.0, 4)]])
    heat = parse(heatmap_chart(grid))
    assert {"good/model", "P1-B1", "P1-B2", "75.2", "100.0"} <= set(texts(heat))
    assert [r.get("data-score") for r in heat.iter(f"{NS}rect")] == ["75.25", "100.00"]
    tip = "good/model \u00b7 P1-B1 Answers plainly: score 75.2, pass rate 75.0% over 4 scored"
    assert f"{tip} (fewer than 10: read with care)" in tooltips(heat)
    # #31.6: the behaviour's title on its row, each cell's case count, a thin cell marked as such
    assert {"Answers plainly", "Hands off", "n=4 \u00b7 few", "P1"} <= set(texts(heat))
    assert [r.get("class") for r in heat.iter(f"{NS}rect")] == ["cell low-n"] * 2
    thick = parse(heatmap_chart(matrix(["m"], columns[:1], [[Cell(50.0, 0.5, 40)]]), {"P1": "Crisis care"}))
    assert {"n=40", "P1 Crisis care"} <= set(texts(thick)) and "\u00b7 few" not in " ".join(texts(thick))
    assert [r.get("class") for r in thick.iter(f"{NS}rect")] == ["cell"]

    conditions = matrix(
        ["good/model"], [Column("C1", "tutor", 0), Column("C2", "", 5)], [[Cell(80.0, 0.8, 5)] * 2]
    )
    bars = parse(conditions_chart(conditions))
    assert {"C1", "C2", "sev 0", "sev 5", "80", "good/model"} <= set(texts(bars))
    heights = [float(r.get("height", 0)) for r in bars.iter(f"{NS}rect") if r.get("class") == "bar"]
    assert heights == [pytest.approx(144.0)] * 2  # 80 % of the 180-pixel plot

    row = ScoreRow(0, "good/model", 75.7, 0.75, 0.505, 0.898, 16, k=2, pass_k=0.6875)
    scores = parse(score_chart([row]))
    assert "score 75.7 \u00b7 pass 75.0% [50.5%\u201389.8%] \u00b7 pass^2 68.8%" in texts(scores)
    assert len([p for p in scores.iter(f"{NS}path") if p.get("class") == "passk"]) == 1


def test_forest_groups_effects_by_factor() -> None:
    effects = [
        Effect(0, "m", "condition", "Condition", "C2", "terse", -0.25, -0.6, 0.1, 4),
        Effect(0, "m", "style", "Perturbation style", "slang", "", 0.0, -0.4, 0.4, 4),
    ]
    root = parse(forest_chart(effects))
    words = texts(root)
    assert words.index("Condition") < words.index("C2 terse") < words.index("Perturbation style")
    assert "-25.0 pts [-60.0, +10.0] n=4" in words
    groups = [g for g in root.iter(f"{NS}g") if g.get("class") == "effect"]
    assert [(g.get("data-factor"), g.get("data-level")) for g in groups] == [
        ("condition", "C2"),
        ("style", "slang"),
    ]


def test_numbers_are_written_short() -> None:
    assert [num(v) for v in (1.0, 2.5, 2.345, -0.001, 0.0)] == ["1", "2.5", "2.35", "0", "0"]
