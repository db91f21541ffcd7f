"""Per-factor attribution: the paired change in pass rate one condition, user context or style causes.

Within each scenario the baseline is: no user context, the scenario's lowest-severity perturbation
and its lowest-severity condition (ties broken by numeric code order, C2 before C10), chosen from all
records of that scenario whatever their status or model. A case that differs from the baseline
only in its condition (or only in its user context, or only in its perturbation) is paired with the
baseline case of the same model, run, scenario and repeat; the effect of a level is the mean of
``factor passed - baseline passed`` over its pairs pooled across scenarios. Perturbations are
attributed by their style (``"none"`` when unstyled). Pairs with an errored or skipped side are
dropped; levels without any pair are omitted. Records are expected to be unique per
(model, run, case code, repeat). Intervals are Newcombe's (see :mod:`.intervals`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from ..codes import code_sort_key
from ..status import Status
from .analytics import NONE_LABEL, CaseResult, sorted_results
from .intervals import newcombe_paired_interval

Factor = Literal["condition", "user_context", "style"]

FACTORS: tuple[Factor, ...] = ("condition", "user_context", "style")


@dataclass(frozen=True)
class FactorEffect:
    """The paired change in pass rate one factor level causes against its scenarios' baselines."""

    model: str
    factor: Factor
    level: str
    delta: float  # mean(factor passed - baseline passed), -1..1
    ci_low: float
    ci_high: float
    n_pairs: int


@dataclass(frozen=True)
class _Baseline:
    condition: str
    perturbation: str


def scenario_baselines(results: Iterable[CaseResult]) -> dict[str, tuple[str, str]]:
    """Baseline (condition, perturbation) per scenario, from all records whatever their status.

    Lowest severity first, then numeric code order; a code seen with several severities counts
    with its lowest. The baseline user context is always "none".
    """
    conditions: dict[str, dict[str, int]] = defaultdict(dict)
    perturbations: dict[str, dict[str, int]] = defaultdict(dict)
    for r in results:
        seen_c, seen_p = conditions[r.scenario], perturbations[r.scenario]
        seen_c[r.condition] = min(seen_c.get(r.condition, r.condition_severity), r.condition_severity)
        seen_p[r.perturbation] = min(
            seen_p.get(r.perturbation, r.perturbation_severity), r.perturbation_severity
        )

    def lowest(severities: dict[str, int]) -> str:
        return min(severities, key=lambda code: (severities[code], code_sort_key(code)))

    return {
        s: (lowest(conditions[s]), lowest(perturbations[s])) for s in sorted(conditions, key=code_sort_key)
    }


def _factor_level(result: CaseResult, baseline: _Baseline) -> tuple[Factor, str] | None:
    """The single factor in which a case differs from its scenario's baseline, if exactly one."""
    differs = {
        "condition": result.condition != baseline.condition,
        "user_context": result.user_context is not None,
        "style": result.perturbation != baseline.perturbation,
    }
    changed = [factor for factor in FACTORS if differs[factor]]
    if len(changed) != 1:
        return None
    factor = changed[0]
    if factor == "condition":
        return ("condition", result.condition)
    if factor == "user_context":
        return ("user_context", str(result.user_context))
    return ("style", result.perturbation_style or NONE_LABEL)


def attribution(results: Iterable[CaseResult]) -> list[FactorEffect]:
    """Paired effect of each condition, user context and perturbation style per model.

    Ordered by model, factor (condition, user_context, style) and level in code order.
    See the module docstring for baselines and pairing.
    """
    records = sorted_results(results)
    baselines = {s: _Baseline(*pair) for s, pair in scenario_baselines(records).items()}
    baseline_cases: dict[tuple[Any, ...], list[CaseResult]] = defaultdict(list)
    candidates: list[tuple[CaseResult, Factor, str]] = []
    for r in records:
        if not r.scored:
            continue
        found = _factor_level(r, baselines[r.scenario])
        if found is None:
            if _is_baseline(r, baselines[r.scenario]):
                baseline_cases[_pair_key(r)].append(r)
            continue
        candidates.append((r, *found))
    # (model, factor, level) -> [both, factor_only, baseline_only, neither]
    tables: dict[tuple[str, Factor, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for r, factor, level in candidates:
        for base in baseline_cases.get(_pair_key(r), []):
            factor_pass, base_pass = r.status == Status.PASSED, base.status == Status.PASSED
            cell = 0 if factor_pass and base_pass else 1 if factor_pass else 2 if base_pass else 3
            tables[(r.model, factor, level)][cell] += 1
    effects = []
    for (model, factor, level), table in tables.items():
        delta, low, high = newcombe_paired_interval(*table)
        effects.append(FactorEffect(model, factor, level, delta, low, high, sum(table)))
    return sorted(
        effects, key=lambda e: (code_sort_key(e.model), FACTORS.index(e.factor), code_sort_key(e.level))
    )


def _pair_key(result: CaseResult) -> tuple[Any, ...]:
    """A factor case pairs with the baseline case of the same model, run, scenario, layout and repeat."""
    return (result.model, result.run_id, result.scenario, result.layout, result.repeat)


def _is_baseline(result: CaseResult, baseline: _Baseline) -> bool:
    return (
        result.user_context is None
        and result.condition == baseline.condition
        and result.perturbation == baseline.perturbation
    )
