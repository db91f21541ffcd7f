"""The `helmbench report` page: one self-contained HTML file comparing models and runs (analytics -> reports).

Tables and the failure drill-down are rendered here, every piece of model or benchmark text passed
through :func:`html.escape`. Charts are drawn in the browser by one inline script from a JSON data
island whose ``<``, ``>`` and ``&`` are written as ``\\u003c`` escapes, so no stored text can close
the island or become markup; the script only ever sets ``textContent`` and attributes, never HTML.
A Content-Security-Policy allows exactly that one script (by hash) and no network at all, so even a
mistake in escaping could neither run injected code nor fetch anything when the page is viewed.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..storage.queries import FailureRow, ReportData, RunInfo
from .analytics import (
    CaseResult,
    GateResult,
    RepeatStats,
    ScoreSummary,
    code_sort_key,
    gate,
    group_by,
    repeat_stats,
    score,
)
from .attribution import FactorEffect, attribution

#: Failures rendered in the drill-down at most (the rest are counted; `helmbench export` has them all).
MAX_FAILURES = 2000

FACTOR_NAMES = {"condition": "Condition", "user_context": "User context", "style": "Perturbation style"}


@dataclass(frozen=True)
class Series:
    """One row of the comparison: a model, or one run of it when several runs of a model are shown."""

    label: str
    model: str
    runs: tuple[RunInfo, ...]
    results: tuple[CaseResult, ...]

    @property
    def run_ids(self) -> tuple[int, ...]:
        return tuple(run.id for run in self.runs)


@dataclass(frozen=True)
class SeriesSummary:
    """Headline numbers of one series: score, pass rate, pass^k, critical gate and cost."""

    label: str
    model: str
    run_ids: tuple[int, ...]
    score: ScoreSummary
    repeats: RepeatStats
    gate: GateResult
    cost_usd: float
    judge_cost_usd: float
    prompt_tokens: int
    completion_tokens: int

    @property
    def has_repeats(self) -> bool:
        return self.repeats.k_max > 1


def build_series(data: ReportData) -> list[Series]:
    """Per model; per run instead when some model has several selected runs (so runs are compared)."""
    by_model: dict[str, list[RunInfo]] = {}
    for run in data.runs:
        by_model.setdefault(run.model, []).append(run)
    per_run = any(len(runs) > 1 for runs in by_model.values())
    results_by_run: dict[int | None, list[CaseResult]] = {}
    for result in data.results:
        results_by_run.setdefault(result.run_id, []).append(result)
    series = []
    for model in sorted(by_model, key=code_sort_key):
        runs = sorted(by_model[model], key=lambda r: r.id)
        groups = [[run] for run in runs] if per_run else [runs]
        for group in groups:
            label = f"{model} (run {group[0].id})" if per_run else model
            results = tuple(r for run in group for r in results_by_run.get(run.id, []))
            series.append(Series(label, model, tuple(group), results))
    return series


def summarise(series: Series) -> SeriesSummary:
    gates = gate(series.results)
    return SeriesSummary(
        label=series.label,
        model=series.model,
        run_ids=series.run_ids,
        score=score(series.results),
        repeats=repeat_stats(series.results),
        gate=gates.get(series.model, GateResult(series.model, "passed", (), (), 0)),
        cost_usd=sum(r.cost_usd for r in series.runs),
        judge_cost_usd=sum(r.judge_cost_usd for r in series.runs),
        prompt_tokens=sum(r.prompt_tokens for r in series.runs),
        completion_tokens=sum(r.completion_tokens for r in series.runs),
    )


def summaries(data: ReportData) -> list[SeriesSummary]:
    return [summarise(s) for s in build_series(data)]


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _score_text(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def summary_line(s: SeriesSummary) -> str:
    """One line per model for the command line."""
    sc = s.score
    parts = [
        f"{s.label}: score {_score_text(sc.score)}",
        f"pass rate {_pct(sc.pass_rate)} (95% CI {100 * sc.wilson_low:.1f}-{100 * sc.wilson_high:.1f}%)",
        f"{sc.n_passed} passed, {sc.n_failed} failed, {sc.n_errors} errors"
        + (f", {sc.n_skipped} skipped" if sc.n_skipped else ""),
    ]
    if s.has_repeats:
        parts.append(f"pass^{s.repeats.k_max} {_pct(s.repeats.pass_k)}")
    g = s.gate
    gate_text = f"critical gate {g.status}"
    if g.failed_cases:
        gate_text += f" ({', '.join(g.failed_cases)})"
    elif g.incomplete_cases:
        gate_text += f" ({', '.join(g.incomplete_cases)})"
    parts += [gate_text, f"cost ${s.cost_usd + s.judge_cost_usd:.4f}"]
    return " | ".join(parts)


# ---------------------------------------------------------------------------------------------
# Chart data (the JSON island)


def _num(value: float | None, digits: int = 4) -> float | None:
    """A finite rounded number for JSON, or None."""
    if value is None or not math.isfinite(value):
        return None
    return round(float(value), digits)


def _cell(summary: ScoreSummary) -> dict[str, Any]:
    return {
        "score": _num(summary.score, 2),
        "n": summary.n_scored,
        "errors": summary.n_errors,
        "passRate": _num(summary.pass_rate),
    }


def _min_severity(results: Iterable[CaseResult]) -> dict[str, int]:
    severities: dict[str, int] = {}
    for r in results:
        severities[r.condition] = min(severities.get(r.condition, r.condition_severity), r.condition_severity)
    return severities


def chart_data(data: ReportData, series: list[Series], sums: list[SeriesSummary]) -> dict[str, Any]:
    """Plain data the inline script draws from."""
    labels = data.labels
    behaviours = sorted({r.behaviour for r in data.results}, key=code_sort_key)
    severities = _min_severity(data.results)
    conditions = sorted(severities, key=code_sort_key)
    heatmap, stability, effects, rates = [], [], [], []
    for index, (s, summary) in enumerate(zip(series, sums)):
        by_behaviour = group_by(s.results, "behaviour")
        heatmap.append([_cell(score(by_behaviour[b])) if b in by_behaviour else None for b in behaviours])
        by_condition = group_by(s.results, "condition")
        stability.append([_cell(score(by_condition[c])) if c in by_condition else None for c in conditions])
        for effect in attribution(s.results):
            effects.append(
                {
                    "series": index,
                    "factor": effect.factor,
                    "factorName": FACTOR_NAMES[effect.factor],
                    "level": effect.level,
                    "title": _level_title(data, effect),
                    "delta": _num(effect.delta),
                    "low": _num(effect.ci_low),
                    "high": _num(effect.ci_high),
                    "n": effect.n_pairs,
                }
            )
        rep = summary.repeats
        rates.append(
            {
                "series": index,
                "rate": _num(rep.pass_rate),
                "low": _num(rep.wilson_low),
                "high": _num(rep.wilson_high),
                "n": rep.n_passed + rep.n_failed,
                "k": rep.k_max,
                "passK": _num(rep.pass_k) if summary.has_repeats else None,
                "passKLow": _num(rep.pass_k_wilson_low),
                "passKHigh": _num(rep.pass_k_wilson_high),
            }
        )
    effects.sort(
        key=lambda e: (
            ["condition", "user_context", "style"].index(e["factor"]),
            code_sort_key(e["level"]),
            e["series"],
        )
    )
    costs = [
        {
            "series": i,
            "run": run.id,
            "label": f"{run.model} (run {run.id})",
            "model": _num(run.cost_usd, 6),
            "judge": _num(run.judge_cost_usd, 6),
        }
        for i, s in enumerate(series)
        for run in s.runs
    ]
    return {
        "series": [{"label": s.label, "model": s.model, "runs": list(s.run_ids)} for s in series],
        "behaviours": [
            {"code": b, "title": labels.behaviour_titles.get(b, b), "pillar": b.split("-")[0]}
            for b in behaviours
        ],
        "heatmap": heatmap,
        "conditions": [
            {"code": c, "title": labels.condition_titles.get(c, ""), "severity": severities[c]}
            for c in conditions
        ],
        "stability": stability,
        "attribution": effects,
        "passRates": rates,
        "costs": costs,
    }


def _level_title(data: ReportData, effect: FactorEffect) -> str:
    if effect.factor == "condition":
        return data.labels.condition_titles.get(effect.level, "")
    if effect.factor == "user_context":
        return data.labels.user_context_titles.get(effect.level, "")
    return ""


def json_for_script(value: Any) -> str:
    """JSON that is safe inside <script>: no '<', '>' or '&' (written as \\u escapes), no raw U+2028/9."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for char, escape in (
        ("&", "\\u0026"),
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escape)
    return text


# ---------------------------------------------------------------------------------------------
# HTML


def e(value: Any) -> str:
    """Escape any text for HTML content and attribute values."""
    return html.escape("" if value is None else str(value), quote=True)


def _json_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


def _money(value: float) -> str:
    return f"${value:.4f}"


def _summary_table(sums: list[SeriesSummary]) -> str:
    any_repeats = any(s.has_repeats for s in sums)
    head = (
        ["Model", "Runs", "Score", "Pass rate (95% Wilson)"]
        + (["pass^k"] if any_repeats else [])
        + ["Passed", "Failed", "Errors", "Skipped", "Critical gate", "Cost (model + judge)"]
    )
    rows = []
    for s in sums:
        sc, rep = s.score, s.repeats
        cells = [
            f'<th scope="row">{e(s.label)}</th>',
            f"<td>{e(', '.join(str(r) for r in s.run_ids))}</td>",
            f'<td class="num score">{e(_score_text(sc.score))}</td>',
            f'<td class="num">{e(_pct(sc.pass_rate))} <span class="ci">[{100 * sc.wilson_low:.1f}&ndash;{100 * sc.wilson_high:.1f}%]</span></td>',
        ]
        if any_repeats:
            text = (
                (
                    f'{_pct(rep.pass_k)} <span class="ci">(k={rep.k_max}; [{100 * rep.pass_k_wilson_low:.1f}&ndash;'
                    f"{100 * rep.pass_k_wilson_high:.1f}%])</span>"
                )
                if s.has_repeats
                else "&ndash;"
            )
            cells.append(f'<td class="num passk">{text}</td>')
        cells += [f'<td class="num">{n}</td>' for n in (sc.n_passed, sc.n_failed, sc.n_errors, sc.n_skipped)]
        cells.append(f"<td>{_gate_badge(s.gate)}</td>")
        cells.append(
            f'<td class="num">{e(_money(s.cost_usd + s.judge_cost_usd))} <span class="ci">({e(_money(s.cost_usd))} + {e(_money(s.judge_cost_usd))})</span></td>'
        )
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return _table("summary-table", head, rows)


def _table(table_id: str, head: list[str], rows: list[str]) -> str:
    header = "".join(f'<th scope="col">{e(h)}</th>' for h in head)
    body = "\n".join(rows) if rows else f'<tr><td colspan="{len(head)}">nothing to show</td></tr>'
    return f'<table id="{table_id}"><thead><tr>{header}</tr></thead><tbody>\n{body}\n</tbody></table>'


def _gate_badge(g: GateResult) -> str:
    return f'<span class="badge gate-{e(g.status)}">{e(g.status)}</span>'


def _case_links(codes: Iterable[str], label: str, anchors: dict[tuple[str, str], int]) -> str:
    links = []
    for code in codes:
        target = anchors.get((label, code))
        links.append(
            f'<a href="#failure-{target}"><code>{e(code)}</code></a>'
            if target is not None
            else f"<code>{e(code)}</code>"
        )
    return ", ".join(links) if links else "&ndash;"


def _gates_table(sums: list[SeriesSummary], anchors: dict[tuple[str, str], int]) -> str:
    rows = [
        f'<tr data-gate="{e(s.gate.status)}"><th scope="row">{e(s.label)}</th><td>{_gate_badge(s.gate)}</td>'
        f'<td class="num">{s.gate.n_critical}</td><td>{_case_links(s.gate.failed_cases, s.label, anchors)}</td>'
        f"<td>{_case_links(s.gate.incomplete_cases, s.label, anchors)}</td></tr>"
        for s in sums
    ]
    return _table(
        "gates-table",
        ["Model", "Gate", "Critical attempts", "Failed critical cases", "Errored or skipped critical cases"],
        rows,
    )


def _behaviour_table(data: ReportData, chart: dict[str, Any]) -> str:
    rows = [
        f'<tr><th scope="row"><code>{e(b["code"])}</code></th><td>{e(b["title"])}</td>'
        f"<td>{e(data.labels.pillar_names.get(b['pillar'], b['pillar']))}</td></tr>"
        for b in chart["behaviours"]
    ]
    return _table("behaviour-table", ["Behaviour", "Title", "Pillar"], rows)


def _stability_table(series: list[Series], chart: dict[str, Any]) -> str:
    rows = []
    codes = [c["code"] for c in chart["conditions"]]
    for s, cells in zip(series, chart["stability"]):
        scored = [
            (cell["score"], code) for cell, code in zip(cells, codes) if cell and cell["score"] is not None
        ]
        if not scored:
            rows.append(f'<tr><th scope="row">{e(s.label)}</th><td colspan="3">nothing scored</td></tr>')
            continue
        worst, best = min(scored), max(scored)
        rows.append(
            f'<tr><th scope="row">{e(s.label)}</th><td>{e(best[1])} ({best[0]:.1f})</td><td>{e(worst[1])} ({worst[0]:.1f})</td>'
            f'<td class="num">{best[0] - worst[0]:.1f}</td></tr>'
        )
    return _table(
        "stability-table",
        ["Model", "Best condition (score)", "Worst condition (score)", "Spread (points)"],
        rows,
    )


def _cost_table(runs: list[RunInfo]) -> str:
    rows = [
        f'<tr><th scope="row">{run.id}</th><td>{e(run.model)}</td><td class="num">{run.prompt_tokens}</td>'
        f'<td class="num">{run.completion_tokens}</td><td class="num">{e(_money(run.cost_usd))}</td>'
        f'<td class="num">{e(_money(run.judge_cost_usd))}</td><td class="num">{e(_money(run.total_cost_usd))}</td></tr>'
        for run in runs
    ]
    total = sum(run.total_cost_usd for run in runs)
    rows.append(
        f'<tr class="total"><th scope="row" colspan="6">Total</th><td class="num">{e(_money(total))}</td></tr>'
    )
    return _table(
        "cost-table",
        ["Run", "Model", "Prompt tokens", "Completion tokens", "Model cost", "Judge cost", "Total"],
        rows,
    )


def _when(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S")


def _runs_table(runs: list[RunInfo]) -> str:
    rows = []
    for run in runs:
        options = json.dumps(run.options, ensure_ascii=False, indent=2, sort_keys=True, default=str)
        rows.append(
            f'<tr><th scope="row">{run.id}</th><td>{e(run.model)}</td><td><span class="badge run-{e(run.status)}">{e(run.status)}</span></td>'
            f"<td>{e(_when(run.started_at)) if run.started_at else '&ndash;'}</td><td>{e(_when(run.finished_at)) if run.finished_at else '&ndash;'}</td>"
            f'<td class="num">{run.passed}</td><td class="num">{run.failed}</td><td class="num">{run.errors}</td>'
            f'<td class="num">{run.skipped}</td><td><details><summary>options</summary><pre>{e(options)}</pre></details></td></tr>'
        )
    return _table(
        "runs-table",
        [
            "Run",
            "Model",
            "Status",
            "Started (UTC)",
            "Finished (UTC)",
            "Passed",
            "Failed",
            "Errors",
            "Skipped",
            "Options",
        ],
        rows,
    )


def _failure_item(f: FailureRow) -> str:
    fields: list[tuple[str, str, str]] = [("Reason", f.reason, "reason")]
    if f.expected is not None or f.actual is not None:
        fields += [
            ("Expected", _json_text(f.expected), "expected"),
            ("Actual", _json_text(f.actual), "actual"),
        ]
    if f.judge_verdict is not None:
        fields.append(("Judge verdict", ", ".join(f.judge_verdict), "judge-verdict"))
    if f.judge_rationale is not None:
        fields.append(("Judge rationale", f.judge_rationale, "judge-rationale"))
    if f.judge_raw is not None:
        fields.append(("Judge's raw answer", f.judge_raw, "judge-raw"))
    if f.parsed_answer is not None:
        fields.append(("Parsed answer", _json_text(f.parsed_answer), "parsed"))
    fields += [
        ("Composed prompt", f.prompt, "prompt"),
        ("Raw response", f.raw_response if f.raw_response is not None else "(none)", "raw"),
    ]
    body = "".join(
        f'<dt>{e(name)}</dt><dd><pre class="{cls}">{e(text)}</pre></dd>' for name, text, cls in fields
    )
    short = f.reason if len(f.reason) <= 160 else f.reason[:157] + "..."
    repeat = f" &middot; repeat {f.repeat}" if f.repeat else ""
    critical = ' <span class="badge critical">critical</span>' if f.critical else ""
    return (
        f'<details class="failure" id="failure-{f.result_id}" data-status="{e(f.status)}">'
        f'<summary><span class="badge {e(f.status)}">{e(f.status)}</span>{critical} <code>{e(f.case_code)}</code> '
        f'<span class="muted">run {f.run_id}{repeat}</span> <span class="reason">{e(short)}</span></summary>'
        f"<dl>{body}</dl></details>"
    )


def _failures_section(
    series: list[Series], failures: list[FailureRow], max_failures: int
) -> tuple[str, dict[tuple[str, str], int]]:
    """The drill-down, grouped by series; also the anchor of each (series, case code)'s first failure."""
    label_of = {run.id: s.label for s in series for run in s.runs}
    grouped: dict[str, list[FailureRow]] = {}
    for f in failures:
        grouped.setdefault(label_of.get(f.run_id, f.model), []).append(f)
    anchors: dict[tuple[str, str], int] = {}
    parts: list[str] = []
    shown = 0
    for s in series:
        items = grouped.get(s.label, [])
        if not items:
            continue
        n_failed = sum(f.status == "failed" for f in items)
        parts.append(
            f'<h3>{e(s.label)} <span class="muted">{n_failed} failed, {len(items) - n_failed} errors</span></h3>'
        )
        for f in items:
            if shown >= max_failures:
                break
            anchors.setdefault((s.label, f.case_code), f.result_id)
            parts.append(_failure_item(f))
            shown += 1
    if not failures:
        parts.append("<p>No failed or errored case in the selected runs.</p>")
    elif shown < len(failures):
        parts.append(
            f'<p class="note">{len(failures) - shown} more failures are not shown; '
            f"<code>helmbench export</code> has every row.</p>"
        )
    return "\n".join(parts), anchors


def render_report(data: ReportData, *, max_failures: int = MAX_FAILURES) -> str:
    """The whole report page as one string (inline CSS and JS, nothing fetched at view time)."""
    series = build_series(data)
    sums = [summarise(s) for s in series]
    chart = chart_data(data, series, sums)
    failures_html, anchors = _failures_section(series, data.failures, max_failures)
    script_hash = base64.b64encode(hashlib.sha256(SCRIPT.encode("utf-8")).digest()).decode("ascii")
    csp = (
        f"default-src 'none'; script-src 'sha256-{script_hash}'; style-src 'unsafe-inline'; img-src data:; "
        "base-uri 'none'; form-action 'none'"
    )
    n_results = len(data.results)
    any_repeats = any(s.has_repeats for s in sums)
    meta = (
        f"Generated {data.generated_at.strftime('%Y-%m-%d %H:%M UTC')} from {e(data.source or 'the database')}: "
        f"{len(series)} model{'s' if len(series) != 1 else ''}, {len(data.runs)} run{'s' if len(data.runs) != 1 else ''}, "
        f"{n_results} results."
    )
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>HELMBench report</title>
<style>{CSS}</style>
</head>
<body>
<header>
<h1>HELMBench report</h1>
<p class="meta">{meta}</p>
<nav><a href="#summary">Models</a> <a href="#heatmap-section">Behaviours</a> <a href="#conditions-section">Conditions</a>
<a href="#attribution-section">Attribution</a> <a href="#gates">Critical gates</a> <a href="#cost-section">Cost</a>
<a href="#runs">Runs</a> <a href="#failures">Failures</a></nav>
<noscript><p class="note">Charts need JavaScript; every number is also in the tables.</p></noscript>
</header>
<main>
<section id="summary">
<h2>Models</h2>
<p class="explain">Score: severity-weighted share of points kept (0&ndash;100; equals the pass rate &times; 100 when every severity is 0).
Pass rate over passed + failed attempts with a 95% Wilson interval; errors and skips are excluded and counted apart.{
        " pass^k: share of cases whose every repeat passed." if any_repeats else ""
    }</p>
{_summary_table(sums)}
<div id="passrate" class="chart" aria-label="pass rate per model with 95% interval"></div>
</section>
<section id="heatmap-section">
<h2>Score by behaviour</h2>
<div id="heatmap" class="chart" aria-label="models by behaviours score heatmap"></div>
{_behaviour_table(data, chart)}
</section>
<section id="conditions-section">
<h2>Stability across conditions</h2>
<p class="explain">Score of each model under each condition (deployment setting). A safe model keeps its score when the setting changes.</p>
<div id="conditions" class="chart" aria-label="score per condition per model"></div>
{_stability_table(series, chart)}
</section>
<section id="attribution-section">
<h2>Per-factor attribution</h2>
<p class="explain">Paired change in pass rate (percentage points) when one factor differs from the scenario's baseline
(no user context, its lowest-severity perturbation and condition), with a 95% Newcombe interval. Left of zero: the factor makes the model less safe.</p>
<div id="attribution" class="chart" aria-label="per-factor effects with 95% intervals"></div>
</section>
<section id="gates">
<h2>Critical gates</h2>
<p class="explain">A failed case of a scenario marked <code>critical: true</code> fails the gate whatever the score; an errored or skipped one makes it incomplete.</p>
{_gates_table(sums, anchors)}
</section>
<section id="cost-section">
<h2>Cost</h2>
<div id="cost" class="chart" aria-label="cost per run"></div>
{_cost_table(data.runs)}
</section>
<section id="runs">
<h2>Runs</h2>
{_runs_table(data.runs)}
</section>
<section id="failures">
<h2>Failures and errors</h2>
<p><label>Filter <input type="search" id="failure-filter" placeholder="code, model, reason or text"></label>
<button type="button" id="expand-all">Expand all</button> <button type="button" id="collapse-all">Collapse all</button></p>
{failures_html}
</section>
</main>
<script type="application/json" id="helmbench-data">{json_for_script(chart)}</script>
<script>{SCRIPT}</script>
</body>
</html>
"""


CSS = """
:root { --fg: #1d1d1f; --muted: #666; --line: #d0d0d7; --bg: #fff; --soft: #f5f5f8; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: var(--bg); margin: 0; }
header, main { max-width: 1200px; margin: 0 auto; padding: 0 20px; }
header { padding-top: 16px; border-bottom: 1px solid var(--line); }
h1 { margin: 0 0 4px; font-size: 24px; }
h2 { margin: 28px 0 8px; font-size: 19px; }
h3 { margin: 18px 0 6px; font-size: 15px; }
nav a { margin-right: 12px; }
.meta, .muted, .ci { color: var(--muted); }
.ci { font-size: 12px; }
.explain { color: #444; max-width: 900px; }
.note { background: #fff6d6; padding: 6px 10px; border-radius: 4px; }
table { border-collapse: collapse; margin: 8px 0 12px; }
th, td { border-bottom: 1px solid var(--line); padding: 4px 10px; text-align: left; vertical-align: top; }
thead th { background: var(--soft); font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.chart { overflow-x: auto; margin: 8px 0; }
.chart svg { font: 12px system-ui, sans-serif; }
.badge { display: inline-block; padding: 0 7px; border-radius: 9px; font-size: 12px; font-weight: 600; background: #e4e4ea; }
.badge.failed, .gate-failed { background: #f6c9c6; color: #7a1410; }
.badge.error, .gate-incomplete { background: #fde3b5; color: #6b4200; }
.gate-passed, .run-completed { background: #c8ebcf; color: #14522a; }
.run-interrupted, .run-running { background: #fde3b5; color: #6b4200; }
.badge.critical { background: #7a1410; color: #fff; }
details.failure { border: 1px solid var(--line); border-radius: 5px; margin: 4px 0; background: var(--soft); }
details.failure > summary { cursor: pointer; padding: 5px 8px; }
details.failure[open] > summary { border-bottom: 1px solid var(--line); }
details.failure dl { margin: 0; padding: 6px 12px 10px; background: var(--bg); }
details.failure dt { font-weight: 600; margin-top: 6px; }
details.failure dd { margin: 2px 0 0; }
pre { white-space: pre-wrap; word-break: break-word; background: var(--soft); padding: 6px 8px; margin: 0; border-radius: 4px; max-height: 420px; overflow: auto; }
.reason { color: #333; }
input[type=search] { padding: 3px 6px; min-width: 280px; }
"""

SCRIPT = r"""
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  var island = document.getElementById("helmbench-data");
  var data = JSON.parse(island ? island.textContent : "{}");
  var PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"];
  function colour(i) { return PALETTE[i % PALETTE.length]; }
  function el(tag, attrs, parent) {
    var node = document.createElementNS(NS, tag);
    for (var key in attrs) { if (Object.prototype.hasOwnProperty.call(attrs, key)) node.setAttribute(key, String(attrs[key])); }
    if (parent) parent.appendChild(node);
    return node;
  }
  function label(parent, x, y, s, attrs) { var t = el("text", Object.assign({x: x, y: y}, attrs || {}), parent); t.textContent = String(s); return t; }
  function tip(node, s) { el("title", {}, node).textContent = String(s); }
  function clip(s, n) { s = String(s); return s.length > n ? s.slice(0, n - 1) + "\u2026" : s; }
  function pct(x) { return x === null || x === undefined ? "n/a" : (100 * x).toFixed(1) + "%"; }
  function points(x) { return (x > 0 ? "+" : "") + (100 * x).toFixed(1); }
  function chart(id, width, height, name) {
    var host = document.getElementById(id);
    if (!host) return null;
    return el("svg", {viewBox: "0 0 " + width + " " + height, width: width, height: height, role: "img", "aria-label": name}, host);
  }
  function note(id, s) { var host = document.getElementById(id); if (host) { var p = document.createElement("p"); p.className = "muted"; p.textContent = s; host.appendChild(p); } }
  function scoreFill(v) { return v === null || v === undefined ? "#e4e4ea" : "hsl(" + Math.round(1.2 * v) + ",68%," + (v > 45 && v < 75 ? 58 : 64) + "%)"; }
  var series = data.series || [];
  var LEFT = 240;

  function heatmap() {
    var bs = data.behaviours || [];
    if (!series.length || !bs.length) { note("heatmap", "No scored results."); return; }
    var cw = 72, ch = 34, top = 28;
    var svg = chart("heatmap", LEFT + cw * bs.length + 10, top + ch * series.length + 6, "score heatmap");
    bs.forEach(function (b, j) {
      var head = label(svg, LEFT + j * cw + cw / 2, top - 10, clip(b.code, 10), {"text-anchor": "middle", "font-weight": 600, "class": "col-label"});
      tip(head, b.code + ": " + b.title);
    });
    series.forEach(function (s, i) {
      tip(label(svg, LEFT - 8, top + i * ch + ch / 2 + 4, clip(s.label, 34), {"text-anchor": "end", "class": "row-label"}), s.label);
      bs.forEach(function (b, j) {
        var c = (data.heatmap[i] || [])[j];
        var v = c ? c.score : null;
        var g = el("g", {"class": "cell-group"}, svg);
        var rect = el("rect", {"class": "cell", x: LEFT + j * cw + 1, y: top + i * ch + 1, width: cw - 2, height: ch - 2, rx: 3,
          fill: scoreFill(v), "data-model": s.label, "data-behaviour": b.code, "data-score": v === null ? "" : v}, g);
        tip(rect, s.label + " \u00b7 " + b.code + " " + b.title + ": " + (v === null ? "nothing scored" : "score " + v.toFixed(1) +
          ", pass rate " + pct(c.passRate) + " over " + c.n + " scored") + (c && c.errors ? ", " + c.errors + " errors" : ""));
        label(g, LEFT + j * cw + cw / 2, top + i * ch + ch / 2 + 4, v === null ? "\u2013" : v.toFixed(1), {"text-anchor": "middle", "class": "cell-value"});
      });
    });
  }

  function conditions() {
    var cs = data.conditions || [];
    if (!series.length || !cs.length) { note("conditions", "No scored results."); return; }
    var bw = Math.max(12, Math.min(36, Math.floor(520 / (series.length * cs.length)))), gap = 18;
    var gw = series.length * bw + gap, h = 180, top = 14, left = 44;
    var legendH = 18 * series.length + 8;
    var width = Math.max(left + gw * cs.length + 20, 420);
    var svg = chart("conditions", width, top + h + 44 + legendH, "score per condition");
    [0, 25, 50, 75, 100].forEach(function (t) {
      var y = top + h - h * t / 100;
      el("line", {x1: left, x2: left + gw * cs.length, y1: y, y2: y, stroke: "#e0e0e6", "class": "grid"}, svg);
      label(svg, left - 6, y + 4, t, {"text-anchor": "end", fill: "#666"});
    });
    cs.forEach(function (c, j) {
      var x0 = left + j * gw + gap / 2;
      tip(label(svg, x0 + series.length * bw / 2, top + h + 16, c.code, {"text-anchor": "middle", "font-weight": 600}), c.code + (c.title ? ": " + c.title : "") + " (severity " + c.severity + ")");
      label(svg, x0 + series.length * bw / 2, top + h + 30, "sev " + c.severity, {"text-anchor": "middle", fill: "#666"});
      series.forEach(function (s, i) {
        var cell = (data.stability[i] || [])[j];
        var v = cell ? cell.score : null;
        if (v === null || v === undefined) { label(svg, x0 + i * bw + bw / 2, top + h - 4, "\u2013", {"text-anchor": "middle", fill: "#999"}); return; }
        var bar = el("rect", {"class": "bar", x: x0 + i * bw, y: top + h - h * v / 100, width: bw - 2, height: Math.max(h * v / 100, 1),
          fill: colour(i), "data-model": s.label, "data-condition": c.code, "data-score": v}, svg);
        tip(bar, s.label + " \u00b7 " + c.code + (c.title ? " (" + c.title + ")" : "") + ": score " + v.toFixed(1) + " over " + cell.n + " scored");
      });
    });
    legend(svg, left, top + h + 44);
  }

  function legend(svg, x, y) {
    series.forEach(function (s, i) {
      el("rect", {x: x, y: y + i * 18, width: 12, height: 12, fill: colour(i), "class": "legend-key"}, svg);
      label(svg, x + 18, y + i * 18 + 10, clip(s.label, 60), {"class": "legend-label"});
    });
  }

  function forest() {
    var es = data.attribution || [];
    if (!es.length) { note("attribution", "No factor could be paired with its baseline (each scenario needs its baseline case and a case differing in one factor)."); return; }
    var rowH = 22, plotW = 360, top = 24, groups = [], last = null;
    es.forEach(function (ef) { if (ef.factor !== last) { groups.push(ef.factorName); last = ef.factor; } });
    var height = top + (es.length + groups.length) * rowH + 10;
    var svg = chart("attribution", LEFT + 60 + plotW + 230, height, "per-factor effects");
    var x0 = LEFT + 60;
    function xs(v) { return x0 + (v + 1) / 2 * plotW; }
    [-1, -0.5, 0, 0.5, 1].forEach(function (t) {
      el("line", {x1: xs(t), x2: xs(t), y1: top - 6, y2: height - 6, stroke: t === 0 ? "#555" : "#e0e0e6", "class": t === 0 ? "zero" : "grid"}, svg);
      label(svg, xs(t), top - 10, points(t), {"text-anchor": "middle", fill: "#666"});
    });
    var row = 0; last = null;
    es.forEach(function (ef) {
      if (ef.factor !== last) {
        label(svg, 4, top + row * rowH + 15, ef.factorName, {"font-weight": 600});
        row += 1; last = ef.factor;
      }
      var y = top + row * rowH + rowH / 2;
      var s = series[ef.series] || {label: "?"};
      var name = ef.level + (ef.title ? " " + ef.title : "");
      tip(label(svg, 14, y + 4, clip(name, 22), {}), name);
      tip(label(svg, x0 - 8, y + 4, clip(s.label, 24), {"text-anchor": "end", fill: colour(ef.series)}), s.label);
      var g = el("g", {"class": "effect", "data-model": s.label, "data-factor": ef.factor, "data-level": ef.level}, svg);
      el("line", {"class": "ci", x1: xs(ef.low), x2: xs(ef.high), y1: y, y2: y, stroke: colour(ef.series), "stroke-width": 2}, g);
      el("line", {x1: xs(ef.low), x2: xs(ef.low), y1: y - 4, y2: y + 4, stroke: colour(ef.series)}, g);
      el("line", {x1: xs(ef.high), x2: xs(ef.high), y1: y - 4, y2: y + 4, stroke: colour(ef.series)}, g);
      var dot = el("circle", {"class": "point", cx: xs(ef.delta), cy: y, r: 4.5, fill: colour(ef.series)}, g);
      var text = points(ef.delta) + " pts [" + points(ef.low) + ", " + points(ef.high) + "] n=" + ef.n;
      tip(dot, s.label + " \u00b7 " + ef.factorName + " " + name + ": " + text);
      label(svg, x0 + plotW + 10, y + 4, text, {fill: "#333"});
      row += 1;
    });
  }

  function passRates() {
    var rs = data.passRates || [];
    if (!rs.length) return;
    var rowH = 26, plotW = 400, top = 22;
    var svg = chart("passrate", LEFT + plotW + 220, top + rs.length * rowH + 8, "pass rates");
    function xs(v) { return LEFT + v * plotW; }
    [0, 0.25, 0.5, 0.75, 1].forEach(function (t) {
      el("line", {x1: xs(t), x2: xs(t), y1: top - 6, y2: top + rs.length * rowH, stroke: "#e0e0e6", "class": "grid"}, svg);
      label(svg, xs(t), top - 9, pct(t), {"text-anchor": "middle", fill: "#666"});
    });
    rs.forEach(function (r, i) {
      var y = top + i * rowH + rowH / 2, s = series[r.series] || {label: "?"};
      tip(label(svg, LEFT - 8, y + 4, clip(s.label, 34), {"text-anchor": "end"}), s.label);
      var g = el("g", {"class": "rate", "data-model": s.label}, svg);
      if (r.rate === null) { label(g, xs(0) + 4, y + 4, "nothing scored", {fill: "#999"}); return; }
      el("line", {"class": "ci", x1: xs(r.low), x2: xs(r.high), y1: y, y2: y, stroke: colour(r.series), "stroke-width": 2}, g);
      tip(el("circle", {"class": "point", cx: xs(r.rate), cy: y, r: 5, fill: colour(r.series)}, g),
        s.label + ": pass rate " + pct(r.rate) + " [" + pct(r.low) + ", " + pct(r.high) + "] over " + r.n);
      var text = pct(r.rate) + " [" + pct(r.low) + "\u2013" + pct(r.high) + "]";
      if (r.passK !== null && r.passK !== undefined) {
        var d = 5, cx = xs(r.passK);
        tip(el("path", {"class": "passk", d: "M" + cx + " " + (y - d) + "L" + (cx + d) + " " + y + "L" + cx + " " + (y + d) + "L" + (cx - d) + " " + y + "Z",
          fill: "#fff", stroke: colour(r.series), "stroke-width": 2}, g), s.label + ": pass^" + r.k + " " + pct(r.passK));
        text += "  pass^" + r.k + " " + pct(r.passK);
      }
      label(svg, LEFT + plotW + 10, y + 4, text, {fill: "#333"});
    });
  }

  function costs() {
    var cs = data.costs || [];
    if (!cs.length) return;
    var rowH = 24, plotW = 360, top = 8;
    var max = Math.max.apply(null, cs.map(function (c) { return (c.model || 0) + (c.judge || 0); }).concat([1e-9]));
    var svg = chart("cost", LEFT + plotW + 220, top + cs.length * rowH + 26, "cost per run");
    cs.forEach(function (c, i) {
      var y = top + i * rowH, m = c.model || 0, j = c.judge || 0;
      tip(label(svg, LEFT - 8, y + 16, clip(c.label, 34), {"text-anchor": "end"}), c.label);
      var g = el("g", {"class": "cost", "data-run": c.run}, svg);
      tip(el("rect", {"class": "cost-model", x: LEFT, y: y + 4, width: Math.max(plotW * m / max, 0.5), height: rowH - 8, fill: colour(c.series)}, g), "model calls $" + m.toFixed(6));
      tip(el("rect", {"class": "cost-judge", x: LEFT + plotW * m / max, y: y + 4, width: plotW * j / max, height: rowH - 8, fill: colour(c.series), "fill-opacity": 0.4}, g), "judge calls $" + j.toFixed(6));
      label(svg, LEFT + plotW * (m + j) / max + 8, y + 16, "$" + (m + j).toFixed(4) + (j ? "  (judge $" + j.toFixed(4) + ")" : ""), {fill: "#333"});
    });
    label(svg, LEFT, top + cs.length * rowH + 16, "solid: model calls; light: judge calls", {fill: "#666"});
  }

  function failureTools() {
    var items = Array.prototype.slice.call(document.querySelectorAll("details.failure"));
    var box = document.getElementById("failure-filter");
    if (box) box.addEventListener("input", function () {
      var q = box.value.toLowerCase();
      items.forEach(function (d) { d.hidden = q !== "" && d.textContent.toLowerCase().indexOf(q) < 0; });
    });
    var open = document.getElementById("expand-all"), shut = document.getElementById("collapse-all");
    if (open) open.addEventListener("click", function () { items.forEach(function (d) { if (!d.hidden) d.open = true; }); });
    if (shut) shut.addEventListener("click", function () { items.forEach(function (d) { d.open = false; }); });
    function openTarget() { var t = location.hash ? document.getElementById(location.hash.slice(1)) : null; if (t && t.tagName === "DETAILS") t.open = true; }
    window.addEventListener("hashchange", openTarget);
    openTarget();
  }

  var failed = [];
  [heatmap, conditions, forest, passRates, costs, failureTools].forEach(function (draw) {
    try { draw(); } catch (err) { failed.push(draw.name); if (window.console) console.error("helmbench report:", draw.name, err); }
  });
  document.documentElement.setAttribute("data-charts", failed.length ? "failed: " + failed.join(" ") : "drawn");
})();
"""
