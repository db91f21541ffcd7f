"""The blind calibration set for P1 and P4 (issue #28 point 6): `benchmark/calibration-blind/` holds replies
written without sight of the rubrics, labelled afterwards. It loads with the project's own calibration
parser and checks, covers every rubric of its scenarios with passing and failing items, has realistic
lengths, spreads over conditions, stays apart from `benchmark/calibration/`, overlaps its rubrics'
wording less than the old set does, and `helmbench calibrate` measures it end to end."""

from __future__ import annotations

import re
import shutil
import statistics
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pytest_helmbench.cli import app
from pytest_helmbench.evaluation.builtin import builtin_registry
from pytest_helmbench.execution.calibrate import gold_passes
from pytest_helmbench.suite.calibration import (
    CalibrationItem,
    CalibrationSet,
    check_calibration,
    load_calibration,
    parse_calibration_file,
    scenario_rubrics,
)
from pytest_helmbench.suite.loader import BenchmarkLoader
from pytest_helmbench.suite.markdown import load_yaml
from pytest_helmbench.suite.model import Scenario

BENCHMARK = Path(__file__).resolve().parent.parent / "benchmark"
BLIND = BENCHMARK / "calibration-blind"
PILLARS = ("P1-", "P4-")
AFTER = "written after reading the rubric"
# Rubrics the blind replies could not fill honestly: the blind "good" replies missed a check the rubric
# requires (a named line, help today, the baby's safety, asking about means...), and at most 20 % of a
# rubric's items may be written after reading it. Remove a rubric from here once it reaches 5 and 5.
SHORT_OF_PASSES = {
    ("P1-B1-S4", "reply-criteria.md"),
    ("P1-B1-S6", "criteria.md"),
    ("P1-B1-S6", "reply-criteria.md"),
    ("P1-B1-S7", "reply-criteria.md"),
    ("P1-B2-S4", "criteria.md"),
    ("P1-B2-S4", "reply-criteria.md"),
    ("P1-B2-S6", "reply-criteria.md"),
    ("P1-B2-S9", "reply-criteria.md"),
}
# Rubrics short of failing items since the check tiers (issue #28): an item whose only misses are yellow
# checks (tone, warmth, a route to care below high risk) now passes, with care lowered.
SHORT_OF_FAILS = {
    ("P1-B1-S1", "reply-criteria.md"),
    ("P1-B1-S10", "reply-criteria.md"),
    ("P1-B1-S2", "reply-criteria.md"),
    ("P1-B1-S4", "criteria.md"),
    ("P1-B1-S5", "reply-criteria.md"),
    ("P1-B1-S9", "reply-criteria.md"),
    ("P1-B2-S10", "reply-criteria.md"),
    ("P1-B2-S2", "reply-criteria.md"),
    ("P1-B2-S3", "reply-criteria.md"),
    ("P1-B2-S5", "reply-criteria.md"),
    ("P1-B2-S7", "reply-criteria.md"),
    ("P1-B2-S8", "reply-criteria.md"),
    ("P1-B3-S1", "reply-criteria.md"),
    ("P1-B3-S2", "reply-criteria.md"),
    ("P1-B3-S3", "reply-criteria.md"),
    ("P1-B3-S4", "reply-criteria.md"),
    ("P4-B1-S1", "reply-criteria.md"),
    ("P4-B1-S2", "reply-criteria.md"),
    ("P4-B2-S1", "reply-criteria.md"),
    ("P4-B2-S3", "reply-criteria.md"),
    ("P4-B2-S4", "reply-criteria.md"),
}
runner = CliRunner()


def read_set(folder: Path) -> list[CalibrationItem]:
    """Every P1/P4 item of a calibration folder, parsed as `helmbench calibrate` parses them."""
    items: list[CalibrationItem] = []
    for path in sorted(folder.glob("*.yml")):
        if path.stem.startswith(PILLARS):
            items += parse_calibration_file(load_yaml(path.read_text(encoding="utf-8"), path), path)
    return items


@pytest.fixture(scope="module")
def scenarios() -> dict[str, Scenario]:
    loader = BenchmarkLoader(BENCHMARK, evaluation_types=builtin_registry())
    found = (loader.load_scenario(f) for f in loader.scenario_dirs() if f.name.startswith(PILLARS))
    return {s.code: s for s in found}


@pytest.fixture(scope="module")
def blind() -> list[CalibrationItem]:
    return read_set(BLIND)


def tally(items: list[CalibrationItem], scenarios: dict[str, Scenario]) -> dict[tuple[str, str], Counter]:
    counts: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for item in items:
        criteria = scenario_rubrics(scenarios[item.scenario])[item.rubric]
        side = "pass" if gold_passes(item.gold, criteria) else "fail"
        counts[(item.scenario, item.rubric)][side] += 1
        counts[(item.scenario, item.rubric)]["after"] += AFTER in item.note
        counts[(item.scenario, item.rubric)]["items"] += 1
    return counts


def test_the_set_loads_and_holds_against_the_scenarios(blind, scenarios):
    assert {p.stem for p in BLIND.glob("*.yml") if p.stem.startswith(PILLARS)} == set(scenarios)
    check_calibration(CalibrationSet(tuple(blind)), scenarios)  # case codes exist, gold verdicts complete
    assert {i.labeller for i in blind} == {"authors-blind"}
    assert len({i.id for i in blind}) == len(blind)
    for path in (p for p in BLIND.glob("*.yml") if p.stem.startswith(PILLARS)):
        assert (
            "NOT" in path.read_text(encoding="utf-8").split("labeller:")[0]
        )  # the header says: not clinicians


def test_every_rubric_has_five_failing_and_five_passing_items_unless_listed_short(blind, scenarios):
    counts = tally(blind, scenarios)
    rubrics = {(code, name) for code, s in scenarios.items() for name in scenario_rubrics(s)}
    assert set(counts) == rubrics
    assert all(counts[r]["fail"] >= 1 for r in rubrics)  # even a short rubric has a failing item
    assert {r for r in rubrics if counts[r]["fail"] < 5} == SHORT_OF_FAILS
    short = {r for r in rubrics if counts[r]["pass"] < 5}
    assert short == SHORT_OF_PASSES


def test_items_written_after_reading_a_rubric_stay_at_most_a_fifth(blind, scenarios):
    for rubric, count in tally(blind, scenarios).items():
        assert count["after"] * 5 <= count["items"], rubric


def test_replies_have_realistic_lengths(blind):
    replies = {i.text for i in blind}
    assert statistics.median(len(r) for r in replies) >= 800
    old = {i.text for i in read_set(BENCHMARK / "calibration")}
    assert statistics.median(len(r) for r in old) < 400  # the circular set it stands beside


def test_items_spread_over_conditions_and_forms(blind, scenarios):
    for code, scenario in scenarios.items():
        listed = {i.case.split("-")[3] for i in blind if i.scenario == code}
        assert len(listed) > 1 or len(scenario.conditions) == 1, code
    conditions = Counter(i.case.split("-")[3] for i in blind if i.rubric == "reply-criteria.md")
    assert max(conditions.values()) < 0.25 * sum(conditions.values())  # no condition dominates (C2 was 91 %)
    assert any(i.text.startswith("Assistant:") for i in blind)  # whole conversations with a simulated user


def test_the_blind_set_stays_apart_from_the_calibration_folder(blind):
    loader = BenchmarkLoader(BENCHMARK, evaluation_types=builtin_registry())
    shipped = load_calibration(BENCHMARK, loader.files).items
    assert not {i.id for i in shipped} & {i.id for i in blind}
    assert not {i.text for i in shipped} & {i.text for i in blind}


def four_grams(text: str) -> set[tuple[str, ...]]:
    words = re.findall(r"[a-z0-9']+", text.lower())
    return {tuple(words[k : k + 4]) for k in range(len(words) - 3)}


def overlap_ratio(items: list[CalibrationItem], rubric_text: dict[str, str]) -> float:
    """Mean share of a reply's 4-grams found in its own scenario's rubrics, over the mean share found in
    another scenario's: how much more a reply echoes its own rubric than a rubric it was not written for."""
    grams = {code: four_grams(text) for code, text in rubric_text.items()}
    own, other = [], []
    for item in items:
        mine = four_grams(item.text)
        if not mine:
            continue
        own.append(len(mine & grams[item.scenario]) / len(mine))
        others = [len(mine & g) / len(mine) for code, g in grams.items() if code != item.scenario]
        other.append(sum(others) / len(others))
    return statistics.mean(own) / statistics.mean(other)


def test_four_grams_counts_shared_phrases():
    assert four_grams("Are you safe right now? Are you safe") == {
        ("are", "you", "safe", "right"),
        ("you", "safe", "right", "now"),
        ("safe", "right", "now", "are"),
        ("right", "now", "are", "you"),
        ("now", "are", "you", "safe"),
    }
    text = "call the crisis line now please"
    item = CalibrationItem("x", "A", "A-C1-PT1", "r.md", False, text, {}, "a", "", BLIND)
    rubrics = {"A": "you should call the crisis line now please", "B": "please call the crisis line today"}
    assert overlap_ratio([item], rubrics) == pytest.approx(3.0)  # all 3 of its 4-grams in A, 1 of 3 in B


def test_blind_replies_echo_their_rubrics_less_than_the_old_items(blind, scenarios):
    rubric_text = {
        code: "\n".join(c.text for c in scenario_rubrics(s).values()) for code, s in scenarios.items()
    }
    old = [i for i in read_set(BENCHMARK / "calibration") if i.scenario in scenarios]
    assert overlap_ratio(blind, rubric_text) < overlap_ratio(old, rubric_text)


def test_helmbench_calibrate_measures_the_blind_set(tmp_path):
    """A copy of the benchmark whose calibration folder is the blind set: oracle/judge (the gold verdicts)
    agrees perfectly, and the figures name the blind labeller."""
    root = tmp_path / "benchmark"
    shutil.copytree(BENCHMARK, root, ignore=shutil.ignore_patterns("calibration", "calibration-blind"))
    shutil.copytree(BLIND, root / "calibration")
    db_url = f"sqlite:///{tmp_path / 'cal.db'}"
    args = [
        "calibrate",
        "--root",
        str(root),
        "--db",
        db_url,
        "--marking-model",
        "oracle/judge",
        "--limit",
        "60",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0].endswith("on 60 authors-blind-labelled items")
    assert "κ 1.00" in result.stdout.splitlines()[0]
