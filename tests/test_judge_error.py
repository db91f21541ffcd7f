"""Judge error in the interval (issue #25, point 5): the harm rate and care score corrected for the
judge's measured sensitivity and specificity (reporting/judge_error.py), tested against simulated runs
whose true rates are known, and shown in the JSON report and the report page."""

from __future__ import annotations

import random

import pytest
from typer.testing import CliRunner

from pytest_helmbench.cli import app
from pytest_helmbench.execution.sheet import ReplySheet
from pytest_helmbench.reporting.calibration_figures import figures_for
from pytest_helmbench.reporting.harm_care import harm_care
from pytest_helmbench.reporting.judge_error import (
    Confusion,
    corrected,
    judge_corrected_figures,
    scenario_confusions,
)
from tests.test_faults import execute as execute_sql
from tests.test_harm_care import result
from tests.test_report_json import recorded  # noqa: F401, F811  (a fixture: a stored run of two oracles)

runner = CliRunner()

SE, SP = 0.70, 0.85  # the simulated judge: catches 70 % of true failures, clears 85 % of true passes


def _judge(truth_failed: bool, rng: random.Random) -> bool:
    """Whether the simulated judge fails an item whose gold verdict is `truth_failed`."""
    return rng.random() < SE if truth_failed else rng.random() >= SP


def simulated_run(seed: int, scenarios: int = 40, replies: int = 60, items: int = 12):
    """Results whose true harm and care are known, the judge's observations of them, and the judge's
    calibration on labelled items (the figures `helmbench calibrate` stores)."""
    rng = random.Random(seed)
    results, truth_harm, truth_care, strata, every_pair = [], [], [], {}, []
    for number in range(1, scenarios + 1):
        code = f"P1-B1-S{number}"
        harm_share, care_share = rng.uniform(0.0, 0.2), rng.uniform(0.6, 0.95)
        truly_harmed = truly_earned = 0
        for reply in range(replies):
            harmed = rng.random() < harm_share
            earned_true = [rng.random() < care_share for _ in range(4)]
            truly_harmed += harmed
            truly_earned += sum(earned_true)
            seen_harm = _judge(harmed, rng)
            # a care point the judge sees as earned: it "passes" the item (failed = not earned)
            seen_earned = sum(not _judge(not earned, rng) for earned in earned_true)
            sheet = ReplySheet(
                seen_harm, ("reply-criteria:gives_method",) if seen_harm else (), seen_earned, 4
            )
            results.append(result(f"{code}-C1-PT{reply + 1}", "failed" if seen_harm else "passed", sheet))
        truth_harm.append(truly_harmed / replies)
        truth_care.append(truly_earned / (4 * replies))
        gold = [rng.random() < 0.5 for _ in range(items)]  # True: the gold verdict fails the item
        pairs = [(not failed, not _judge(failed, rng)) for failed in gold]  # (gold passed, judge passed)
        strata[f"{code}/reply-criteria.md"] = _stored_figures(pairs)
        every_pair += pairs
    calibration = {"overall": _stored_figures(every_pair), "rubrics": strata}
    return results, sum(truth_harm) / scenarios, 100 * sum(truth_care) / scenarios, calibration


def _stored_figures(pairs: list[tuple[bool, bool]]) -> dict:
    """What figures_for stores for these (gold passed, judge passed) pairs, without its bootstraps."""
    unsafe = [judge for gold, judge in pairs if not gold]
    safe = [judge for gold, judge in pairs if gold]
    return {
        "n": len(pairs),
        "n_gold_unsafe": len(unsafe),
        "sensitivity": {"value": sum(not j for j in unsafe) / len(unsafe) if unsafe else None},
        "specificity": {"value": sum(safe) / len(safe) if safe else None},
    }


def test_rogan_gladen_inverts_a_known_judge_and_is_undefined_at_chance():
    true_harm, true_care = 0.2, 0.7
    seen_harm = true_harm * SE + (1 - true_harm) * (1 - SP)
    seen_care = true_care * SP + (1 - true_care) * (1 - SE)
    assert corrected(seen_harm, SE, SP) == pytest.approx(true_harm)
    assert corrected(seen_care, SE, SP, care=True) == pytest.approx(true_care)
    assert corrected(0.4, 0.5, 0.5) is None and corrected(0.4, 0.3, 0.6) is None  # no better than chance
    assert corrected(0.01, SE, SP) == 0.0 and corrected(0.99, SE, SP) == 1.0  # clipped, never outside 0..1


@pytest.mark.slow
def test_the_counts_behind_stored_calibration_figures_are_recovered():
    pairs = [(False, False)] * 8 + [(False, True)] * 2 + [(True, True)] * 27 + [(True, False)] * 3
    confusion = Confusion.from_figures(figures_for(pairs))
    assert confusion == Confusion(caught=8, missed=2, cleared=27, false_alarms=3)
    pooled, overall = scenario_confusions({"rubrics": {"P1-B1-S1/a.md": figures_for(pairs)}, "overall": {}})
    assert pooled == {"P1-B1-S1": confusion} and overall is None
    assert sum(confusion.redrawn(random.Random(1)).__dict__.values()) == 40  # a redraw keeps n


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_corrected_figures_recover_simulated_truth_the_raw_ones_miss(seed):
    """40 scenarios, 60 replies each, 40 calibration items each (1,600 in all): the judge's error biases
    what it counts (false alarms raise harm, misses lower care); the corrected figures land near the
    truth, and their interval covers it."""
    results, true_harm, true_care, calibration = simulated_run(seed, items=40)
    raw = harm_care(results, intervals=False)
    found = judge_corrected_figures(results, calibration, replicates=300)
    assert found is not None
    harm, care = found["harm_rate"], found["care_score"]
    assert harm is not None and care is not None
    assert abs(raw.harm_rate.value - true_harm) > 0.06 and abs(raw.care_score.value - true_care) > 3
    assert abs(harm.value - true_harm) < 0.04 and abs(care.value - true_care) < 4.0
    assert harm.ci_low <= true_harm <= harm.ci_high and care.ci_low <= true_care <= care.ci_high


@pytest.mark.slow
def test_the_interval_covers_the_truth_with_a_calibration_set_of_the_shipped_size():
    """About twelve calibration items per scenario (the shipped set's size): the correction is far
    less certain, and the interval says so by covering the truth in most runs (it carries the
    calibration items' uncertainty, not only the scenarios')."""
    covered_harm = covered_care = 0
    for seed in range(10, 20):
        results, true_harm, true_care, calibration = simulated_run(seed, scenarios=20, replies=30, items=12)
        found = judge_corrected_figures(results, calibration, replicates=200)
        assert found is not None
        harm, care = found["harm_rate"], found["care_score"]
        covered_harm += harm.ci_low <= true_harm <= harm.ci_high
        covered_care += care.ci_low <= true_care <= care.ci_high
    assert covered_harm >= 8 and covered_care >= 8, (covered_harm, covered_care)


def test_without_a_calibration_or_with_a_chance_judge_nothing_is_corrected():
    results, _, _, calibration = simulated_run(7, scenarios=4, replies=10, items=10)
    assert judge_corrected_figures(results, None) is None and judge_corrected_figures(results, {}) is None
    coin = [(True, True), (True, False), (False, True), (False, False)] * 5  # Se 0.5, Sp 0.5
    chance = {"overall": _stored_figures(coin), "rubrics": {}}
    assert judge_corrected_figures(results, chance) is None


def test_a_scenario_without_calibration_items_uses_the_overall_figures():
    results, _, _, calibration = simulated_run(8, scenarios=3, replies=20, items=30)
    strata = calibration["rubrics"]
    overall_pairs = [(False, False)] * 16 + [(False, True)] * 4 + [(True, True)] * 18 + [(True, False)] * 2
    partial = {"overall": _stored_figures(overall_pairs), "rubrics": {k: strata[k] for k in list(strata)[:1]}}
    assert judge_corrected_figures(results, partial, replicates=50) is not None
    assert judge_corrected_figures(results, {"rubrics": partial["rubrics"]}, replicates=50) is None


def test_the_report_gives_the_corrected_figures_when_a_calibration_covers_the_runs(recorded, tmp_path):  # noqa: F811
    """End to end: a run without a calibration reports `judge_corrected: null` and the page says the
    figures include no judge error; once a calibration of its judge is the run's, both give the
    corrected harm rate and care score with intervals."""
    import json

    from sqlmodel import Session

    from pytest_helmbench.storage.engine import make_engine
    from pytest_helmbench.storage.tables import JudgeCalibration
    from tests.dbquery import query
    from tests.test_report_json import report

    before = json.loads(report(recorded, "--out", "-").stdout)
    assert [m["judge_corrected"] for m in before["models"]] == [None, None]
    page = tmp_path / "report.html"
    assert runner.invoke(app, ["report", "--db", recorded, "--out", str(page)]).exit_code == 0
    assert "judge error not included" in page.read_text(encoding="utf-8")

    pairs = [(False, False)] * 40 + [(False, True)] * 10 + [(True, True)] * 45 + [(True, False)] * 5
    engine = make_engine(recorded)
    with Session(engine) as session:
        calibration = JudgeCalibration(
            judge="oracle/judge",
            rubric_hashes=[],
            rubrics_hash="test",
            label_set_hash="test",
            labeller="clinicians",
            n_items=len(pairs),
            figures={"overall": _stored_figures(pairs), "rubrics": {}},
        )
        session.add(calibration)
        session.commit()
        calibration_id = calibration.id
    engine.dispose()
    execute_sql(recorded, f"update evaluationrun set calibration_id = {calibration_id}")
    assert query(recorded, "select distinct calibration_id from evaluationrun") == [(calibration_id,)]
    after = json.loads(report(recorded, "--out", "-").stdout)
    for model in after["models"]:
        corrected_figures = model["judge_corrected"]
        assert set(corrected_figures) == {"harm_rate", "care_score"}, model
        harm = corrected_figures["harm_rate"]
        assert 0.0 <= harm["ci_low"] <= harm["value"] <= harm["ci_high"] <= 1.0
    assert runner.invoke(app, ["report", "--db", recorded, "--out", str(page)]).exit_code == 0
    text = page.read_text(encoding="utf-8")
    assert "corrected for judge error: harm rate" in text and "clinicians-labelled, 100 items" in text
