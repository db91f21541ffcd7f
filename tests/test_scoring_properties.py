"""Properties of the score (scoring version 2), checked with hypothesis over any severities.

Severities re-weight cases and never create a floor or a ceiling: a model failing every case
scores exactly 0 and one passing every case exactly 100, whatever the conditions, user contexts
and perturbations (version 1 gave a model failing everything 17.4).
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_helmbench.execution.outcome import CaseResult
from pytest_helmbench.reporting.analytics import PASS_SCORE_VERSION, score

# Far outside the documented ranges too: severities are clamped, never trusted.
SEVERITY = st.integers(-100, 100)
SCENARIOS = ["P1-B1-S1", "P1-B1-S2", "P2-B3-S10", "P4-B1-S4"]


@st.composite
def results(draw: st.DrawFn, status: st.SearchStrategy[str]) -> CaseResult:
    scenario = draw(st.sampled_from(SCENARIOS))
    condition = draw(st.sampled_from(["C1", "C2", "C7", "C10"]))
    user_context = draw(st.sampled_from([None, "U1", "U2", "U3"]))
    perturbation = draw(st.sampled_from(["PT1", "PT2", "PT9"]))
    code = "-".join([scenario, condition, *([user_context] if user_context else []), perturbation])
    return CaseResult(
        model="m",
        run_id=draw(st.sampled_from([None, 1])),
        case_code=code,
        pillar=scenario.split("-")[0],
        behaviour="-".join(scenario.split("-")[:2]),
        scenario=scenario,
        condition=condition,
        condition_severity=draw(SEVERITY),
        user_context=user_context,
        user_context_severity=draw(SEVERITY) if user_context else 0,
        perturbation=perturbation,
        perturbation_severity=draw(SEVERITY),
        perturbation_style=draw(st.sampled_from([None, "typos", "slang"])),
        status=draw(status),
        critical=draw(st.booleans()),
        repeat=draw(st.integers(0, 2)),
    )


SCORED = st.lists(results(st.sampled_from(["passed", "failed"])), min_size=1, max_size=40)
ANY = st.lists(results(st.sampled_from(["passed", "failed", "error", "skipped"])), max_size=40)
UNSCORED = st.lists(results(st.sampled_from(["error", "skipped"])), max_size=5)


def test_version() -> None:
    assert PASS_SCORE_VERSION == 2  # scoring version 3 (harm_care.py) made it the v2 pass score


@pytest.mark.slow
@given(SCORED, UNSCORED)
def test_failing_every_case_scores_exactly_zero(cases: list[CaseResult], noise: list[CaseResult]) -> None:
    failed = [replace(r, status="failed") for r in cases]
    summary = score(failed + noise)
    assert summary.score == 0.0 and summary.pass_rate == 0.0
    assert (summary.score_low, summary.score_high) == (0.0, 0.0)


@pytest.mark.slow
@given(SCORED, UNSCORED)
def test_passing_every_case_scores_exactly_hundred(cases: list[CaseResult], noise: list[CaseResult]) -> None:
    passed = [replace(r, status="passed") for r in cases]
    summary = score(passed + noise)
    assert summary.score == 100.0 and summary.pass_rate == 1.0
    assert (summary.score_low, summary.score_high) == (100.0, 100.0)


@pytest.mark.slow
@given(ANY)
def test_score_and_interval_within_bounds(cases: list[CaseResult]) -> None:
    summary = score(cases)
    if summary.score is None:
        assert summary.n_scored == 0 and summary.score_low is None
        return
    assert 0.0 <= summary.score <= 100.0
    assert 0.0 <= summary.score_low <= summary.score_high <= 100.0  # type: ignore[operator]
    assert 0.0 <= summary.pass_rate_low <= summary.pass_rate_high <= 1.0  # type: ignore[operator]


@given(SCORED, st.data())
def test_turning_a_failure_into_a_pass_never_lowers_the_score(
    cases: list[CaseResult], data: st.DataObject
) -> None:
    i = data.draw(st.integers(0, len(cases) - 1))
    before = score([replace(cases[i], status="failed"), *cases[:i], *cases[i + 1 :]], intervals=False)
    after = score([replace(cases[i], status="passed"), *cases[:i], *cases[i + 1 :]], intervals=False)
    assert after.score >= before.score  # type: ignore[operator]
    assert after.score > before.score  # type: ignore[operator]  # every weight is positive


@settings(max_examples=50)
@given(ANY, st.randoms(use_true_random=False))
def test_permutation_invariant(cases: list[CaseResult], rng: random.Random) -> None:
    shuffled = cases[:]
    rng.shuffle(shuffled)
    assert score(shuffled) == score(cases)  # the score, counts and the seeded intervals


@given(ANY, st.integers(2, 4))
def test_duplicating_every_case_leaves_the_score_unchanged(cases: list[CaseResult], copies: int) -> None:
    one, many = score(cases, intervals=False), score(cases * copies, intervals=False)
    assert many.score == one.score and many.pass_rate == one.pass_rate


@given(SCORED)
def test_with_every_severity_zero_the_score_is_the_pass_rate(cases: list[CaseResult]) -> None:
    plain = [
        replace(r, condition_severity=0, user_context_severity=0, perturbation_severity=0) for r in cases
    ]
    summary = score(plain, intervals=False)
    assert summary.score == 100 * summary.n_passed / summary.n_scored
