"""The report's tables and its failure drill-down, as HTML with every stored text escaped.

Numbers are also drawn in the charts; the tables are what a screen reader, a copy-paste and a
search read. Every piece of model or benchmark text goes through :func:`e` (``html.escape``).
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from ..codes import layout_label, layouts_differ_line
from ..execution.selection import subset_label
from ..status import Status
from ..storage.queries import FailureRow, RunInfo
from .analytics import GateResult
from .charts import Matrix
from .cost_text import unpriced_text, usd, usd_cell
from .figure_text import basis_note
from .series import Series, SeriesSummary, pct, score_text
from .terminal import reply_turns


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


def summary_table(sums: list[SeriesSummary]) -> str:
    """Headline numbers per series."""
    any_repeats = any(s.has_repeats for s in sums)
    head = (
        ["Model", "Runs", "Harm rate (95% CI)", "Care score (95% CI)", "Critical harm", "Over-escalation"]
        + ["Perfect replies (95% CI)", "v2 pass score (95% CI)", "Pass rate (95% CI)"]
        + (["pass^k"] if any_repeats else [])
        + ["Passed", "Failed", "Errors", "Skipped", "Critical gate", "Cost (model + judge)"]
    )
    rows = []
    for index, s in enumerate(sums):
        sc, rep = s.score, s.repeats
        scope = s.coverage.text() if s.coverage else s.subset
        scope_html = f'<br><span class="ci coverage">{e(scope)}</span>' if scope else ""
        scope_html += f'<br><span class="ci layout">layout: {e(layout_label(s.layout))}</span>'
        basis = basis_note(s.figures)
        scope_html += f'<br><strong class="warn thin-basis">{e(basis)}</strong>' if basis else ""
        cells = [
            f'<th scope="row">{e(s.label)}{scope_html}</th>',
            f"<td>{e(', '.join(str(r) for r in s.run_ids))}</td>",
            *(_figure_cell(s, name) for name in FIGURES_SHOWN),
            f'<td class="num score">{e(score_text(sc.score))} '
            f"{_score_interval(sc.score_low, sc.score_high)}</td>",
            f'<td class="num">{e(pct(sc.pass_rate))} {_interval(sc.pass_rate_low, sc.pass_rate_high)}</td>',
        ]
        if any_repeats:
            interval = f"[{100 * rep.pass_k_wilson_low:.1f}&ndash;{100 * rep.pass_k_wilson_high:.1f}%]"
            text = (
                f'{pct(rep.pass_k)} <span class="ci">(k={rep.k_max}; {interval})</span>'
                if s.has_repeats
                else "&ndash;"
            )
            cells.append(f'<td class="num passk">{text}</td>')
        cells += [f'<td class="num">{n}</td>' for n in (sc.n_passed, sc.n_failed, sc.n_errors, sc.n_skipped)]
        cells.append(f"<td>{_gate_badge(s.gate)}</td>")
        model_usd, judge_usd = (
            usd(s.cost_usd, s.unpriced.model_calls),
            usd(s.judge_cost_usd, s.unpriced.judge_calls),
        )
        parts = f"({e(model_usd)} + {e(judge_usd)})"
        total = e(usd(s.cost_usd + s.judge_cost_usd, s.unpriced.total))
        cells.append(f'<td class="num">{total} <span class="ci">{parts}</span></td>')
        rows.append(f'<tr data-series="{index}">' + "".join(cells) + "</tr>")
    differ = layouts_differ_line({s.label: s.layout for s in sums})
    note = f'<p class="warn layouts-differ">{e(differ)}.</p>' if differ else ""
    return note + sortable_table("summary-table", head, rows) + human_verified_table(sums)


def human_verified_table(sums: list[SeriesSummary]) -> str:
    """The judge's harm rate and care score beside the human-verified ones (each human-reviewed reply
    given its review study's final verdict), for the models some of whose replies humans reviewed."""
    found = [(index, s, s.human) for index, s in enumerate(sums) if s.human is not None]
    if not found:
        return ""
    head = ["Model", "Harm rate: judge", "Harm rate: human-verified", "Care score: judge"]
    head += ["Care score: human-verified", "Replies human-reviewed", "Judge verdicts overturned"]
    rows = []
    for index, s, human in found:
        cells = [
            f'<th scope="row">{e(s.label)}</th>',
            _figure_cell(s, "harm_rate"),
            _figure_cell(replace(s, figures=human.figures), "harm_rate"),
            _figure_cell(s, "care_score"),
            _figure_cell(replace(s, figures=human.figures), "care_score"),
            f'<td class="reviewed">{human.reviewed} of {human.replies} replies human-reviewed</td>',
            f'<td class="num">{human.overturned}</td>',
        ]
        rows.append(f'<tr data-series="{index}">' + "".join(cells) + "</tr>")
    explain = (
        '<p class="explain">Human-verified: the same figures with every reply a review study reached a '
        "final verdict on (adjudicated, or agreed by all its raters) given that verdict instead of the "
        "judge's: safe passes with no harm, unsafe fails with harm.</p>"
    )
    return (
        '<h3 id="human-verified">Human-verified</h3>'
        + explain
        + sortable_table("human-verified-table", head, rows)
    )


#: Scoring version 3's figures in the models table, harm and care first (intervals on the three that
#: every model has; the critical and control subsets are smaller).
FIGURES_SHOWN = (
    "harm_rate",
    "care_score",
    "critical_harm_rate",
    "over_escalation_rate",
    "perfect_reply_rate",
)
_WITH_INTERVAL = ("harm_rate", "care_score", "perfect_reply_rate")


def _figure_cell(s: SeriesSummary, name: str) -> str:
    figure = s.figures.figure(name)
    if figure is None:
        return f'<td class="num {e(name)}">n/a</td>'
    scale = 1.0 if name == "care_score" else 100.0
    unit = "" if name == "care_score" else "%"
    text = f"{scale * figure.value:.1f}{unit}"
    interval = ""
    if name in _WITH_INTERVAL and figure.ci_low is not None and figure.ci_high is not None:
        interval = (
            f' <span class="ci">[{scale * figure.ci_low:.1f}&ndash;{scale * figure.ci_high:.1f}{unit}]</span>'
        )
    return f'<td class="num {e(name)}">{e(text)}{interval}</td>'


def _interval(low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return ""
    return f'<span class="ci">[{100 * low:.1f}&ndash;{100 * high:.1f}%]</span>'


def _score_interval(low: float | None, high: float | None) -> str:
    """The score's cluster-bootstrap interval (points, not percent)."""
    if low is None or high is None:
        return ""
    return f'<span class="ci">[{low:.1f}&ndash;{high:.1f}]</span>'


def sortable_table(table_id: str, head: list[str], rows: list[str]) -> str:
    """A table whose columns the page's script can sort (a click on a header)."""
    header = "".join(f'<th scope="col">{e(h)}</th>' for h in head)
    body = "\n".join(rows) if rows else f'<tr><td colspan="{len(head)}">nothing to show</td></tr>'
    return (
        f'<table id="{table_id}" class="sortable"><thead><tr>{header}</tr></thead>'
        f"<tbody>\n{body}\n</tbody></table>"
    )


def _gate_badge(g: GateResult) -> str:
    return f'<span class="badge gate-{e(g.status)}">{e(g.status)}</span>'


#: Codes a critical-gate cell lists before "+N more" (the rest are one click away, in a <details>).
GATE_CODES_SHOWN = 3


def _case_link(code: str, label: str, anchors: dict[tuple[str, str], int]) -> str:
    """One case code (never broken across lines: `.case-code`), linked to its drill-down when shown."""
    target = anchors.get((label, code))
    inner = f'<code class="case-code">{e(code)}</code>'
    return f'<a href="#failure-{target}">{inner}</a>' if target is not None else inner


def _case_links(codes: Iterable[str], label: str, anchors: dict[tuple[str, str], int]) -> str:
    """The first few codes, then `+N more` opening the whole list: a long list never fills the table."""
    links = [_case_link(code, label, anchors) for code in codes]
    if not links:
        return "&ndash;"
    head = ", ".join(links[:GATE_CODES_SHOWN])
    if len(links) <= GATE_CODES_SHOWN:
        return f'<span class="case-codes">{head}</span>'
    rest = len(links) - GATE_CODES_SHOWN
    return (
        f'<span class="case-codes">{head}</span> <details class="more-codes"><summary>+{rest} more</summary>'
        f'<span class="case-codes">{", ".join(links)}</span></details>'
    )


def gates_table(sums: list[SeriesSummary], anchors: dict[tuple[str, str], int]) -> str:
    """Each series' critical gate, its failed and incomplete cases linked to their drill-down."""
    rows = [
        f'<tr data-gate="{e(s.gate.status)}"><th scope="row">{e(s.label)}</th><td>{_gate_badge(s.gate)}</td>'
        f'<td class="num">{s.gate.n_critical}</td>'
        f"<td>{_case_links(s.gate.failed_cases, s.label, anchors)}</td>"
        f"<td>{_case_links(s.gate.unconfirmed_cases, s.label, anchors)}</td>"
        f"<td>{_case_links(s.gate.incomplete_cases, s.label, anchors)}</td></tr>"
        for s in sums
    ]
    head = ["Model", "Gate", "Critical attempts", "Confirmed critical failures"]
    head += ["Failed, not confirmed on re-judging", "Errored or skipped critical cases"]
    return sortable_table("gates-table", head, rows)


def stability_table(conditions: Matrix) -> str:
    """Each series' best and worst condition and the spread between them."""
    rows = []
    for i, label in enumerate(conditions.rows):
        scored = []
        for j, column in enumerate(conditions.columns):
            cell = conditions.cell(i, j)
            if cell is not None and cell.score is not None:
                scored.append((cell.score, column.code))
        if not scored:
            rows.append(f'<tr><th scope="row">{e(label)}</th><td colspan="3">nothing scored</td></tr>')
            continue
        (worst, worst_code), (best, best_code) = min(scored), max(scored)
        rows.append(
            f'<tr data-series="{i}"><th scope="row">{e(label)}</th><td>{e(best_code)} ({best:.1f})</td>'
            f'<td>{e(worst_code)} ({worst:.1f})</td><td class="num">{best - worst:.1f}</td></tr>'
        )
    return sortable_table(
        "stability-table",
        ["Model", "Best condition (score)", "Worst condition (score)", "Spread (points)"],
        rows,
    )


def _usd_cell(known: float, unpriced: int) -> str:
    return usd_cell(known, unpriced) if unpriced else _money(known)


def cost_table(runs: list[RunInfo]) -> str:
    """Tokens and spending per run, with the total; a cost nobody reported is `unknown`, a sum with
    unpriced calls a lower bound (`≥`), and a note counts those calls."""
    rows = [
        f'<tr><th scope="row">{run.id}</th><td>{e(run.model)}</td>'
        + _numbers(run.prompt_tokens, run.completion_tokens)
        + _numbers(
            _usd_cell(run.cost_usd, run.unpriced.model_calls),
            _usd_cell(run.judge_cost_usd, run.unpriced.judge_calls),
            _usd_cell(run.total_cost_usd, run.unpriced.total),
        )
        + "</tr>"
        for run in runs
    ]
    total = sum(run.total_cost_usd for run in runs)
    unpriced = sum(run.unpriced.total for run in runs)
    rows.append(
        f'<tr class="total"><th scope="row" colspan="6">Total</th>{_numbers(_usd_cell(total, unpriced))}</tr>'
    )
    if unpriced:
        note = f"{unpriced_text(unpriced)}: the server reported no cost and has no price list"
        rows.append(f'<tr class="note"><td colspan="7">{e(note)}</td></tr>')
    return sortable_table(
        "cost-table",
        ["Run", "Model", "Prompt tokens", "Completion tokens", "Model cost", "Judge cost", "Total"],
        rows,
    )


def _when(value: Any) -> str:
    return e(value.strftime("%Y-%m-%d %H:%M:%S")) if value else "&ndash;"


def _numbers(*values: object) -> str:
    return "".join(f'<td class="num">{e(value)}</td>' for value in values)


def _subset_badge(run: RunInfo) -> str:
    label = subset_label(run.subset, run.selected_cases, run.benchmark_cases)
    return f' <span class="badge subset">{e(label)}</span>' if label else ""


def runs_table(runs: list[RunInfo]) -> str:
    """Each run's status, times, counters and options."""
    rows = []
    for run in runs:
        options = json.dumps(run.options, ensure_ascii=False, indent=2, sort_keys=True, default=str)
        rows.append(
            f'<tr><th scope="row">{run.id}</th><td>{e(run.model)}</td>'
            f'<td><span class="badge run-{e(run.status)}">{e(run.status)}</span>{_subset_badge(run)}</td>'
            f"<td>{_when(run.started_at)}</td><td>{_when(run.finished_at)}</td>"
            + _numbers(run.passed, run.failed, run.errors, run.skipped)
            + f"<td><details><summary>options</summary><pre>{e(options)}</pre></details></td></tr>"
        )
    return sortable_table(
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


def transcript(f: FailureRow) -> str:
    """Every message of the case as sent; each judged reply carries its turn and verdict, and the
    reply of the first failing turn is marked (class `failing-turn`). A reply's turn index is the
    number of user messages before it; when several replies share one, the last is the judged one."""
    messages = list(f.messages or ())
    verdicts = {t.turn: t for t in f.turns}
    replies = reply_turns(messages)
    items, users = [], 0
    for position, message in enumerate(messages):
        role = message["role"]
        users += role == "user"
        classes, label = ["message", f"role-{role}"], e(role)
        turn = replies.get(position)
        verdict = verdicts.get(turn) if turn is not None else None
        if verdict is not None:
            classes.append(f"turn-{verdict.status}")
            label += (
                f' &middot; turn {turn} <span class="badge {e(verdict.status)}">{e(verdict.status)}</span>'
            )
        if turn is not None and turn == f.first_failing_turn:
            classes.append("failing-turn")
            label += ' <strong class="failing-label">failing turn</strong>'
        reason = f'<p class="turn-reason">{e(verdict.reason)}</p>' if verdict and verdict.reason else ""
        items.append(
            f'<li class="{e(" ".join(classes))}" data-turn="{users}"><span class="role">{label}</span>'
            f"<pre>{e(message['content'])}</pre>{reason}</li>"
        )
    return f'<ol class="transcript">{"".join(items)}</ol>'


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
    if f.messages:
        body = f"<dt>Transcript</dt><dd>{transcript(f)}</dd>" + body
    short = f.reason if len(f.reason) <= 160 else f.reason[:157] + "..."
    repeat = f" &middot; repeat {f.repeat}" if f.repeat else ""
    repeat += f" &middot; {e(f.layout)} layout" if f.layout != "seed" else ""
    repeat += f" &middot; failing turn {f.first_failing_turn}" if f.first_failing_turn is not None else ""
    critical = ' <span class="badge critical">critical</span>' if f.critical else ""
    return (
        f'<details class="failure" id="failure-{f.result_id}" data-status="{e(f.status)}">'
        f'<summary><span class="badge {e(f.status)}">{e(f.status)}</span>{critical} '
        f"<code>{e(f.case_code)}</code> "
        f'<span class="muted">run {f.run_id}{repeat}</span> <span class="reason">{e(short)}</span></summary>'
        f"<dl>{body}</dl></details>"
    )


def failures_section(
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
        n_failed = sum(f.status == Status.FAILED for f in items)
        counts = f"{n_failed} failed, {len(items) - n_failed} errors"
        parts.append(f'<h3>{e(s.label)} <span class="muted">{counts}</span></h3>')
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
