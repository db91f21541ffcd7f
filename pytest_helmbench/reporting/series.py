"""The rows a report compares: one per model, or one per run when a model has several selected runs.

Without run ids a model's row is its headline (storage/coverage.py): the latest Result of every case
across its runs of the same benchmark and settings, with how much of the benchmark that covers.

Each row's headline numbers (scoring version 3's harm rate, care score and other rates; version 2's
pass score and pass rate, which the page's charts still draw; pass^k, critical gate, cost) are worked
out once here, for the HTML page, the JSON report and the one line per model `helmbench report` prints.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..codes import code_list, code_sort_key, layout_label
from ..execution.outcome import CaseResult
from ..execution.selection import subset_label
from ..execution.unpriced import Unpriced
from ..storage.queries import Coverage, ReportData, RunInfo
from .analytics import GateResult, RepeatStats, ScoreSummary, gate, repeat_stats, score
from .cost_text import usd
from .figure_text import basis_note, figures_line
from .harm_care import HarmCare, harm_care, layout_of
from .human_verified import HumanVerified, Verdicts, human_verified


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
    """Headline numbers of one series: harm and care (version 3), version 2's pass score and pass rate,
    pass^k, critical gate and cost."""

    label: str
    model: str
    run_ids: tuple[int, ...]
    figures: HarmCare
    layout: str  # "seed", "deployed" or "mixed": what its Results were sent in
    score: ScoreSummary
    repeats: RepeatStats
    gate: GateResult
    cost_usd: float
    judge_cost_usd: float
    prompt_tokens: int
    completion_tokens: int
    unpriced: Unpriced = Unpriced()  # calls without a price: the costs are then lower bounds
    coverage: Coverage | None = None  # the headline's cases and runs (a report without run ids)
    subset: str = ""  # `subset: 25 of 120 cases` when the row is one subset run
    human: HumanVerified | None = None  # with human-reviewed replies: the figures with their verdicts

    @property
    def has_repeats(self) -> bool:
        return self.repeats.k_max > 1


def build_series(data: ReportData) -> list[Series]:
    """Per model; per run instead when some model has several selected runs (so runs are compared)."""
    by_model: dict[str, list[RunInfo]] = {}
    for run in data.runs:
        by_model.setdefault(run.model, []).append(run)
    per_run = not data.coverage and any(len(runs) > 1 for runs in by_model.values())
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


def summarise(
    series: Series, coverage: Coverage | None = None, human: Verdicts | None = None
) -> SeriesSummary:
    gates = gate(series.results)
    unpriced = Unpriced()
    for run in series.runs:
        unpriced = unpriced + run.unpriced
    only = series.runs[0] if len(series.runs) == 1 and coverage is None else None
    return SeriesSummary(
        label=series.label,
        model=series.model,
        run_ids=series.run_ids,
        figures=harm_care(series.results),
        layout=layout_of(series.results),
        score=score(series.results),
        repeats=repeat_stats(series.results),
        gate=gates.get(series.model, GateResult(series.model, "passed", (), (), 0)),
        cost_usd=sum(r.cost_usd for r in series.runs),
        judge_cost_usd=sum(r.judge_cost_usd for r in series.runs),
        prompt_tokens=sum(r.prompt_tokens for r in series.runs),
        completion_tokens=sum(r.completion_tokens for r in series.runs),
        unpriced=unpriced,
        coverage=coverage,
        subset=subset_label(only.subset, only.selected_cases, only.benchmark_cases) if only else "",
        human=human_verified(series.results, human) if human else None,
    )


def summaries(data: ReportData) -> list[SeriesSummary]:
    return [summarise(s, data.coverage.get(s.model), data.human) for s in build_series(data)]


def pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def score_text(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


#: What a gate's code list may take of a terminal line besides its words (`critical gate failed (`…).
GATE_WORDS = 24


def summary_line(s: SeriesSummary, width: int | None = None) -> str:
    """One line per model for the command line: harm and care first (the headline), said to rest on
    few results when it does; a gate's codes cut to the terminal's `width` (a few, then how many more)."""
    sc = s.score
    basis = basis_note(s.figures)
    parts = [
        f"{s.label} ({layout_label(s.layout)}): {basis + ': ' if basis else ''}{figures_line(s.figures)}",
        f"{sc.n_passed} passed, {sc.n_failed} failed, {sc.n_errors} errors"
        + (f", {sc.n_skipped} skipped" if sc.n_skipped else ""),
    ]
    if s.has_repeats:
        parts.append(f"pass^{s.repeats.k_max} {pct(s.repeats.pass_k)}")
    g = s.gate
    room = None if width is None else max(width - GATE_WORDS, 1)
    gate_text = f"critical gate {g.status}"
    if g.failed_cases:
        gate_text += f" ({code_list(g.failed_cases, width=room)})"
    elif g.incomplete_cases:
        gate_text += f" ({code_list(g.incomplete_cases, width=room)})"
    if g.unconfirmed_cases:
        gate_text += f"; not confirmed on re-judging: {code_list(g.unconfirmed_cases, width=room)}"
    parts += [gate_text, f"cost {usd(s.cost_usd + s.judge_cost_usd, s.unpriced.total)}"]
    scope = s.coverage.text() if s.coverage else s.subset
    if scope:
        parts.append(scope)
    if s.human is not None:
        parts.append(s.human.text())
    return " | ".join(parts)
