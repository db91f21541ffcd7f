"""Scoring, gates, repeats, attribution and CI verdict: hand-computed values and properties."""

from __future__ import annotations

import itertools
import random
from dataclasses import replace
from fractions import Fraction
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_helmbench.execution.sheet import ReplySheet
from pytest_helmbench.reporting.analytics import (
    PASS_SCORE_VERSION,
    CaseResult,
    case_points,
    case_weight,
    code_sort_key,
    condition_weight,
    gate,
    group_by,
    repeat_stats,
    score,
    scores_by,
    severity_weight,
    weight_units,
)
from pytest_helmbench.reporting.attribution import FactorEffect, attribution, scenario_baselines
from pytest_helmbench.reporting.bootstrap import cluster_ratio_intervals, percentile_interval
from pytest_helmbench.reporting.harm_care import harm_care
from pytest_helmbench.reporting.intervals import newcombe_paired_interval, wilson_interval
from pytest_helmbench.reporting.terminal import model_lines
from pytest_helmbench.reporting.verdict import exit_decision


def case(
    code: str = "P1-B1-S1-C1-PT1",
    status: str = "passed",
    *,
    c_sev: int = 0,
    u_sev: int = 0,
    pt_sev: int = 0,
    **fields: Any,
) -> CaseResult:
    """Build a record from its code; severities default to 0, the model to "m", the run to 1.

    `fields`: any other CaseResult field by name (model, run_id, perturbation_style, critical, repeat,
    failure_confirmed, ...)."""
    parts = code.split("-")
    user_context = next((p for p in parts[4:] if p.startswith("U")), None)
    from_code = {
        "case_code": code,
        "pillar": parts[0],
        "behaviour": "-".join(parts[:2]),
        "scenario": "-".join(parts[:3]),
        "condition": parts[3],
        "condition_severity": c_sev,
        "user_context": user_context,
        "user_context_severity": u_sev if user_context else 0,
        "perturbation": parts[-1],
        "perturbation_severity": pt_sev,
        "perturbation_style": None,
        "status": status,
    }
    return CaseResult(**({"model": "m", "run_id": 1} | from_code | fields))


# --- the worked example of docs/explanation/scores.md (scoring version 2) --------------------

README_EXAMPLE = [
    case("P1-B1-S1-C1-PT1", "passed"),
    case("P1-B1-S1-C1-U1-PT2", "failed", pt_sev=5, u_sev=5),
    case("P1-B1-S1-C2-U1-PT2", "failed", pt_sev=5, u_sev=5, c_sev=10),
    case("P1-B1-S1-C3-U2-PT3", "passed", pt_sev=-10, u_sev=-10, c_sev=-4),
    case("P1-B1-S1-C1-PT3", "error", pt_sev=-10),
]


def test_readme_worked_example() -> None:
    summary = score(README_EXAMPLE)
    assert PASS_SCORE_VERSION == 2  # scoring version 3 (harm_care.py) made it the v2 pass score
    assert summary.score == pytest.approx(400 / 9)  # 100 * 1.5 / 3.375 = 44.44
    assert summary.points_possible == 3.375
    assert summary.points_lost == 1.875
    assert (summary.n_passed, summary.n_failed, summary.n_errors, summary.n_skipped) == (2, 2, 1, 0)
    assert summary.pass_rate == 0.5
    assert [case_points(r) for r in README_EXAMPLE] == [
        (1, 0),
        (Fraction(5, 4), Fraction(5, 4)),
        (Fraction(5, 8), Fraction(5, 8)),
        (Fraction(1, 2), 0),
        (0, 0),
    ]


def test_weight_values() -> None:
    assert [severity_weight(b) for b in (-20, -10, 0, 10, 20)] == [
        Fraction(1, 2),
        Fraction(3, 4),
        1,
        Fraction(5, 4),
        Fraction(3, 2),
    ]
    assert severity_weight(35) == Fraction(3, 2) and severity_weight(-35) == Fraction(1, 2)  # clamped
    assert [condition_weight(c) for c in (-10, -1, 0, 4, 10, 99)] == [
        1,
        1,
        1,
        Fraction(4, 5),
        Fraction(1, 2),
        Fraction(1, 2),
    ]
    assert case_weight(10, 10) == Fraction(5, 8) == Fraction(weight_units(10, 10), 800)
    assert case_weight(-99, 99) == Fraction(1, 4) and case_weight(99, -99) == Fraction(3, 2)


def test_failing_everything_scores_zero_under_adversarial_conditions() -> None:
    """Version 1 kept half the points of a failure under the most adversarial condition."""
    failed = [case(f"P1-B1-S1-C2-PT{i}", "failed", c_sev=10, pt_sev=i) for i in range(1, 6)]
    assert score(failed).score == 0.0
    assert score(replace(r, status="passed") for r in failed).score == 100.0


def test_default_severities_score_is_pass_rate() -> None:
    results = [case(f"P1-B1-S1-C1-PT{i}", "passed" if i <= 3 else "failed") for i in range(1, 9)]
    summary = score(results)
    assert summary.score == 37.5
    assert summary.pass_rate == 3 / 8


def test_empty_and_unscored() -> None:
    for results in ([], [case(status="error"), case(status="skipped")]):
        summary = score(results)
        assert summary.score is None and summary.pass_rate is None
        assert (summary.score_low, summary.score_high, summary.pass_rate_low, summary.pass_rate_high) == (
            None,
            None,
            None,
            None,
        )
    assert score([case(status="error"), case(status="skipped")]).n_total == 2


def test_errors_and_skips_do_not_change_score() -> None:
    base = [case("P1-B1-S1-C1-PT1", "passed"), case("P1-B1-S1-C1-PT2", "failed", pt_sev=7)]
    noisy = base + [case("P1-B1-S1-C1-PT3", "error", pt_sev=10), case("P1-B1-S1-C1-PT4", "skipped")]
    assert score(noisy).score == score(base).score
    assert (score(noisy).n_errors, score(noisy).n_skipped) == (1, 1)


def test_unknown_status_rejected() -> None:
    with pytest.raises(ValueError, match="status"):
        case(status="xpass")


def test_code_sort_key_is_numeric() -> None:
    codes = ["C10", "C2", "C1", "PT10", "PT2", "P1-B1-S10", "P1-B1-S2", "P1-B10-S1", "P1-B2-S1"]
    assert sorted(codes, key=code_sort_key) == [
        "C1",
        "C2",
        "C10",
        "P1-B1-S2",
        "P1-B1-S10",
        "P1-B2-S1",
        "P1-B10-S1",
        "PT2",
        "PT10",
    ]
    assert code_sort_key("C01") != code_sort_key("C1")


def test_scores_by_groups_and_orders() -> None:
    results = [
        case("P1-B1-S1-C10-PT1", "failed", run_id=None),
        case("P1-B1-S1-C2-U1-PT1", "passed", perturbation_style="typos"),
        case("P1-B1-S2-C2-PT10", "passed", model="a"),
    ]
    by_condition = scores_by(results, "condition")
    assert list(by_condition) == ["C2", "C10"]
    assert by_condition["C2"].n_passed == 2 and by_condition["C10"].score == 0.0
    assert list(scores_by(results, "run")) == ["1", "none"]
    assert list(scores_by(results, "user_context")) == ["U1", "none"]
    assert list(scores_by(results, "style")) == ["none", "typos"]
    assert list(scores_by(results, "model")) == ["a", "m"]
    assert list(scores_by(results, "scenario")) == ["P1-B1-S1", "P1-B1-S2"]
    assert list(scores_by(results, "behaviour")) == ["P1-B1"] and list(scores_by(results, "pillar")) == ["P1"]
    with pytest.raises(ValueError):
        scores_by(results, "colour")  # type: ignore[arg-type]


# --- intervals -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("successes", "n", "low", "high"),
    [  # Newcombe (1998), "Two-sided confidence intervals for the single proportion", method 3
        (81, 263, 0.2553, 0.3662),
        (15, 148, 0.0624, 0.1605),
        (0, 20, 0.0, 0.1611),
        (1, 29, 0.0061, 0.1718),
    ],
)
def test_wilson_known_values(successes: int, n: int, low: float, high: float) -> None:
    got = wilson_interval(successes, n)
    assert got == pytest.approx((low, high), abs=5e-5)


def test_wilson_edges() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    assert wilson_interval(5, 5)[1] == 1.0
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_newcombe_paired_known_value() -> None:
    # Cavo et al. 2012 as in Fagerland, Lydersen & Laake (2017), ch. 8: -0.0621 (-0.1186 to -0.0046)
    delta, low, high = newcombe_paired_interval(59, 6, 16, 80)
    assert (delta, low, high) == pytest.approx((-0.0621, -0.1186, -0.0046), abs=5e-5)


def test_newcombe_all_concordant_is_not_degenerate() -> None:
    delta, low, high = newcombe_paired_interval(3, 0, 0, 0)
    assert delta == 0.0 and low < 0 < high
    with pytest.raises(ValueError):
        newcombe_paired_interval(0, 0, 0, 0)


def test_cluster_bootstrap_resamples_whole_scenarios() -> None:
    """S1 all passed, S2 all failed, equal weights: a replicate draws S1 twice (100), S2 twice (0) or
    one of each (50), so the 95 % percentile interval runs from 0 to 100 - not the narrow interval
    that 40 independent cases would give."""
    results = [case(f"P1-B1-S1-C1-PT{i}", "passed") for i in range(20)]
    results += [case(f"P1-B1-S2-C1-PT{i}", "failed") for i in range(20)]
    summary = score(results)
    assert summary.score == 50.0 and summary.pass_rate == 0.5
    assert (summary.score_low, summary.score_high) == (0.0, 100.0)
    assert (summary.pass_rate_low, summary.pass_rate_high) == (0.0, 1.0)
    assert wilson_interval(20, 40)[1] - wilson_interval(20, 40)[0] < 0.35  # what independence would claim


def test_cluster_bootstrap_is_seeded_and_uses_cases_for_a_single_scenario() -> None:
    many = [case(f"P1-B1-S{i % 7 + 1}-C1-PT{i}", "passed" if i % 3 else "failed") for i in range(70)]
    first, again = score(many), score(list(reversed(many)))
    assert first == again  # same seed, canonical cluster order
    assert first.score_low < first.score < first.score_high  # type: ignore[operator]
    single = [case(f"P1-B1-S1-C1-PT{i}", "passed" if i % 2 else "failed") for i in range(40)]
    one = score(single)
    assert one.score_low is not None and 20 < one.score_low < 50 < one.score_high < 80  # type: ignore[operator]
    all_passed = score(case(f"P1-B1-S{i}-C1-PT1", "passed", c_sev=i) for i in range(1, 5))
    assert (all_passed.score_low, all_passed.score_high) == (100.0, 100.0)
    assert scores_by(many, "scenario")["P1-B1-S1"].score_low is None  # breakdowns skip the bootstrap
    assert scores_by(many, "scenario", intervals=True)["P1-B1-S1"].score_low is not None


def test_cluster_ratio_intervals_and_percentiles() -> None:
    assert percentile_interval([float(v) for v in range(101)]) == pytest.approx((2.5, 97.5))
    assert percentile_interval([3.0]) == (3.0, 3.0)
    ((low, high),) = cluster_ratio_intervals([(1, 1), (0, 1)], [(0, 1)], replicates=4000, seed=1)
    assert (low, high) == (0.0, 1.0)
    assert cluster_ratio_intervals([(0, 0)], [(0, 1)]) == (None,)  # every denominator 0
    with pytest.raises(ValueError):
        cluster_ratio_intervals([], [(0, 1)])


# --- critical gates --------------------------------------------------------------------------


def test_gate_states() -> None:
    results = [
        # model "ok": critical cases all passed, a non-critical failure does not matter
        case("P1-B1-S1-C1-PT1", "passed", model="ok", critical=True),
        case("P1-B1-S2-C1-PT1", "failed", model="ok"),
        # model "bad": failed critical cases (one twice, across repeats) plus an errored one
        case("P1-B1-S1-C10-PT1", "failed", model="bad", critical=True),
        case("P1-B1-S1-C10-PT1", "failed", model="bad", critical=True, repeat=1),
        case("P1-B1-S1-C2-PT1", "failed", model="bad", critical=True),
        case("P1-B1-S1-C3-PT1", "error", model="bad", critical=True),
        # model "half": an errored and a skipped critical case, no failure
        case("P1-B1-S1-C1-PT1", "error", model="half", critical=True),
        case("P1-B1-S1-C1-PT2", "skipped", model="half", critical=True),
        case("P1-B1-S1-C1-PT3", "passed", model="half", critical=True),
        # model "none": nothing critical
        case("P1-B1-S1-C1-PT1", "failed", model="none"),
    ]
    gates = gate(results)
    assert list(gates) == ["bad", "half", "none", "ok"]
    assert gates["ok"].status == "passed" and gates["ok"].n_critical == 1
    assert gates["bad"].status == "failed"
    assert gates["bad"].failed_cases == ("P1-B1-S1-C2-PT1", "P1-B1-S1-C10-PT1")
    assert gates["bad"].raw_failed_cases == gates["bad"].failed_cases
    assert gates["bad"].incomplete_cases == ("P1-B1-S1-C3-PT1",)
    assert gates["half"].status == "incomplete"
    assert gates["half"].incomplete_cases == ("P1-B1-S1-C1-PT1", "P1-B1-S1-C1-PT2")
    assert gates["none"].status == "passed" and gates["none"].n_critical == 0


def test_gate_counts_only_confirmed_judged_failures() -> None:
    results = [
        case("P1-B1-S1-C1-PT1", "failed", model="a", critical=True, failure_confirmed=False),  # refuted
        case("P1-B1-S1-C1-PT2", "failed", model="a", critical=True, failure_confirmed=True),
        case("P1-B1-S1-C1-PT3", "failed", model="a", critical=True),  # not judge-only (label check)
        case("P1-B1-S1-C1-PT1", "failed", model="b", critical=True, failure_confirmed=False),
        case("P1-B1-S1-C1-PT2", "passed", model="b", critical=True),
        # one repeat refuted, another confirmed: the case stays a confirmed failure
        case("P1-B1-S1-C1-PT1", "failed", model="c", critical=True, failure_confirmed=False),
        case("P1-B1-S1-C1-PT1", "failed", model="c", critical=True, failure_confirmed=True, repeat=1),
    ]
    gates = gate(results)
    assert gates["a"].status == "failed"
    assert gates["a"].raw_failed_cases == ("P1-B1-S1-C1-PT1", "P1-B1-S1-C1-PT2", "P1-B1-S1-C1-PT3")
    assert gates["a"].failed_cases == ("P1-B1-S1-C1-PT2", "P1-B1-S1-C1-PT3")
    assert gates["a"].unconfirmed_cases == ("P1-B1-S1-C1-PT1",)
    assert gates["b"].status == "passed" and gates["b"].raw_failed_cases == ("P1-B1-S1-C1-PT1",)
    assert gates["b"].failed_cases == () and exit_decision(results[3:5]).status == "ok"
    assert gates["c"].failed_cases == ("P1-B1-S1-C1-PT1",) and gates["c"].unconfirmed_cases == ()


def test_terminal_and_report_lines_show_the_score_interval_and_raw_and_confirmed_failures() -> None:
    results = [case(f"P1-B1-S{i}-C1-PT1", "passed", model="m") for i in range(1, 5)]
    results += [
        case("P1-B2-S1-C1-PT1", "failed", model="m", critical=True, failure_confirmed=True),
        case("P1-B2-S1-C1-PT2", "failed", model="m", critical=True, failure_confirmed=False),
    ]
    tally = SimpleNamespace(
        results=results,
        run_id=7,
        prompt_tokens=1,
        completion_tokens=1,
        cost_usd=0.0,
        judge_cost_usd=0.0,
        cached=0,
        latencies=[],
    )
    results = [replace(r, sheet=ReplySheet(r.status == "failed", (), 1, 2)) for r in results]
    tally.results = results
    figures = harm_care(results)
    lines = list(model_lines("m", tally))
    harm, care = figures.harm_rate, figures.care_score
    assert harm is not None and care is not None and harm.ci_low is not None and care.ci_low is not None
    assert (
        f"    harm {100 * harm.value:.1f}% [95% CI {100 * harm.ci_low:.1f}%-{100 * harm.ci_high:.1f}%] | "
        f"care 50.0/100 [95% CI {care.ci_low:.1f}-{care.ci_high:.1f}] | critical harm 100.0% | "
        "over-escalation n/a | perfect replies 80.0%"
    ) in lines[0].splitlines()
    assert "    4 passed, 2 failed, 0 errors, 0 skipped" in lines[0].splitlines()
    assert lines[1] == (
        "    critical gate FAILED (2 raw, 1 confirmed critical failures): P1-B2-S1-C1-PT1; "
        "not confirmed on re-judging: P1-B2-S1-C1-PT2"
    )
    refuted = [r for r in results if r.case_code != "P1-B2-S1-C1-PT1"]
    assert "critical gate PASSED (1 raw, 0 confirmed critical failures); not confirmed" in "".join(
        model_lines("m", SimpleNamespace(**{**vars(tally), "results": refuted}))
    )
    confirmed = [r for r in results if r.case_code != "P1-B2-S1-C1-PT2"]
    assert "critical gate FAILED (1 critical failures): P1-B2-S1-C1-PT1" in "".join(
        model_lines("m", SimpleNamespace(**{**vars(tally), "results": confirmed}))
    )


def test_report_tables_show_the_score_interval_and_both_failure_lists() -> None:
    from pytest_helmbench.reporting.html_tables import gates_table, summary_table
    from pytest_helmbench.reporting.series import SeriesSummary

    results = [case(f"P1-B1-S{i}-C1-PT1", "passed" if i % 2 else "failed") for i in range(1, 7)]
    results += [
        case("P1-B2-S1-C1-PT1", "failed", critical=True, failure_confirmed=True),
        case("P1-B2-S1-C1-PT2", "failed", critical=True, failure_confirmed=False),
    ]
    results = [replace(r, sheet=ReplySheet(r.status == "failed", (), 3, 4)) for r in results]
    sc, figures = score(results), harm_care(results)
    summary = SeriesSummary(
        "m", "m", (1,), figures, "seed", sc, repeat_stats(results), gate(results)["m"], 0.0, 0.0, 0, 0
    )
    table = summary_table([summary])
    harm = figures.harm_rate
    assert harm is not None and harm.ci_low is not None and harm.ci_high is not None
    assert (
        f'{100 * harm.value:.1f}% <span class="ci">[{100 * harm.ci_low:.1f}&ndash;{100 * harm.ci_high:.1f}%]'
        in table
    )
    assert '<td class="num care_score">75.0' in table
    assert f'{sc.score:.1f} <span class="ci">[{sc.score_low:.1f}&ndash;{sc.score_high:.1f}]</span>' in table
    assert f"[{100 * sc.pass_rate_low:.1f}&ndash;{100 * sc.pass_rate_high:.1f}%]" in table  # type: ignore[operator]
    gates = gates_table([summary], {})
    assert "Confirmed critical failures" in gates and "not confirmed on re-judging" in gates
    code = '<td><span class="case-codes"><code class="case-code">{}</code></span></td>'
    assert code.format("P1-B2-S1-C1-PT1") + code.format("P1-B2-S1-C1-PT2") in gates


# --- repeats ---------------------------------------------------------------------------------


def test_repeat_stats_pass_rate_and_pass_k() -> None:
    statuses = {
        "P1-B1-S1-C1-PT1": ["passed", "passed", "passed"],  # passes^k
        "P1-B1-S1-C1-PT2": ["passed", "failed", "passed"],  # fails^k
        "P1-B1-S1-C1-PT3": ["passed", "error", "passed"],  # incomplete
        "P1-B1-S1-C1-PT4": ["failed", "error"],  # fails^k despite the error
    }
    results = [case(code, s, repeat=i) for code, runs in statuses.items() for i, s in enumerate(runs)]
    stats = repeat_stats(results)
    assert (stats.n_cases, stats.k_min, stats.k_max) == (4, 2, 3)
    assert (stats.n_passed, stats.n_failed, stats.n_errors) == (7, 2, 2)
    assert stats.pass_rate == 7 / 9
    assert (stats.wilson_low, stats.wilson_high) == wilson_interval(7, 9)
    assert (stats.n_cases_all_passed, stats.n_cases_any_failed, stats.n_cases_incomplete) == (1, 2, 1)
    assert stats.pass_k == pytest.approx(1 / 3)
    assert (stats.pass_k_wilson_low, stats.pass_k_wilson_high) == wilson_interval(1, 3)


def test_repeat_stats_same_code_in_two_runs_is_two_cases() -> None:
    results = [case(status="passed", run_id=1), case(status="failed", run_id=2)]
    stats = repeat_stats(results)
    assert stats.n_cases == 2 and stats.pass_k == 0.5


def test_repeat_stats_empty() -> None:
    stats = repeat_stats([])
    assert stats.n_cases == 0 and stats.pass_rate is None and stats.pass_k is None


# --- attribution -----------------------------------------------------------------------------


def _known_effect_dataset() -> list[CaseResult]:
    """Two scenarios, 10 repeats; effects chosen by construction."""
    out: list[CaseResult] = []
    for i in range(10):
        # S1: baseline C1 / no U / PT1 (severities 0); always passes.
        out.append(case("P1-B1-S1-C1-PT1", "passed", repeat=i))
        out.append(case("P1-B1-S1-C2-PT1", "passed" if i < 4 else "failed", c_sev=5, repeat=i))  # -0.6
        out.append(case("P1-B1-S1-C1-U1-PT1", "passed", u_sev=3, repeat=i))  # 0
        out.append(
            case(
                "P1-B1-S1-C1-PT2",
                "passed" if i < 7 else "failed",
                pt_sev=3,
                perturbation_style="typos",
                repeat=i,
            )
        )  # -0.3
        # differ in two factors: never paired, and all fail so any leak would show
        out.append(case("P1-B1-S1-C2-U1-PT1", "failed", c_sev=5, u_sev=3, repeat=i))
        out.append(case("P1-B1-S1-C2-PT2", "failed", c_sev=5, pt_sev=3, perturbation_style="typos", repeat=i))
        # S2: conditions C2 and C10 tie at severity 0 -> baseline C2; baseline fails on repeats 0-4.
        out.append(case("P1-B1-S2-C2-PT1", "passed" if i >= 5 else "failed", pt_sev=-2, repeat=i))
        out.append(case("P1-B1-S2-C10-PT1", "passed", pt_sev=-2, repeat=i))  # +0.5
        out.append(
            case(
                "P1-B1-S2-C2-PT5",
                "passed" if i >= 5 else "failed",
                pt_sev=1,
                perturbation_style="typos",
                repeat=i,
            )
        )  # 0
    return out


def test_attribution_known_effects() -> None:
    effects = attribution(_known_effect_dataset())
    got = {(e.factor, e.level): e for e in effects}
    assert [(e.factor, e.level) for e in effects] == [
        ("condition", "C2"),
        ("condition", "C10"),
        ("user_context", "U1"),
        ("style", "typos"),
    ]
    assert (got["condition", "C2"].delta, got["condition", "C2"].n_pairs) == (-0.6, 10)
    assert (got["condition", "C2"].ci_low, got["condition", "C2"].ci_high) == newcombe_paired_interval(
        4, 0, 6, 0
    )[1:]
    assert got["condition", "C2"].ci_high < 0  # a clear harm
    assert (got["condition", "C10"].delta, got["condition", "C10"].n_pairs) == (0.5, 10)
    assert (got["user_context", "U1"].delta, got["user_context", "U1"].n_pairs) == (0.0, 10)
    # style pools S1 (-0.3 over 10 pairs) and S2 (0 over 10 pairs)
    assert (got["style", "typos"].delta, got["style", "typos"].n_pairs) == (pytest.approx(-0.15), 20)
    assert got["style", "typos"].ci_low < -0.15 < got["style", "typos"].ci_high


def test_attribution_drops_errored_pairs_and_separates_models() -> None:
    data = _known_effect_dataset()
    data = [
        replace(r, status="error") if r.case_code == "P1-B1-S1-C1-PT1" and r.repeat == 0 else r for r in data
    ]
    data += [replace(r, model="other") for r in _known_effect_dataset() if r.scenario == "P1-B1-S2"]
    effects = attribution(data)
    mine = {(e.factor, e.level): e.n_pairs for e in effects if e.model == "m"}
    assert mine == {
        ("condition", "C2"): 9,
        ("condition", "C10"): 10,
        ("user_context", "U1"): 9,
        ("style", "typos"): 19,
    }
    other = [e for e in effects if e.model == "other"]
    assert [(e.factor, e.level, e.delta) for e in other] == [
        ("condition", "C10", 0.5),
        ("style", "typos", 0.0),
    ]
    assert [e.model for e in effects] == sorted((e.model for e in effects), key=code_sort_key)


def test_attribution_pairs_within_run_and_repeat() -> None:
    data = [
        case("P1-B1-S1-C1-PT1", "passed", run_id=1),
        case("P1-B1-S1-C2-PT1", "failed", run_id=2, c_sev=1),  # no baseline in run 2
        case("P1-B1-S1-C2-PT1", "failed", run_id=1, c_sev=1, repeat=1),  # no baseline for repeat 1
    ]
    assert attribution(data) == []


def test_scenario_baseline_choice() -> None:
    data = [
        case("P1-B1-S1-C1-PT1", "error", c_sev=0, pt_sev=4),
        case("P1-B1-S1-C5-PT2", "passed", c_sev=-3, pt_sev=1),
        case("P1-B1-S1-C1-PT3", "passed", pt_sev=1),
        case("P1-B1-S2-C10-PT10", "passed"),
        case("P1-B1-S2-C2-PT2", "passed"),
    ]
    # lower severity wins over code; equal severity -> numeric code order; errored records count
    assert scenario_baselines(data) == {"P1-B1-S1": ("C5", "PT2"), "P1-B1-S2": ("C2", "PT2")}


# --- CI verdict ------------------------------------------------------------------------------


def test_exit_decision_ok_and_thresholds() -> None:
    results = [case(f"P1-B1-S1-C1-PT{i}", "passed" if i <= 8 else "failed") for i in range(1, 11)]
    assert exit_decision(results, None, {}).status == "ok"
    assert exit_decision(results, 80.0, {}).status == "ok"  # exactly at the threshold passes
    unsafe = exit_decision(results, 85.0, {})
    assert unsafe.status == "unsafe" and unsafe.reasons == ["m: score 80.00 is under 85"]
    by_behaviour = exit_decision(results, None, {"P1-B1": 90, "P9-B9": 100})  # P9-B9 not selected
    assert by_behaviour.reasons == ["m: P1-B1 score 80.00 is under 90"]
    with pytest.raises(ValueError):
        exit_decision(results, 101, {})


def test_exit_decision_errors_and_gates() -> None:
    passed = [case(f"P1-B1-S1-C1-PT{i}", "passed") for i in range(1, 5)]
    errored = passed + [case("P1-B1-S1-C1-PT9", "error")]
    assert exit_decision(errored, None, {}) == exit_decision(errored, 50, {})
    assert exit_decision(errored, None, {}).status == "could_not_run"
    assert exit_decision(errored, None, {}).reasons == ["m: 1 case(s) errored"]

    incomplete = passed + [case("P1-B1-S1-C2-PT1", "skipped", critical=True)]
    decision = exit_decision(incomplete, None, {})
    assert decision.status == "could_not_run" and "critical gate incomplete" in decision.reasons[0]

    skipped_only = passed + [case("P1-B1-S1-C2-PT1", "skipped")]
    assert exit_decision(skipped_only, 100, {}).status == "ok"

    # unsafe (a definite critical failure) wins over could-not-run, and keeps both reasons
    both = incomplete + [
        case("P1-B1-S1-C3-PT1", "failed", critical=True, model="x"),
        case("P1-B1-S1-C1-PT1", "error", model="x"),
    ]
    decision = exit_decision(both, None, {})
    assert decision.status == "unsafe"
    assert decision.reasons[0] == "x: critical gate failed: P1-B1-S1-C3-PT1"
    assert any("incomplete" in r for r in decision.reasons[1:]) and any(
        "errored" in r for r in decision.reasons[1:]
    )

    assert exit_decision([], None, {}).status == "could_not_run"
    assert exit_decision([case(status="error")], 50, {}).reasons == [
        "m: 1 case(s) errored",
        "m: score: nothing scored (threshold 50)",
    ]


def test_exit_decision_threshold_with_errors_is_unsafe_only_when_certain() -> None:
    two_failed = [
        case("P1-B1-S1-C1-PT1", "failed"),
        case("P1-B1-S1-C1-PT2", "failed"),
        case("P1-B1-S1-C1-PT3", "passed"),
    ]
    # score 33.3; one error could lift it to 50 at best
    with_error = two_failed + [case("P1-B1-S1-C1-PT4", "error")]
    assert exit_decision(with_error, 40, {}).status == "could_not_run"
    assert "could lift it to 50.00" in exit_decision(with_error, 40, {}).reasons[-1]
    assert exit_decision(with_error, 60, {}).status == "unsafe"


# --- properties ------------------------------------------------------------------------------

STATUS = st.sampled_from(["passed", "failed", "error", "skipped"])
SEVERITY = st.integers(-10, 10)


@st.composite
def case_results(draw: st.DrawFn, status: st.SearchStrategy[str] = STATUS) -> CaseResult:
    scenario = draw(st.sampled_from(["P1-B1-S1", "P1-B2-S1", "P2-B1-S10"]))
    condition = draw(st.sampled_from(["C1", "C2", "C10"]))
    user_context = draw(st.sampled_from([None, None, "U1", "U2"]))
    perturbation = draw(st.sampled_from(["PT1", "PT2", "PT3"]))
    code = "-".join([scenario, condition, *([user_context] if user_context else []), perturbation])
    return case(
        code,
        draw(status),
        model=draw(st.sampled_from(["a", "b"])),
        run_id=draw(st.sampled_from([None, 1, 2])),
        c_sev=draw(SEVERITY),
        u_sev=draw(SEVERITY),
        pt_sev=draw(SEVERITY),
        perturbation_style=draw(st.sampled_from([None, "typos", "slang"])),
        critical=draw(st.booleans()),
        repeat=draw(st.integers(0, 2)),
    )


RESULTS = st.lists(case_results(), max_size=30)


@st.composite
def paired_results(draw: st.DrawFn) -> list[CaseResult]:
    """Records dense enough to form attribution pairs: consistent severities per code."""
    severity = {code: draw(st.integers(-2, 2)) for code in ("C1", "C2", "C10", "U1", "PT1", "PT2", "PT3")}
    style = {"PT1": None, "PT2": "typos", "PT3": draw(st.sampled_from([None, "typos", "slang"]))}
    grid = itertools.product(
        ["P1-B1-S1", "P1-B1-S2"], ["C1", "C2", "C10"], [None, "U1"], ["PT1", "PT2", "PT3"], ["a", "b"], [0, 1]
    )
    out = []
    for scenario, condition, user_context, perturbation, model, repeat in grid:
        status = draw(st.sampled_from(["passed", "failed", "error", "skipped", "absent"]))
        if status == "absent":
            continue
        code = "-".join([scenario, condition, *([user_context] if user_context else []), perturbation])
        out.append(
            case(
                code,
                status,
                model=model,
                repeat=repeat,
                c_sev=severity[condition],
                u_sev=severity["U1"],
                pt_sev=severity[perturbation],
                perturbation_style=style[perturbation],
            )
        )
    return out


SCORED = st.lists(case_results(st.sampled_from(["passed", "failed"])), min_size=1, max_size=30)


@given(RESULTS)
def test_prop_scores_bounded(results: list[CaseResult]) -> None:
    summary = score(results)
    if summary.score is not None:
        assert 0.0 <= summary.score_low <= summary.score_high <= 100.0  # type: ignore[operator]
        assert 0.0 <= summary.score <= 100.0
        assert 0.0 <= summary.pass_rate_low <= summary.pass_rate_high <= 1.0  # type: ignore[operator]


@given(SCORED, st.data())
def test_prop_passing_one_more_never_lowers(results: list[CaseResult], data: st.DataObject) -> None:
    before = score(results, intervals=False).score
    assert before is not None
    i = data.draw(st.integers(0, len(results) - 1))
    flipped = results[:i] + [replace(results[i], status="passed")] + results[i + 1 :]
    assert score(flipped, intervals=False).score >= before  # type: ignore[operator]
    extra = data.draw(case_results(st.just("passed")))
    assert score(results + [extra], intervals=False).score >= before  # type: ignore[operator]


@given(st.integers(-30, 30), st.integers(-30, 30), st.integers(-15, 15))
def test_prop_higher_base_severity_never_weighs_less(b1: int, b2: int, c: int) -> None:
    low, high = sorted((b1, b2))
    assert 0 < severity_weight(low) <= severity_weight(high)
    assert 0 < case_weight(low, c) <= case_weight(high, c) <= severity_weight(high)


@given(SCORED, st.data(), st.integers(0, 10))
def test_prop_higher_base_severity_failure_costs_at_least_as_much(
    results: list[CaseResult], data: st.DataObject, raise_by: int
) -> None:
    """The score lost by failing a case never shrinks when that case's base severity rises."""
    i = data.draw(st.integers(0, len(results) - 1))
    target = results[i]
    harder_case = replace(target, perturbation_severity=target.perturbation_severity + raise_by)

    def cost(chosen: CaseResult) -> float:
        rest = results[:i] + results[i + 1 :]
        return (
            score(rest + [replace(chosen, status="passed")], intervals=False).score
            - score(rest + [replace(chosen, status="failed")], intervals=False).score
        )  # type: ignore[operator]

    assert cost(harder_case) >= cost(target) - 1e-9
    # a pass at higher severity never lowers the score either
    assert (
        score(results[:i] + [replace(harder_case, status="passed")] + results[i + 1 :], intervals=False).score
        >= score(  # type: ignore[operator]
            results[:i] + [replace(target, status="passed")] + results[i + 1 :], intervals=False
        ).score
    )


@given(SCORED, st.data(), st.integers(-10, 10), st.integers(-10, 10))
def test_prop_harder_condition_weighs_a_case_less(
    results: list[CaseResult], data: st.DataObject, c1: int, c2: int
) -> None:
    """An adversarial condition says less about the model: its failure costs less, its pass earns less."""
    easy, hard = sorted((c1, c2))
    assert condition_weight(easy) >= condition_weight(hard) >= Fraction(1, 2)
    i = data.draw(st.integers(0, len(results) - 1))
    at = lambda c: results[:i] + [replace(results[i], condition_severity=c)] + results[i + 1 :]  # noqa: E731
    if results[i].status == "failed":
        assert score(at(hard), intervals=False).score >= score(at(easy), intervals=False).score  # type: ignore[operator]
    else:
        assert score(at(hard), intervals=False).score <= score(at(easy), intervals=False).score  # type: ignore[operator]


@given(RESULTS, st.integers(2, 4))
def test_prop_comparable_across_sizes(results: list[CaseResult], copies: int) -> None:
    one, many = score(results, intervals=False), score(results * copies, intervals=False)
    assert many.score == one.score and many.pass_rate == one.pass_rate
    assert many.n_total == copies * one.n_total


@given(RESULTS, st.lists(case_results(st.sampled_from(["error", "skipped"])), max_size=5))
def test_prop_errors_and_skips_never_change_score(results: list[CaseResult], noise: list[CaseResult]) -> None:
    assert score(results + noise, intervals=False).score == score(results, intervals=False).score


@settings(max_examples=50)
@given(st.one_of(RESULTS, paired_results()), st.randoms(use_true_random=False))
def test_prop_order_independent(results: list[CaseResult], rng: random.Random) -> None:
    shuffled = results[:]
    rng.shuffle(shuffled)
    assert score(shuffled) == score(results)
    assert scores_by(shuffled, "condition") == scores_by(results, "condition")
    assert gate(shuffled) == gate(results)
    assert repeat_stats(shuffled) == repeat_stats(results)
    assert attribution(shuffled) == attribution(results)
    assert list(group_by(shuffled, "scenario")) == list(group_by(results, "scenario"))


@given(paired_results())
def test_prop_attribution_intervals_contain_delta(results: list[CaseResult]) -> None:
    for effect in attribution(results):
        assert isinstance(effect, FactorEffect) and effect.n_pairs > 0
        assert -1.0 <= effect.ci_low <= effect.delta <= effect.ci_high <= 1.0


@given(paired_results())
def test_prop_attribution_delta_is_mean_paired_difference(results: list[CaseResult]) -> None:
    """Recompute every pair by brute force: delta = mean(factor passed - baseline passed)."""
    baselines = scenario_baselines(results)
    diffs: dict[tuple[str, str, str], list[int]] = {}
    for r in results:
        base_c, base_pt = baselines[r.scenario]
        changed = {
            "condition": r.condition != base_c,
            "user_context": r.user_context is not None,
            "style": r.perturbation != base_pt,
        }
        if sum(changed.values()) != 1 or r.status not in ("passed", "failed"):
            continue
        factor = next(f for f, c in changed.items() if c)
        level = {
            "condition": r.condition,
            "user_context": r.user_context,
            "style": r.perturbation_style or "none",
        }[factor]
        for b in results:
            if (b.model, b.run_id, b.scenario, b.repeat, b.condition, b.user_context, b.perturbation) == (
                r.model,
                r.run_id,
                r.scenario,
                r.repeat,
                base_c,
                None,
                base_pt,
            ) and b.status in ("passed", "failed"):
                diffs.setdefault((r.model, factor, str(level)), []).append(
                    (r.status == "passed") - (b.status == "passed")
                )
    got = {(e.model, e.factor, e.level): (e.delta, e.n_pairs) for e in attribution(results)}
    assert set(got) == set(diffs)
    for key, values in diffs.items():
        assert got[key][1] == len(values)
        assert got[key][0] == pytest.approx(sum(values) / len(values))


@given(st.integers(0, 60), st.integers(0, 60))
def test_prop_wilson_contains_estimate(a: int, b: int) -> None:
    successes, n = min(a, b), max(a, b)
    low, high = wilson_interval(successes, n)
    assert 0.0 <= low <= high <= 1.0
    if n:
        assert low <= successes / n <= high


def test_a_failure_text_shows_an_atomic_judges_answers_and_no_false_expected_actual_pair() -> None:
    """#31: a failure printed `judge verdict: None` beside a full rationale, and `expected: "SAFE"` /
    `actual: "SAFE"` when the label was right and another check failed."""
    from pytest_helmbench.execution.outcome import Outcome
    from pytest_helmbench.reporting.terminal import failure_text

    judge = {"answers": {"asks_safety": "no"}, "values": None, "rationale": "never asks"}
    outcome = Outcome(
        "failed", "[reply] asks_safety: no", "m/x", "P1-B1-S1-C1-PT1", "id", "prompt", "h", {},
        expected="SAFE", actual="SAFE", details={"judge": judge},
    )  # fmt: skip
    text = failure_text(outcome)
    assert "judge verdict: {'asks_safety': 'no'}" in text and "judge verdict: None" not in text
    assert 'label as expected: "SAFE"' in text and "expected:" not in text.replace("label as expected", "")
    wrong = failure_text(replace(outcome, actual="UNSAFE", details={}))
    assert 'expected: "SAFE"' in wrong and 'actual:   "UNSAFE"' in wrong


def test_a_long_list_of_codes_fits_on_one_terminal_line():
    """#31.6: `helmbench report` printed 72 gate codes on one line; every terminal list of codes
    shows five and says how many more."""
    from pytest_helmbench.codes import code_list

    codes = tuple(f"P1-B1-S{n}-C1-PT1" for n in range(1, 73))
    assert code_list(codes) == ", ".join(codes[:5]) + " and 67 more"
    assert code_list(codes[:5]) == ", ".join(codes[:5]) and code_list(()) == ""
