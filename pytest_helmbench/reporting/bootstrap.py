"""Seeded percentile bootstrap intervals (standard library only: numpy is not a dependency).

Two resampling units, both with a fixed seed so the same data always give the same interval:

- :func:`cluster_ratio_intervals` resamples whole clusters (a score's scenarios) with
  replacement. Cases of one scenario share its wording and its rubric, so their outcomes are
  correlated; treating 16k cases as independent would give intervals far too narrow. Each
  cluster is reduced to a few sums first, so a replicate costs one draw and one addition per
  cluster whatever the number of cases.
- :func:`bootstrap_interval` resamples items (e.g. calibration replies) for any statistic, such as
  an agreement coefficient; replicates where the statistic is undefined are left out.

Both return the percentile interval: the 2.5th and 97.5th percentiles of the replicates, linearly
interpolated between order statistics (``statistics.quantiles(method="inclusive")``).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from typing import TypeVar

#: Replicates drawn by default: enough for a stable 95 % percentile interval.
DEFAULT_REPLICATES = 2000
#: The fixed seed: intervals are reproducible run to run and machine to machine.
DEFAULT_SEED = 11
DEFAULT_LEVEL = 0.95

T = TypeVar("T")


def percentile(ordered: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) of sorted values, interpolated linearly between order statistics."""
    if not ordered:
        raise ValueError("no values")
    position = q * (len(ordered) - 1)
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    fraction = position - below
    return ordered[below] + (ordered[above] - ordered[below]) * fraction


def percentile_interval(values: Sequence[float], level: float = DEFAULT_LEVEL) -> tuple[float, float]:
    """The central ``level`` interval of the values (both ends included)."""
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    ordered = sorted(values)
    tail = (1 - level) / 2
    return (percentile(ordered, tail), percentile(ordered, 1 - tail))


def cluster_ratio_intervals(
    clusters: Sequence[Sequence[float]],
    ratios: Sequence[tuple[int, int]],
    replicates: int = DEFAULT_REPLICATES,
    seed: int = DEFAULT_SEED,
    level: float = DEFAULT_LEVEL,
) -> tuple[tuple[float, float] | None, ...]:
    """Percentile intervals of ratios of sums, resampling clusters with replacement.

    ``clusters`` holds one row of sums per cluster (all rows the same length, in a canonical
    order: the seed then fixes the result); each ``(numerator, denominator)`` pair in ``ratios``
    indexes a row and names one statistic, sum(numerator) / sum(denominator) over the resampled
    clusters. A replicate whose denominator sums to 0 is left out of that statistic (None when
    every replicate is).
    """
    if not clusters or replicates < 1:
        raise ValueError("need at least one cluster and one replicate")
    columns = [tuple(column) for column in zip(*clusters, strict=True)]
    rng = random.Random(seed)
    picks = range(len(clusters))
    draws: list[list[float]] = [[] for _ in ratios]
    for _ in range(replicates):
        chosen = rng.choices(picks, k=len(clusters))
        totals = [sum(map(column.__getitem__, chosen)) for column in columns]
        for values, (numerator, denominator) in zip(draws, ratios, strict=True):
            if totals[denominator]:
                values.append(totals[numerator] / totals[denominator])
    return tuple(percentile_interval(values, level) if values else None for values in draws)


def bootstrap_interval(
    items: Sequence[T],
    statistic: Callable[[Sequence[T]], float | None],
    replicates: int = DEFAULT_REPLICATES,
    seed: int = DEFAULT_SEED,
    level: float = DEFAULT_LEVEL,
) -> tuple[float, float] | None:
    """Percentile interval of ``statistic`` over item resamples; None when no replicate defines it.

    Replicates where the statistic is undefined (None, e.g. kappa on a resample holding a single
    label) are left out, so the interval describes the resamples where it exists.
    """
    if not items or replicates < 1:
        return None
    rng = random.Random(seed)
    values = []
    for _ in range(replicates):
        value = statistic(rng.choices(items, k=len(items)))
        if value is not None:
            values.append(value)
    return percentile_interval(values, level) if values else None
