"""95 % intervals for pass rates and paired differences (standard library only).

- Pass rates carry a 95 % Wilson score interval (good coverage for small n and rates near 0 or 1).
- Per-factor effects carry Newcombe's hybrid score interval for a difference of paired
  proportions (Newcombe 1998, method 10, with the continuity-corrected correlation used by
  Fagerland, Lydersen & Laake 2017): deterministic, never degenerate for small samples or
  all-equal pairs, and always within -1..1.
"""

from __future__ import annotations

import math
from statistics import NormalDist

#: Two-sided 95 % normal quantile (1.959963984540054).
Z95 = NormalDist().inv_cdf(0.975)


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion; (0, 1) when n is 0."""
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, got {successes}/{n}")
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    z2 = z * z
    denominator = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return (low, high)


def newcombe_paired_interval(
    both: int, factor_only: int, baseline_only: int, neither: int, z: float = Z95
) -> tuple[float, float, float]:
    """Difference of paired proportions (factor pass rate - baseline pass rate) with its interval.

    Arguments are the 2x2 counts of pairs: both passed, only the factor case passed, only the
    baseline passed, neither passed. Returns (delta, low, high). Newcombe's hybrid score method
    (1998, method 10) with the continuity-corrected phi of Fagerland et al. (2017).
    """
    counts = (both, factor_only, baseline_only, neither)
    if min(counts) < 0 or sum(counts) == 0:
        raise ValueError(f"need non-negative counts with at least one pair, got {counts}")
    n = sum(counts)
    factor_passed, baseline_passed = both + factor_only, both + baseline_only
    p1, p2 = factor_passed / n, baseline_passed / n
    delta = (factor_only - baseline_only) / n
    l1, u1 = wilson_interval(factor_passed, n, z)
    l2, u2 = wilson_interval(baseline_passed, n, z)
    margins = (factor_passed, n - factor_passed, baseline_passed, n - baseline_passed)
    phi = 0.0
    if 0 not in margins:
        cross = both * neither - factor_only * baseline_only
        root = math.sqrt(math.prod(margins))
        if cross > n / 2:
            phi = (cross - n / 2) / root
        elif cross < 0:
            phi = cross / root
    down = math.sqrt(max(0.0, (p1 - l1) ** 2 + (u2 - p2) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2)))
    up = math.sqrt(max(0.0, (p2 - l2) ** 2 + (u1 - p1) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1)))
    return (delta, max(-1.0, delta - down), min(1.0, delta + up))
