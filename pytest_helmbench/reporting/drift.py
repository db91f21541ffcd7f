"""Drift: how safety holds up as a conversation goes on, and between the two layouts a case is sent in.

Pure functions over :class:`CaseResult` records (standard library only: the terminal summary reads
them during the session, the HTML report after it).

- **Pass rate by turn index** (:func:`turn_pass_rates`): over multi-turn cases only, every judged
  reply counts once at its turn index (the number of user messages up to that reply: a scripted
  conversation has one judged reply, at its number of user turns; a simulated one has one per reply,
  1, 2, 3, ...). Only passed and failed replies count. A rate that falls with the turn index means
  the model gives way the longer it is pressed, even when the first replies were safe. Each rate
  carries a 95 % Wilson interval (:mod:`.intervals`); replies of one conversation are correlated,
  so the interval is a guide, not a test.
- **Instructed vs deployed** (:func:`layout_gaps`): a case sent in both layouts (same model, run,
  case code and repeat) is one pair; per behaviour, the gap is the seed (instructed) pass rate
  minus the deployed pass rate over the pairs whose both sides were scored, with Newcombe's paired
  interval. Positive: the model is safer when told the rules than when deployed behind a plain
  system prompt. Records are expected unique per (model, run, case code, repeat, layout); a
  duplicate replaces the one before it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..codes import DEPLOYED, LAYOUTS, SEED, code_sort_key
from ..execution.outcome import CaseResult
from ..status import SCORED, Status
from .intervals import newcombe_paired_interval, wilson_interval


@dataclass(frozen=True)
class TurnRate:
    """The pass rate of one model's judged replies at one turn index, in one layout."""

    model: str
    layout: str
    turn: int  # user messages up to the reply
    n_passed: int
    n_scored: int  # passed + failed replies at this turn
    low: float  # 95 % Wilson interval
    high: float

    @property
    def pass_rate(self) -> float:
        return self.n_passed / self.n_scored


@dataclass(frozen=True)
class LayoutGap:
    """Seed minus deployed pass rate of one model's paired cases of one behaviour (-1..1)."""

    model: str
    behaviour: str
    delta: float
    low: float  # 95 % Newcombe paired interval
    high: float
    n_pairs: int
    seed_passed: int  # pairs whose seed case passed
    deployed_passed: int  # pairs whose deployed case passed

    @property
    def seed_rate(self) -> float:
        return self.seed_passed / self.n_pairs

    @property
    def deployed_rate(self) -> float:
        return self.deployed_passed / self.n_pairs


def layout_key(layout: str) -> tuple[int, str]:
    """Seed first, then deployed, then anything else by name."""
    return (LAYOUTS.index(layout) if layout in LAYOUTS else len(LAYOUTS), layout)


def turn_pass_rates(results: Iterable[CaseResult]) -> list[TurnRate]:
    """Pass rate per (model, layout, turn index) over the judged replies of multi-turn cases.

    Single-turn cases (no `turns`) and errored or skipped replies are left out; a turn index without
    a scored reply has no entry. Ordered by model, layout (seed first) and turn index."""
    counts: dict[tuple[str, str, int], list[int]] = defaultdict(lambda: [0, 0])
    for r in results:
        for turn, status in r.turns:
            if status in SCORED:  # a plain "passed" string counts too
                cell = counts[(r.model, r.layout, turn)]
                cell[0] += int(status == Status.PASSED)
                cell[1] += 1
    rates = [
        TurnRate(model, layout, turn, passed, n, *wilson_interval(passed, n))
        for (model, layout, turn), (passed, n) in counts.items()
    ]
    return sorted(rates, key=lambda t: (code_sort_key(t.model), layout_key(t.layout), t.turn))


def layout_gaps(results: Iterable[CaseResult]) -> list[LayoutGap]:
    """The paired seed-minus-deployed gap per (model, behaviour); see the module docstring.

    A pair counts only when both of its cases were scored (passed or failed); a behaviour without
    such a pair has no entry. Ordered by model, then behaviour in code order."""
    cases: dict[tuple[Any, ...], dict[str, CaseResult]] = defaultdict(dict)
    for r in results:
        if r.layout in (SEED, DEPLOYED):
            cases[(r.model, r.run_id, r.case_code, r.repeat)][r.layout] = r
    # (model, behaviour) -> [both passed, seed only, deployed only, neither]
    tables: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for pair in cases.values():
        seed, deployed = pair.get(SEED), pair.get(DEPLOYED)
        if seed is None or deployed is None or not (seed.scored and deployed.scored):
            continue
        seed_pass, deployed_pass = seed.status == Status.PASSED, deployed.status == Status.PASSED
        cell = 0 if seed_pass and deployed_pass else 1 if seed_pass else 2 if deployed_pass else 3
        tables[(seed.model, seed.behaviour)][cell] += 1
    gaps = []
    for (model, behaviour), table in tables.items():
        delta, low, high = newcombe_paired_interval(*table)
        both, seed_only, deployed_only, _ = table
        gaps.append(
            LayoutGap(model, behaviour, delta, low, high, sum(table), both + seed_only, both + deployed_only)
        )
    return sorted(gaps, key=lambda g: (code_sort_key(g.model), code_sort_key(g.behaviour)))


def whole_percent(fraction: float) -> str:
    return f"{100 * fraction:.0f}%"


def signed_points(fraction: float) -> str:
    """A change in percentage points, signed, one decimal (`+12.0`)."""
    value = 100 * fraction
    return f"{0.0 if abs(value) < 0.05 else value:+.1f}"


def drift_lines(results: Sequence[CaseResult]) -> list[str]:
    """`drift: turn 1 92% → turn 6 71%` per model and layout: the pass rate at the first and the last
    turn index that has scored replies (one turn index: `drift: turn 3 80%`).

    The layout is named (`drift (deployed): ...`) when the results hold more than one layout, the
    model when they hold more than one model; no line without a multi-turn case."""
    rates = turn_pass_rates(results)
    several_layouts = len({r.layout for r in results}) > 1
    several_models = len({r.model for r in results}) > 1
    by_line: dict[tuple[str, str], list[TurnRate]] = defaultdict(list)
    for rate in rates:
        by_line[(rate.model, rate.layout)].append(rate)
    lines = []
    for (model, layout), found in by_line.items():  # already ordered by model, layout and turn
        names = ([model] if several_models else []) + ([layout] if several_layouts else [])
        head = f"drift ({', '.join(names)}):" if names else "drift:"
        first, last = found[0], found[-1]
        text = f"turn {first.turn} {whole_percent(first.pass_rate)}"
        if last.turn != first.turn:
            text += f" \u2192 turn {last.turn} {whole_percent(last.pass_rate)}"
        lines.append(f"{head} {text}")
    return lines


def gap_lines(results: Sequence[CaseResult]) -> list[str]:
    """`instructed vs deployed: P1-B1 +12.0 pts [95% CI +2.1, +21.4], ...` per model, behaviours in
    code order (the model is named when the results hold several); no line without a paired case."""
    by_model: dict[str, list[LayoutGap]] = defaultdict(list)
    for gap in layout_gaps(results):
        by_model[gap.model].append(gap)
    several_models = len(by_model) > 1
    lines = []
    for model, gaps in by_model.items():
        head = f"instructed vs deployed ({model}):" if several_models else "instructed vs deployed:"
        parts = [
            f"{g.behaviour} {signed_points(g.delta)} pts "
            f"[95% CI {signed_points(g.low)}, {signed_points(g.high)}]"
            for g in gaps
        ]
        lines.append(f"{head} {', '.join(parts)}")
    return lines
