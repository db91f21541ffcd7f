"""Agreement statistics against published worked examples, their edge cases, and panel agreement."""

from __future__ import annotations

import statistics
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_helmbench.execution.outcome import CaseResult, JudgeVote
from pytest_helmbench.reporting.agreement import (
    JudgePassRate,
    bootstrap_interval,
    cohen_kappa,
    fleiss_kappa,
    gwet_ac1,
    gwet_ac1_counts,
    observed_agreement,
    panel_agreement,
    sensitivity,
    specificity,
)


def pairs_from_table(labels: list[str], table: list[list[int]]) -> list[tuple[str, str]]:
    """Expand a rater A (rows) x rater B (columns) contingency table into one pair per item."""
    return [(a, b) for i, a in enumerate(labels) for j, b in enumerate(labels) for _ in range(table[i][j])]


# --- published worked examples ----------------------------------------------------------------

# Wikipedia, "Cohen's kappa", simple example: 50 grant proposals read by A and B;
# yes/yes 20, A yes B no 5, A no B yes 10, no/no 15: p_o = 0.7, p_e = 0.5, kappa = 0.4.
WIKIPEDIA_COHEN = pairs_from_table(["yes", "no"], [[20, 5], [10, 15]])

# Gwet (2014), Handbook of Inter-Rater Reliability, 4th ed.: 100 pregnant women classified by two
# abstractors (Ectopic, AIU, NIU); the irrCAC package ships it as `cont3x3abstractors` and reports
# percent agreement 0.890, Cohen's kappa 0.796 (0.7964) and Gwet's AC1 0.849 (0.84933).
GWET_ABSTRACTORS = pairs_from_table(["Ectopic", "AIU", "NIU"], [[13, 0, 0], [0, 20, 7], [0, 4, 56]])

# Wikipedia, "Fleiss' kappa", worked example (Fleiss 1971 method): 10 subjects, 14 raters,
# 5 categories; P-bar = 0.378, P-bar_e = 0.213, kappa = 0.210 (0.20993).
WIKIPEDIA_FLEISS = [
    [0, 0, 0, 0, 14],
    [0, 2, 6, 4, 2],
    [0, 0, 3, 5, 6],
    [0, 3, 9, 2, 0],
    [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0],
    [3, 2, 6, 3, 0],
    [2, 5, 3, 2, 2],
    [6, 5, 2, 1, 0],
    [0, 2, 2, 3, 7],
]


def test_cohen_wikipedia_example() -> None:
    assert observed_agreement(WIKIPEDIA_COHEN) == pytest.approx(0.7)
    assert cohen_kappa(WIKIPEDIA_COHEN) == pytest.approx(0.4)


def test_gwet_handbook_abstractors() -> None:
    assert observed_agreement(GWET_ABSTRACTORS) == pytest.approx(0.89)
    assert cohen_kappa(GWET_ABSTRACTORS) == pytest.approx(0.79641, abs=5e-5)
    assert gwet_ac1(GWET_ABSTRACTORS) == pytest.approx(0.84933, abs=5e-6)


def test_fleiss_wikipedia_example() -> None:
    assert fleiss_kappa(WIKIPEDIA_FLEISS) == pytest.approx(0.20993, abs=5e-6)


def test_kappa_paradox_ac1_stays_high() -> None:
    """Hand-computed: 100 replies, both judges pass 90, each fails 5 the other passes, none failed by both.
    p_o = 0.90; kappa: p_e = 0.95^2 + 0.05^2 = 0.905 -> (0.90 - 0.905) / 0.095 = -0.0526;
    AC1: pi_pass = 0.95, p_e = 2 * 0.95 * 0.05 = 0.095 -> (0.90 - 0.095) / 0.905 = 0.8895."""
    pairs = pairs_from_table(["pass", "fail"], [[90, 5], [5, 0]])
    assert cohen_kappa(pairs) == pytest.approx(-0.005 / 0.095)
    assert gwet_ac1(pairs) == pytest.approx(0.805 / 0.905)


# --- edge cases ---------------------------------------------------------------------------------


def test_one_label_throughout_kappa_undefined_ac1_defined() -> None:
    same = [(True, True)] * 12
    assert cohen_kappa(same) is None
    assert gwet_ac1(same) == 1.0 and observed_agreement(same) == 1.0
    assert fleiss_kappa([[3, 0]] * 5) is None
    assert gwet_ac1([("a", "a"), ("a", "a")], categories=["a", "b", "c"]) == 1.0
    assert cohen_kappa([]) is None and gwet_ac1([]) is None and observed_agreement([]) is None
    assert fleiss_kappa([]) is None


@given(
    st.lists(
        st.tuples(st.sampled_from([True, False, "a", "b", 3]), st.sampled_from([True, False, "a", "b", 3])),
        max_size=60,
    ),
    st.sampled_from([None, (True, False), ("a", "b", "c")]),
)
def test_two_rater_ac1_from_counts_is_the_per_item_formula_to_the_last_bit(pairs, categories) -> None:
    """gwet_ac1 reads two raters' pairs as counts (a bootstrap calls it 2,000 times); the multi-rater
    formula over one row of label counts per item gives the very same float."""
    per_item = gwet_ac1_counts([Counter((a, b)) for a, b in pairs], categories)
    assert gwet_ac1(pairs, categories) == per_item  # None == None: no pairs


def test_perfect_and_opposite_agreement() -> None:
    perfect = [(True, True), (False, False)] * 3
    assert cohen_kappa(perfect) == 1.0 and gwet_ac1(perfect) == 1.0
    opposite = [(True, False), (False, True)] * 3
    assert cohen_kappa(opposite) == -1.0 and gwet_ac1(opposite) == -1.0
    assert fleiss_kappa([[2, 0], [0, 2], [2, 0]]) == 1.0


def test_fleiss_rejects_bad_tables() -> None:
    with pytest.raises(ValueError):
        fleiss_kappa([[3, 0], [2, 0, 1]])
    with pytest.raises(ValueError):
        fleiss_kappa([[1, 0], [2, 0]])  # an item with a single rating
    with pytest.raises(ValueError):
        fleiss_kappa([[3, -1]])


def test_fleiss_with_varying_raters_matches_equal_rater_case() -> None:
    """Rows of different totals: each item's share of agreeing rater pairs, pooled category shares."""
    table = [[2, 0], [1, 1], [3, 0], [0, 3]]
    observed = (1 + 0 + 1 + 1) / 4
    pooled = [6 / 10, 4 / 10]  # 6 of the 10 ratings in the first category
    chance = sum(p * p for p in pooled)
    assert fleiss_kappa(table) == pytest.approx((observed - chance) / (1 - chance))


def test_sensitivity_and_specificity() -> None:
    # pairs are (gold passed, judge passed); unsafe (gold failed) is the positive class
    pairs = [(False, False)] * 8 + [(False, True)] * 2 + [(True, True)] * 27 + [(True, False)] * 3
    assert sensitivity(pairs) == pytest.approx(0.8)
    assert specificity(pairs) == pytest.approx(0.9)
    assert sensitivity([(True, True)]) is None and specificity([(False, False)]) is None


# --- item bootstrap -----------------------------------------------------------------------------


def test_bootstrap_interval_is_seeded_and_brackets_the_estimate() -> None:
    items = [float(i % 10) for i in range(200)]
    first = bootstrap_interval(items, statistics.fmean, replicates=500, seed=3)
    assert first == bootstrap_interval(items, statistics.fmean, replicates=500, seed=3)
    assert first != bootstrap_interval(items, statistics.fmean, replicates=500, seed=4)
    assert first is not None and first[0] < statistics.fmean(items) < first[1]
    assert 0.5 < first[1] - first[0] < 1.5  # about 2 * 1.96 * sd / sqrt(n) = 0.8


def test_bootstrap_interval_of_an_undefined_statistic() -> None:
    same = [(True, True)] * 20
    assert bootstrap_interval(same, cohen_kappa) is None
    assert bootstrap_interval(same, gwet_ac1) == (1.0, 1.0)
    assert bootstrap_interval([], gwet_ac1) is None
    mixed = WIKIPEDIA_COHEN
    low, high = bootstrap_interval(mixed, cohen_kappa, replicates=1000)  # type: ignore[misc]
    assert low < 0.4 < high


@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=60))
def test_prop_coefficients_bounded(pairs: list[tuple[bool, bool]]) -> None:
    kappa, ac1 = cohen_kappa(pairs), gwet_ac1(pairs)
    assert ac1 is not None and -1.0 - 1e-9 <= ac1 <= 1.0 + 1e-9
    if kappa is not None:
        assert -1.0 - 1e-9 <= kappa <= 1.0 + 1e-9
    else:
        assert len({label for pair in pairs for label in pair}) == 1


# --- panel agreement ----------------------------------------------------------------------------


def result(
    code: str, votes: dict[str, bool], *, check: str = "reply-criteria", repeat: int = 0
) -> CaseResult:
    return CaseResult(
        model="m",
        run_id=1,
        case_code=code,
        pillar="P1",
        behaviour="P1-B1",
        scenario="P1-B1-S1",
        condition="C1",
        condition_severity=0,
        user_context=None,
        user_context_severity=0,
        perturbation="PT1",
        perturbation_severity=0,
        perturbation_style=None,
        status="passed",
        repeat=repeat,
        judge_votes=tuple(JudgeVote(check, judge, passed) for judge, passed in votes.items()),
    )


def test_two_judges_use_cohen() -> None:
    table = [[20, 5], [10, 15]]  # the Wikipedia example, judge a (rows) x judge b (columns)
    pairs = pairs_from_table(["pass", "fail"], table)
    results = [
        result(f"P1-B1-S1-C1-PT{i}", {"a": x == "pass", "b": y == "pass"}) for i, (x, y) in enumerate(pairs)
    ]
    results.append(result("P1-B1-S1-C1-PT99", {"a": True}))  # one judge only: not an item
    results.append(result("P1-B1-S1-C1-PT98", {}))
    panel = panel_agreement(results)
    assert panel is not None and panel.kind == "cohen"
    assert (panel.n_items, panel.n_judges) == (50, 2)
    assert panel.kappa == pytest.approx(0.4) and panel.observed == pytest.approx(0.7)
    assert panel.ac1 == pytest.approx(gwet_ac1(pairs))  # type: ignore[arg-type]
    assert panel.judges == (JudgePassRate("a", 50, 0.5), JudgePassRate("b", 50, 0.6))
    assert panel_agreement(list(reversed(results))) == panel


def test_three_judges_use_fleiss_per_check_and_repeat() -> None:
    votes = [(True, True, True), (True, True, False), (False, False, False), (True, False, False)]
    results = [
        result("P1-B1-S1-C1-PT1", dict(zip("abc", v, strict=True)), check=check, repeat=repeat)
        for repeat, v in enumerate(votes)
        for check in ("reply-criteria", "criteria")
    ]
    panel = panel_agreement(results)
    assert panel is not None and panel.kind == "fleiss" and (panel.n_items, panel.n_judges) == (8, 3)
    table = [[sum(v), 3 - sum(v)] for v in votes for _ in range(2)]
    assert panel.kappa == pytest.approx(fleiss_kappa(table))  # type: ignore[arg-type]
    assert panel.observed == pytest.approx((1 + 1 / 3 + 1 + 1 / 3) / 4)
    assert [j.judge for j in panel.judges] == ["a", "b", "c"]
    assert panel.judges[0].pass_rate == 0.75 and panel.judges[2].pass_rate == 0.25


def test_panel_degenerate_and_absent() -> None:
    all_pass = [result(f"P1-B1-S1-C1-PT{i}", {"a": True, "b": True}) for i in range(5)]
    panel = panel_agreement(all_pass)
    assert panel is not None and panel.kappa is None and panel.ac1 == 1.0 and panel.observed == 1.0
    assert panel_agreement([result("P1-B1-S1-C1-PT1", {"a": False})]) is None
    assert panel_agreement([]) is None
