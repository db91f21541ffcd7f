"""A judge's agreement with gold labels (`helmbench calibrate`), and the line that shows it.

For each rubric and overall: Cohen's kappa and Gwet's AC1 between the judge's pass/fail and the
gold pass/fail, sensitivity to unsafe replies (share of gold-unsafe replies the judge failed) and
specificity (share of gold-safe replies it passed), each with a 95 % percentile interval from a
seeded bootstrap over items (2,000 resamples). Items the judge gave no verdict on are counted apart
(`n_errors`), never as disagreements. With human ratings (`--labels`), the way VERA-MH reports it:
rater-rater agreement (Fleiss' kappa over items rated by two or more raters) and judge-rater
agreement (Cohen's kappa and AC1 against the raters' majority label; ties left out). With items
rated in the calibration files themselves (`ratings:`), rater-rater agreement per check and over
every check: Fleiss' kappa and Gwet's AC1 over the (item, check) pairs two or more raters rated, on
the labels they used; the judge is then measured against their majority (items whose raters tied
on a check have no gold: counted, never judged). The deployed layout's extraction: per field,
agreement with the reference answers' labels and Cohen's kappa.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..execution.calibrate import Extracted
from ..providers.oracle import PREFIX as ORACLE_PREFIX
from ..suite.calibration import CalibrationItem
from .agreement import (
    cohen_kappa,
    fleiss_kappa,
    gwet_ac1,
    gwet_ac1_counts,
    observed_agreement,
    sensitivity,
    specificity,
)
from .bootstrap import bootstrap_interval

Pair = tuple[bool, bool]  # (gold passed, judge passed)
BINARY = (True, False)
REPLICATES = 2000


def _figure(
    pairs: Sequence[Pair], statistic: Callable[[Sequence[Pair]], float | None], seed: int
) -> dict[str, Any]:
    value = statistic(pairs)
    interval = bootstrap_interval(pairs, statistic, REPLICATES, seed) if value is not None else None
    low, high = interval if interval is not None else (None, None)
    return {"value": value, "low": low, "high": high}


def _ac1(pairs: Sequence[Pair]) -> float | None:
    return gwet_ac1(pairs, BINARY)


def figures_for(
    pairs: Sequence[Pair], n_errors: int = 0, n_borderline: int = 0, seed: int = 0
) -> dict[str, Any]:
    """The four agreement figures of one set of (gold, judge) pairs, with intervals and counts."""
    return {
        "n": len(pairs),
        "n_errors": n_errors,
        "n_borderline": n_borderline,
        "n_gold_unsafe": sum(1 for gold, _ in pairs if not gold),
        "kappa": _figure(pairs, cohen_kappa, seed),
        "ac1": _figure(pairs, _ac1, seed),
        "sensitivity": _figure(pairs, sensitivity, seed),
        "specificity": _figure(pairs, specificity, seed),
    }


@dataclass(frozen=True)
class Rating:
    """One judged calibration item, reduced to what agreement needs."""

    item: str
    stratum: str  # "<scenario>/<rubric file>"
    gold: bool
    judge: bool | None  # None: no verdict
    borderline: bool


def calibration_figures(ratings: Iterable[Rating], seed: int = 0) -> dict[str, Any]:
    """Per rubric (stratum) and overall figures; plain JSON (undefined figures are None)."""
    ratings = list(ratings)
    by_stratum: dict[str, list[Rating]] = defaultdict(list)
    for rating in ratings:
        by_stratum[rating.stratum].append(rating)

    def summary(group: Sequence[Rating]) -> dict[str, Any]:
        pairs = [(r.gold, r.judge) for r in group if r.judge is not None]
        borderline = sum(1 for r in group if r.borderline and r.judge is not None)
        return figures_for(pairs, sum(1 for r in group if r.judge is None), borderline, seed)

    return {
        "overall": summary(ratings),
        "borderline": summary([r for r in ratings if r.borderline]),
        "rubrics": {name: summary(group) for name, group in sorted(by_stratum.items())},
    }


def human_figures(
    ratings: Iterable[tuple[str, str, bool]], judge: Mapping[str, bool | None], seed: int = 0
) -> dict[str, Any]:
    """Rater-rater and judge-rater agreement from human ratings (item, rater, passed)."""
    by_item: dict[str, dict[str, bool]] = defaultdict(dict)
    for item, rater, passed in ratings:
        by_item[item][rater] = passed
    multi = [votes for votes in by_item.values() if len(votes) >= 2]
    table = [[Counter(v.values())[True], Counter(v.values())[False]] for v in multi]
    consensus: list[Pair] = []
    for item, votes in sorted(by_item.items()):
        count = Counter(votes.values())
        verdict = judge.get(item)
        if count[True] != count[False] and verdict is not None:
            consensus.append((count[True] > count[False], verdict))
    return {
        "n_items": len(by_item),
        "n_raters": len({rater for votes in by_item.values() for rater in votes}),
        "rater_rater": {"n": len(multi), "fleiss_kappa": fleiss_kappa(table) if table else None},
        "judge_rater": figures_for(consensus, seed=seed),
    }


def rater_figures(items: Iterable[CalibrationItem]) -> dict[str, Any]:
    """Rater-rater agreement of the items rated in the calibration files (`ratings:`): per check
    (`<scenario>/<rubric>: <check>`) and over every check, Fleiss' kappa and AC1 on the (item, check)
    pairs with two or more ratings; and the items whose raters tied (no gold), per check."""
    rated = [i for i in items if i.ratings]
    units: dict[str, list[Counter[str]]] = defaultdict(list)
    tied: dict[str, list[str]] = defaultdict(list)
    for item in rated:
        for check in sorted({k for r in item.ratings for k in r.verdict if k != "rationale"}):
            key = f"{item.scenario}/{item.rubric}: {check}"
            votes = Counter(_label(r.verdict[check]) for r in item.ratings if check in r.verdict)
            if sum(votes.values()) >= 2:
                units[key].append(votes)
        for check in item.no_majority:
            tied[f"{item.scenario}/{item.rubric}: {check}"].append(item.id)
    return {
        "n_items": len(rated),
        "n_raters": len({r.rater for i in rated for r in i.ratings}),
        "n_no_majority": sum(1 for i in rated if i.no_majority),
        "no_majority": {key: ids for key, ids in sorted(tied.items())},
        "checks": {key: _multi_rater(found) for key, found in sorted(units.items())},
        "overall": _multi_rater([votes for found in units.values() for votes in found]),
    }


def _label(value: Any) -> str:
    return json.dumps(sorted(value, key=str) if isinstance(value, list) else value, sort_keys=True)


def _multi_rater(units: Sequence[Counter[str]]) -> dict[str, Any]:
    """Fleiss' kappa and AC1 of (item, check) pairs given as their label counts."""
    labels = sorted({label for votes in units for label in votes})
    table = [[votes[label] for label in labels] for votes in units]
    return {
        "n": len(units),
        "fleiss_kappa": fleiss_kappa(table) if table else None,
        "ac1": gwet_ac1_counts(units),
    }


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def figure_text(figure: Mapping[str, Any]) -> str:
    """`0.78 [0.71-0.84]`, or `n/a` when undefined."""
    value, low, high = figure.get("value"), figure.get("low"), figure.get("high")
    if value is None:
        return "n/a"
    return f"{value:.2f} [{_num(low)}-{_num(high)}]" if low is not None else f"{value:.2f}"


def calibration_line(judge: str, figures: Mapping[str, Any] | None, labeller: str | None = None) -> str:
    """`judge X: κ 0.78 [0.71-0.84] on 320 author-labelled items` (or `judge X uncalibrated`); an
    oracle judge answers with the authors' gold verdicts themselves, so it is never told to calibrate."""
    if not figures and judge.startswith(ORACLE_PREFIX):
        return f"judge {judge}: rule-based, gives the authors' gold verdicts (nothing to calibrate)"
    if not figures:
        return f"judge {judge}: uncalibrated (run `helmbench calibrate --marking-model {judge}`)"
    overall = figures.get("overall", {})
    who = "author-labelled" if labeller == "authors" else f"{labeller}-labelled" if labeller else "labelled"
    return (
        f"judge {judge}: κ {figure_text(overall.get('kappa', {}))}, "
        f"AC1 {figure_text(overall.get('ac1', {}))}, "
        f"sensitivity {figure_text(overall.get('sensitivity', {}))}, "
        f"specificity {figure_text(overall.get('specificity', {}))} on {overall.get('n', 0)} {who} items"
    )


def extraction_figures(extracted: Iterable[Extracted]) -> dict[str, Any]:
    """The extractor against the reference answers' labels: per field, the share of replies on which it
    gave the gold value and Cohen's kappa (JSON-encoded values: lists compare whole); replies it gave
    no extraction for are counted apart."""
    extracted = list(extracted)
    answered = [e for e in extracted if e.found is not None]
    fields: dict[str, dict[str, Any]] = {}
    for name in sorted({k for e in answered for k in e.gold}):
        pairs = [
            (json.dumps(e.gold[name], sort_keys=True), json.dumps(e.found.get(name), sort_keys=True))
            for e in answered
            if name in e.gold and e.found is not None
        ]
        fields[name] = {"n": len(pairs), "agreement": observed_agreement(pairs), "kappa": cohen_kappa(pairs)}
    return {"n": len(answered), "n_errors": len(extracted) - len(answered), "fields": fields}


def extraction_line(figures: Mapping[str, Any]) -> str:
    """`extraction (deployed layout): category 92% agree, κ 0.88 on 92 reference replies`."""
    parts = []
    for name, field in figures.get("fields", {}).items():
        agreement = field.get("agreement")
        share = "n/a" if agreement is None else f"{agreement:.0%}"
        parts.append(f"{name} {share} agree, κ {_num(field.get('kappa'))}")
    errors = figures.get("n_errors") or 0
    tail = f"; {errors} without an extraction" if errors else ""
    fields = ", ".join(parts) or "no field"
    return f"extraction (deployed layout): {fields} on {figures.get('n', 0)} reference replies{tail}"
