"""The `helmbench report` page: one self-contained HTML file comparing models and runs.

The page is assembled from package data (``templates/report.html``, ``report.css``, ``report.js``)
and Python-built parts: tables (:mod:`.tables`) and charts drawn as inline SVG (:mod:`.charts`), so
every chart shows with script disabled, in a mail client or a printout. Every piece of model or
benchmark text is escaped where it is written. The one inline script only adds interactivity; a
Content-Security-Policy allows exactly that script (by its hash) and no network at all, so even a
mistake in escaping could neither run injected code nor fetch anything when the page is viewed.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from string import Template

from ..codes import code_sort_key
from ..execution.outcome import CaseResult
from ..redaction import redact, redact_data
from ..storage.queries import Labels, ReportData
from .analytics import ScoreKey, group_by, score
from .attribution import FactorEffect, attribution
from .charts import (
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
from .compare import Comparison, comparison_section
from .html_drift import drift_section
from .html_harm_care import harm_care_section
from .html_judges import judges_table
from .html_tables import (
    cost_table,
    failures_section,
    gates_table,
    runs_table,
    stability_table,
    summary_table,
)
from .items import ItemStats, items_section
from .series import Series, SeriesSummary, build_series, summaries, summarise, summary_line
from .svg import esc
from .unknown_numbers import UnknownNumber, unknown_numbers_section

# The command line prints a line per series next to the page; it may import both from here.
__all__ = ["MAX_FAILURES", "assets", "render_report", "summaries", "summary_line"]

#: Failures rendered in the drill-down at most (the rest are counted; `helmbench export` has them all).
MAX_FAILURES = 2000

FACTOR_NAMES = {"condition": "Condition", "user_context": "User context", "style": "Perturbation style"}


@dataclass(frozen=True)
class Assets:
    """The page skeleton, its stylesheet and its script, as shipped in ``templates/``."""

    page: Template
    css: str
    script: str

    @property
    def csp(self) -> str:
        """Only this page's own script (by hash), inline styles, no network of any kind."""
        digest = base64.b64encode(hashlib.sha256(self.script.encode("utf-8")).digest()).decode("ascii")
        return (
            f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; img-src data:; "
            "base-uri 'none'; form-action 'none'"
        )


@functools.cache
def assets() -> Assets:
    """Read the templates once per process (they are package data of this subpackage)."""
    folder = resources.files(__package__).joinpath("templates")
    css = folder.joinpath("report.css").read_text(encoding="utf-8")
    script = folder.joinpath("report.js").read_text(encoding="utf-8")
    if "</style" in css.lower() or "</script" in script.lower():
        raise ValueError("a report template would close its own <style> or <script> element")
    return Assets(Template(folder.joinpath("report.html").read_text(encoding="utf-8")), css, script)


# ---------------------------------------------------------------------------------------------
# Chart inputs


def _cell(results: list[CaseResult] | None) -> Cell | None:
    if not results:
        return None
    summary = score(results, intervals=False)
    return Cell(summary.score, summary.pass_rate, summary.n_scored, summary.n_errors)


def _matrix(series: list[Series], key: ScoreKey, columns: tuple[Column, ...]) -> Matrix:
    cells = []
    for s in series:
        groups = group_by(s.results, key)
        cells.append(tuple(_cell(groups.get(column.code)) for column in columns))
    return Matrix(tuple(s.label for s in series), columns, tuple(cells))


def behaviour_matrix(data: ReportData, series: list[Series]) -> Matrix:
    codes = sorted({r.behaviour for r in data.results}, key=code_sort_key)
    titles = data.labels.behaviour_titles
    return _matrix(series, "behaviour", tuple(Column(code, titles.get(code, code)) for code in codes))


def condition_matrix(data: ReportData, series: list[Series]) -> Matrix:
    severities = _min_severity(data.results)
    titles = data.labels.condition_titles
    columns = tuple(
        Column(code, titles.get(code, ""), severities[code]) for code in sorted(severities, key=code_sort_key)
    )
    return _matrix(series, "condition", columns)


def _min_severity(results: Iterable[CaseResult]) -> dict[str, int]:
    severities: dict[str, int] = {}
    for r in results:
        severities[r.condition] = min(severities.get(r.condition, r.condition_severity), r.condition_severity)
    return severities


def score_rows(sums: list[SeriesSummary]) -> list[ScoreRow]:
    return [
        ScoreRow(
            series=i,
            label=s.label,
            score=s.score.score,
            pass_rate=s.repeats.pass_rate,
            low=s.score.pass_rate_low if s.score.pass_rate_low is not None else 0.0,
            high=s.score.pass_rate_high if s.score.pass_rate_high is not None else 1.0,
            n=s.repeats.n_passed + s.repeats.n_failed,
            k=s.repeats.k_max,
            pass_k=s.repeats.pass_k if s.has_repeats else None,
        )
        for i, s in enumerate(sums)
    ]


def effects(labels: Labels, series: list[Series]) -> list[Effect]:
    """Every series' factor effects, grouped by factor, then level, then series."""
    found = [
        Effect(
            i,
            s.label,
            e.factor,
            FACTOR_NAMES[e.factor],
            e.level,
            _level_title(labels, e),
            e.delta,
            e.ci_low,
            e.ci_high,
            e.n_pairs,
        )
        for i, s in enumerate(series)
        for e in attribution(s.results)
    ]
    order = list(FACTOR_NAMES)
    return sorted(found, key=lambda e: (order.index(e.factor), code_sort_key(e.level), e.series))


def _level_title(labels: Labels, effect: FactorEffect) -> str:
    if effect.factor == "condition":
        return labels.condition_titles.get(effect.level, "")
    if effect.factor == "user_context":
        return labels.user_context_titles.get(effect.level, "")
    return ""


def cost_bars(series: list[Series]) -> list[CostBar]:
    return [
        CostBar(i, run.id, f"{run.model} (run {run.id})", run.cost_usd, run.judge_cost_usd)
        for i, s in enumerate(series)
        for run in s.runs
    ]


# ---------------------------------------------------------------------------------------------
# The page


def _model_filter(series: list[Series]) -> str:
    """Checkboxes the script reveals to hide models from every chart and table (nothing when one)."""
    if len(series) < 2:
        return ""
    boxes = "".join(
        f'<label><input type="checkbox" data-series="{i}" checked> {esc(s.label)}</label>'
        for i, s in enumerate(series)
    )
    return (
        f'<fieldset id="model-filter" class="controls" hidden><legend>Show models</legend>{boxes}</fieldset>'
    )


def _meta(data: ReportData, n_series: int) -> str:
    n_runs = len(data.runs)
    return (
        f"Generated {data.generated_at.strftime('%Y-%m-%d %H:%M UTC')} "
        f"from {esc(data.source or 'the database')}: "
        f"{n_series} model{'s' if n_series != 1 else ''}, {n_runs} run{'s' if n_runs != 1 else ''}, "
        f"{len(data.results)} results."
    )


def _redacted(data: ReportData) -> ReportData:
    """No credential on the page, even from a database written before options were redacted."""
    runs = [dataclasses.replace(run, options=redact_data(run.options)) for run in data.runs]
    return dataclasses.replace(data, runs=runs, source=redact(data.source))


def render_report(
    data: ReportData,
    *,
    max_failures: int = MAX_FAILURES,
    items: ItemStats | None = None,
    numbers: list[UnknownNumber] | None = None,
    comparisons: list[Comparison] | None = None,
) -> str:
    """The whole report page as one string (inline CSS, SVG and JS, nothing fetched at view time)."""
    data = _redacted(data)
    page = assets()
    series = build_series(data)
    sums = [summarise(s, data.coverage.get(s.model), data.human) for s in series]
    behaviours, conditions = behaviour_matrix(data, series), condition_matrix(data, series)
    failures_html, anchors = failures_section(series, data.failures, max_failures)
    any_repeats = any(s.has_repeats for s in sums)
    drift_html, drift_nav = drift_section(series, data.labels.behaviour_titles)
    return page.page.substitute(
        csp=page.csp,
        css=page.css,
        script=page.script,
        meta=_meta(data, len(series)),
        model_filter=_model_filter(series),
        repeats_note=" pass^k: share of cases whose every repeat passed." if any_repeats else "",
        summary_table=summary_table(sums),
        harm_care_section=harm_care_section(series, data.calibrations),
        items_section=items_section(items),
        numbers_section=unknown_numbers_section(numbers),
        comparison_section=comparison_section(comparisons),
        scores_chart=score_chart(score_rows(sums)),
        heatmap_chart=heatmap_chart(behaviours, data.labels.pillar_names),
        conditions_chart=conditions_chart(conditions),
        stability_table=stability_table(conditions),
        forest_chart=forest_chart(effects(data.labels, series)),
        drift_section=drift_html,
        drift_nav=drift_nav,
        gates_table=gates_table(sums, anchors),
        cost_chart=cost_chart(cost_bars(series)),
        cost_table=cost_table(data.runs),
        runs_table=runs_table(data.runs),
        judges_table=judges_table(data.runs, data.calibrations),
        failures=failures_html,
    )
