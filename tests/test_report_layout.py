"""The report page's layout measured in real headless Chromium (Debian's `chromium`, driven by
Playwright; issue #31, point 6): the behaviour heatmap fits its box at 1,400 and 1,000 px (it scrolls
inside its own box, never clipping a column), names each behaviour on its row, shows each cell's case
count and marks the thin ones; a critical-gate cell lists a few codes, never broken mid-code, and the
rest behind "+N more"."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pytest_helmbench.execution.outcome import CaseResult
from pytest_helmbench.reporting.charts import LOW_N
from pytest_helmbench.reporting.html_report import render_report
from pytest_helmbench.storage.labels import Labels
from pytest_helmbench.storage.queries import ReportData, RunInfo
from tests.test_report import chromium_binary

playwright = pytest.importorskip("playwright.sync_api")

WIDTHS = (1400, 1000)
LONG_TITLE = "Recognises an imminent risk to life and hands off to emergency services at once"


def result(model: str, run: int, code: str, status: str, *, critical: bool = False) -> CaseResult:
    """One result of case `code` (P..-B..-S..-C1-PT..)."""
    parts = code.split("-")
    behaviour, scenario = "-".join(parts[:2]), "-".join(parts[:3])
    return CaseResult(
        model, run, code, parts[0], behaviour, scenario, "C1", 0, None, 0, parts[-1], 0, None, status,
        critical=critical,
    )  # fmt: skip


def report_data(models: list[str], n_behaviours: int, n_critical_failures: int = 0) -> ReportData:
    """Each model: behaviour b has 2*b passed and one failed case (P1-B1 rests on 3 cases), and the
    first model fails `n_critical_failures` critical cases of P1-B1."""
    now = datetime.now(UTC)
    runs, results = [], []
    for run, model in enumerate(models, start=1):
        runs.append(RunInfo(run, model, "completed", "s", now, now, 0, 0, 0, 0, 0, 0.0, 0.0, 0, 0, {}))
        for b in range(1, n_behaviours + 1):
            pillar = 1 + (b - 1) // 4
            for k in range(2 * b + 1):
                status = "failed" if k == 0 else "passed"
                results.append(result(model, run, f"P{pillar}-B{b}-S1-C1-PT{k + 1}", status))
        if run == 1:
            for k in range(n_critical_failures):
                results.append(result(model, run, f"P1-B1-S{k + 2}-C1-PT1", "failed", critical=True))
    titles = {f"P{1 + (b - 1) // 4}-B{b}": f"{LONG_TITLE} ({b})" for b in range(1, n_behaviours + 1)}
    pillars = {f"P{p}": f"Pillar {p} name" for p in range(1, n_behaviours // 4 + 2)}
    return ReportData(runs, results, [], Labels(pillar_names=pillars, behaviour_titles=titles))


MODELS = [f"provider-{i}/a-rather-long-model-name-{i}-instruct" for i in range(1, 7)]


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with playwright.sync_playwright() as p:
        found = p.chromium.launch(executable_path=chromium_binary(), headless=True)
        try:
            yield found
        finally:
            found.close()


def open_page(browser: object, path: Path, width: int) -> object:
    page = browser.new_page(viewport={"width": width, "height": 900})  # type: ignore[attr-defined]
    page.goto(path.resolve().as_uri())
    assert page.evaluate("document.documentElement.getAttribute('data-script')") == "ready"
    return page


MEASURE_HEATMAP = """() => {
  const box = document.getElementById('heatmap');
  box.scrollLeft = box.scrollWidth;  // scrolled to its right end: the last column must be in view
  const b = box.getBoundingClientRect();
  const cells = Array.from(box.querySelectorAll('rect.cell')).map(c => {
    const r = c.getBoundingClientRect();
    return {left: r.left, right: r.right, model: c.dataset.model, behaviour: c.dataset.behaviour};
  });
  const first = box.querySelector('rect.cell').getBoundingClientRect();
  box.scrollLeft = 0;
  const start = box.querySelector('rect.cell').getBoundingClientRect();
  return {box: {left: b.left, right: b.right, width: b.width}, viewport: window.innerWidth,
          scrolls: box.scrollWidth > box.clientWidth, cells, start: {left: start.left, right: start.right},
          scrolledFirst: {left: first.left}};
}"""


def write_page(tmp_path: Path, data: ReportData, name: str) -> Path:
    path = tmp_path / name
    path.write_text(render_report(data), encoding="utf-8")
    return path


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("n_models", [3, 6])
def test_the_heatmap_fits_its_box_and_clips_no_column(browser, tmp_path, width, n_models):
    """Each cell lies wholly inside the heatmap's box (scrolled to its end when it scrolls), the box
    inside the window: no column is cut off at 1,400 or 1,000 px, however many behaviours."""
    data = report_data(MODELS[:n_models], n_behaviours=24)
    page = open_page(browser, write_page(tmp_path, data, "wide.html"), width)
    found = page.evaluate(MEASURE_HEATMAP)
    box = found["box"]
    assert box["right"] <= found["viewport"] + 0.5 and box["left"] >= 0
    assert len(found["cells"]) == n_models * 24
    for cell in found["cells"]:
        assert box["left"] - 0.5 <= cell["left"] and cell["right"] <= box["right"] + 0.5, cell
    last = max(found["cells"], key=lambda c: c["right"])
    assert last["model"] == MODELS[n_models - 1]
    if n_models == 3:  # a few models fit without scrolling at either width
        assert not found["scrolls"]
    page.close()


def test_a_very_wide_heatmap_scrolls_inside_its_own_box(browser, tmp_path):
    models = [f"p{i}/model-{i}" for i in range(1, 19)]
    page = open_page(browser, write_page(tmp_path, report_data(models, 4), "many.html"), 1000)
    found = page.evaluate(MEASURE_HEATMAP)
    assert found["scrolls"], "eighteen models should not fit in 1,000 px"
    page_width = page.evaluate("document.getElementById('heatmap-section').scrollWidth")
    section = page.evaluate("document.getElementById('heatmap-section').clientWidth")
    assert page_width <= section  # the section itself never overflows: only the chart's box scrolls
    for cell in found["cells"]:  # at the box's right end, the last columns are whole
        if cell["model"] == models[-1]:
            assert cell["right"] <= found["box"]["right"] + 0.5
    page.close()


def test_behaviour_names_are_the_heatmaps_row_labels_and_cells_show_their_counts(browser, tmp_path):
    """The row of each behaviour carries its code and title (no separate table below), each cell its
    score and `n=` count on one row with its label, and a cell on fewer than LOW_N cases is marked."""
    data = report_data(MODELS[:2], n_behaviours=6)
    page = open_page(browser, write_page(tmp_path, data, "rows.html"), 1000)
    assert page.locator("#behaviour-table").count() == 0
    rows = page.evaluate(
        """() => {
      const box = document.getElementById('heatmap');
      const mid = r => (r.top + r.bottom) / 2;
      const codes = Array.from(box.querySelectorAll('text.heat-code'));
      return codes.map(code => {
        const y = mid(code.getBoundingClientRect());
        const title = Array.from(box.querySelectorAll('text.heat-title'))
          .find(t => Math.abs(mid(t.getBoundingClientRect()) - y) < 4);
        const cells = Array.from(box.querySelectorAll('g.cell-group')).filter(g => {
          const r = g.querySelector('rect.cell').getBoundingClientRect();
          return r.top <= y && y <= r.bottom;
        }).map(g => ({
          behaviour: g.querySelector('rect.cell').dataset.behaviour,
          low: g.querySelector('rect.cell').classList.contains('low-n'),
          value: g.querySelector('text.cell-value').textContent,
          n: g.querySelector('text.cell-n').textContent,
          dash: getComputedStyle(g.querySelector('rect.cell')).strokeDasharray,
        }));
        return {code: code.textContent, title: title ? title.textContent : null, cells};
      });
    }"""
    )
    assert [r["code"] for r in rows] == [f"P{1 + (b - 1) // 4}-B{b}" for b in range(1, 7)]
    for b, row in enumerate(rows, start=1):
        assert row["title"] and row["title"].startswith("Recognises an imminent risk"), row
        assert len(row["cells"]) == 2 and {c["behaviour"] for c in row["cells"]} == {row["code"]}
        n = 2 * b + 1
        for cell in row["cells"]:
            assert cell["value"] == f"{100 * (n - 1) / n:.1f}"  # every severity equal: the pass share
            assert cell["n"].startswith(f"n={n}")
            assert cell["low"] == (n < LOW_N) and (cell["dash"] != "none") == (n < LOW_N), cell
    pillars = page.locator("#heatmap text.heat-pillar").all_text_contents()
    assert pillars == ["P1 Pillar 1 name", "P2 Pillar 2 name"]
    page.close()


MEASURE_GATES = """() => {
  const cell = document.querySelector('#gates-table tbody tr td:nth-child(4)');
  const visible = Array.from(cell.querySelectorAll('code.case-code'))
    .filter(c => c.checkVisibility() && c.getClientRects().length > 0);
  const lineHeight = parseFloat(getComputedStyle(visible[0]).lineHeight) || 20;
  return {
    shown: visible.map(c => c.textContent),
    broken: visible.filter(c => c.getClientRects().length !== 1
      || c.getBoundingClientRect().height > 1.5 * lineHeight).map(c => c.textContent),
    more: cell.querySelector('details.more-codes > summary')?.textContent,
    height: cell.getBoundingClientRect().height,
  };
}"""


@pytest.mark.parametrize("width", WIDTHS)
def test_a_critical_gate_cell_lists_a_few_whole_codes_and_the_rest_on_demand(browser, tmp_path, width):
    data = report_data(MODELS[:2], n_behaviours=2, n_critical_failures=72)
    page = open_page(browser, write_page(tmp_path, data, "gates.html"), width)
    closed = page.evaluate(MEASURE_GATES)
    assert len(closed["shown"]) == 3 and closed["broken"] == [] and closed["more"] == "+69 more"
    assert closed["height"] < 120  # a few lines, not a wall of codes
    page.locator("#gates-table details.more-codes > summary").first.click()
    opened = page.evaluate(MEASURE_GATES)
    assert len(opened["shown"]) == 3 + 72 and opened["broken"] == []
    assert set(opened["shown"]) == {f"P1-B1-S{k + 2}-C1-PT1" for k in range(72)}
    page.close()
