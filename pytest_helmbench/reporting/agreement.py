"""Agreement between raters: judges with each other (a panel) and judges with gold labels.

Pure functions, standard library only. Labels are any hashable values (``True``/``False`` for
pass/fail, or category names). Conventions:

- Cohen's kappa (two raters): ``(p_o - p_e) / (1 - p_e)`` with ``p_e`` from each rater's own
  marginal distribution (Cohen 1960).
- Fleiss' kappa (two or more raters per item): Fleiss (1971); items may have different numbers of
  raters (each at least 2): the observed agreement of an item is the share of its rater pairs that
  agree, and chance agreement comes from the pooled category shares (the usual generalisation,
  identical to Fleiss 1971 when every item has the same raters).
- Gwet's AC1 (Gwet 2008): the same observed agreement, with chance agreement
  ``sum(pi_k * (1 - pi_k)) / (q - 1)`` over the q categories of the scale. It stays stable when one
  label dominates, where kappa collapses (the "kappa paradox"), so both are reported.
- A kappa is undefined (None) when chance agreement is 1: every rating used the same label. AC1 is
  then defined (1.0 when they all agree).
- Sensitivity and specificity treat *unsafe* (a failed verdict) as the positive class:
  sensitivity is the share of gold-unsafe items the judge failed, specificity the share of
  gold-safe items the judge passed.

Intervals come from a seeded bootstrap over items (:func:`bootstrap_interval`, re-exported).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from ..codes import code_sort_key
from ..execution.outcome import CaseResult
from .bootstrap import bootstrap_interval

__all__ = [
    "JudgePassRate",
    "PanelAgreement",
    "bootstrap_interval",
    "cohen_kappa",
    "fleiss_kappa",
    "gwet_ac1",
    "gwet_ac1_counts",
    "observed_agreement",
    "panel_agreement",
    "sensitivity",
    "specificity",
]

Pair = tuple[Hashable, Hashable]


def _kappa(observed: float, chance: float) -> float | None:
    """Chance-corrected agreement; None when chance agreement is 1 (a single label throughout)."""
    if chance >= 1 - 1e-12:
        return None
    return (observed - chance) / (1 - chance)


def observed_agreement(pairs: Iterable[Pair]) -> float | None:
    """Share of pairs whose two labels are equal; None without pairs."""
    pairs = list(pairs)
    return sum(a == b for a, b in pairs) / len(pairs) if pairs else None


def cohen_kappa(pairs: Iterable[Pair]) -> float | None:
    """Cohen's kappa for two raters, one (rater A, rater B) pair per item; None when undefined."""
    pairs = list(pairs)
    if not pairs:
        return None
    n = len(pairs)
    first, second = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    chance = sum(first[label] * second[label] for label in first) / (n * n)
    return _kappa(sum(a == b for a, b in pairs) / n, chance)


def gwet_ac1(pairs: Iterable[Pair], categories: Iterable[Hashable] | None = None) -> float | None:
    """Gwet's AC1 for two raters; None without pairs.

    ``categories`` is the scale (e.g. ``(True, False)``); by default the labels seen, and at least
    two (a binary scale), so AC1 stays defined when every rating is the same.
    """
    kinds = Counter(pairs)  # (a, b) -> how many items: what AC1 of two raters depends on
    n = sum(kinds.values())
    if not n:
        return None
    ratings: Counter[Hashable] = Counter()
    for (a, b), count in kinds.items():
        ratings[a] += count
        ratings[b] += count
    labels = sorted(set(ratings) | set(categories or ()), key=repr)
    agree = sum(count for (a, b), count in kinds.items() if a == b)
    # _ac1's figures, from the counts: an item's share of agreeing rater pairs is 1 or 0, a label's share
    # of its two ratings 0, 1/2 or 1, so their sums are exact in any order and these are the same floats
    # (tests/test_agreement.py), at a bootstrap's 2,000 resamples of 1,343 items 0.4 s, not 3.7 s
    return _chance_corrected(agree / n, [ratings[label] / 2 / n for label in labels], len(labels))


def fleiss_kappa(table: Sequence[Sequence[int]]) -> float | None:
    """Fleiss' kappa from a subjects x categories table of rating counts; None when undefined.

    Every row needs at least 2 ratings (rows may differ in their totals, see the module docstring).
    """
    rows = _checked(table)
    if not rows:
        return None
    observed = _mean_pair_agreement(rows)
    total = sum(sum(row) for row in rows)
    shares = [sum(row[k] for row in rows) / total for k in range(len(rows[0]))]
    return _kappa(observed, sum(p * p for p in shares))


def _checked(table: Sequence[Sequence[int]]) -> list[Sequence[int]]:
    rows = list(table)
    if rows and len({len(row) for row in rows}) != 1:
        raise ValueError("every row of a Fleiss table needs the same categories")
    for row in rows:
        if min(row, default=0) < 0 or sum(row) < 2:
            raise ValueError(f"each item needs at least 2 non-negative ratings, got {list(row)}")
    return rows


def _mean_pair_agreement(rows: Sequence[Sequence[int]]) -> float:
    """Mean over items of the share of rater pairs that agree (Fleiss' P-bar)."""
    return sum(sum(c * (c - 1) for c in row) / (sum(row) * (sum(row) - 1)) for row in rows) / len(rows)


def gwet_ac1_counts(
    items: Sequence[Counter[Hashable]], categories: Iterable[Hashable] | None = None
) -> float | None:
    """Gwet's AC1 for two or more raters per item, each item given as its label counts (at least two
    ratings each); None without items. The multi-rater form of :func:`gwet_ac1`."""
    return _ac1(items, categories) if items else None


def _ac1(items: Sequence[Counter[Hashable]], categories: Iterable[Hashable] | None) -> float:
    """Gwet's AC1 over items given as label counts (two or more ratings each)."""
    labels = sorted({label for item in items for label in item} | set(categories or ()), key=repr)
    rows = [[item[label] for label in labels] for item in items]
    shares = [sum(row[k] / sum(row) for row in rows) / len(rows) for k in range(len(labels))]
    return _chance_corrected(_mean_pair_agreement(rows), shares, len(labels))


def _chance_corrected(observed: float, shares: Sequence[float], n_labels: int) -> float:
    """AC1 from the observed agreement and each label's share of the ratings (Gwet's chance agreement)."""
    q = max(2, n_labels)
    chance = sum(p * (1 - p) for p in shares) / (q - 1)
    return (observed - chance) / (1 - chance)


def sensitivity(pairs: Iterable[tuple[bool, bool]]) -> float | None:
    """Share of gold-unsafe items (gold passed False) the judge failed; pairs are (gold, judge)."""
    judged = [judge for gold, judge in pairs if not gold]
    return sum(not judge for judge in judged) / len(judged) if judged else None


def specificity(pairs: Iterable[tuple[bool, bool]]) -> float | None:
    """Share of gold-safe items (gold passed True) the judge passed; pairs are (gold, judge)."""
    judged = [judge for gold, judge in pairs if gold]
    return sum(bool(judge) for judge in judged) / len(judged) if judged else None


# ---------------------------------------------------------------------------------------------
# A panel of judges


@dataclass(frozen=True)
class JudgePassRate:
    """One panel judge's share of passing votes over the items agreement was computed on."""

    judge: str
    n_votes: int
    pass_rate: float


@dataclass(frozen=True)
class PanelAgreement:
    """How far a panel of judges agreed on the checks they all judged.

    Items are (model, run, case, repeat, check) with votes from at least two judges. ``kind`` is
    "cohen" for a panel of exactly two judges, else "fleiss". ``observed`` is the mean share of
    agreeing judge pairs per item (for two judges: the share of items they agree on). ``kappa``
    is None when every vote was the same label; ``ac1`` (Gwet) is then still defined.
    """

    kind: Literal["cohen", "fleiss"]
    n_items: int
    n_judges: int
    kappa: float | None
    ac1: float
    observed: float
    judges: tuple[JudgePassRate, ...]


def panel_agreement(results: Iterable[CaseResult]) -> PanelAgreement | None:
    """Inter-judge agreement over every check judged by two or more judges; None when there is none.

    Group the results first (e.g. by run) for one figure per run. A judge's repeated vote on the
    same item counts once (its last).
    """
    items: dict[tuple[object, ...], dict[str, bool]] = defaultdict(dict)
    for r in results:
        for vote in r.judge_votes:
            key = (r.model, -1 if r.run_id is None else r.run_id, r.case_code, r.layout, r.repeat, vote.check)
            items[key][vote.judge] = vote.passed
    panels = [votes for _, votes in sorted(items.items(), key=lambda kv: repr(kv[0])) if len(votes) >= 2]
    if not panels:
        return None
    judges = sorted({judge for votes in panels for judge in votes}, key=code_sort_key)
    counts = [Counter(votes.values()) for votes in panels]
    if len(judges) == 2:
        kind: Literal["cohen", "fleiss"] = "cohen"
        kappa = cohen_kappa((votes[judges[0]], votes[judges[1]]) for votes in panels)
    else:
        kind = "fleiss"
        kappa = fleiss_kappa([[c[True], c[False]] for c in counts])
    rates = []
    for judge in judges:
        cast = [votes[judge] for votes in panels if judge in votes]
        rates.append(JudgePassRate(judge, len(cast), sum(cast) / len(cast)))
    return PanelAgreement(
        kind=kind,
        n_items=len(panels),
        n_judges=len(judges),
        kappa=kappa,
        ac1=_ac1(counts, (True, False)),
        observed=_mean_pair_agreement([[c[True], c[False]] for c in counts]),
        judges=tuple(rates),
    )
