"""The blind calibration set for pillars P2 and P3 (benchmark/calibration-blind/, issue #28 point 6);
test_calibration_blind_p1_p4.py holds P1 and P4 to the same shape.

Its replies were written from the user's message and a target quality alone, before the rubric was read,
then labelled against the rubric. These tests hold the set to the shape the issue asks for: it loads with
the project's calibration loader and holds against its scenarios, its replies are realistic in length,
it spreads over the conditions, and each rubric has passing and failing items (the rubrics the blind
writing left short are named, so closing a gap means updating the list).
"""

from __future__ import annotations

import re
import statistics
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from pytest_helmbench.errors import BenchmarkError
from pytest_helmbench.evaluation.builtin import builtin_registry
from pytest_helmbench.execution.calibrate import gold_passes
from pytest_helmbench.suite.calibration import (
    CalibrationItem,
    CalibrationSet,
    check_calibration,
    parse_calibration_file,
)
from pytest_helmbench.suite.loader import BenchmarkLoader
from pytest_helmbench.suite.markdown import load_yaml

BENCHMARK = Path(__file__).resolve().parent.parent / "benchmark"
BLIND = BENCHMARK / "calibration-blind"
PILLARS = ("P2-", "P3-")
MIN_EACH = 5
# Rubrics whose blind replies left fewer than MIN_EACH passing (or failing) items even after the two
# items per scenario that may be written after reading the rubric: (scenario, rubric) -> (pass, fail).
# Since the rubrics' check tiers (issue #28), an item that misses only yellow checks passes (care lowered):
# most of the shortfalls below are such items, once counted as failing.
KNOWN_SHORT = {
    ("P2-B1-S1", "criteria.md"): (8, 4),
    ("P2-B1-S1", "reply-criteria.md"): (8, 4),
    ("P2-B1-S3", "reply-criteria.md"): (8, 4),
    ("P2-B1-S5", "reply-criteria.md"): (9, 3),
    ("P2-B1-S6", "reply-criteria.md"): (7, 3),
    ("P2-B2-S3", "reply-criteria.md"): (6, 4),
    ("P2-B2-S4", "reply-criteria.md"): (10, 1),
    ("P2-B2-S5", "reply-criteria.md"): (9, 2),
    ("P2-B2-S6", "reply-criteria.md"): (7, 4),
    ("P2-B2-S7", "reply-criteria.md"): (9, 2),
    ("P2-B3-S4", "reply-criteria.md"): (9, 1),
    ("P2-B3-S5", "reply-criteria.md"): (11, 1),
    ("P3-B1-S1", "criteria.md"): (4, 8),
    ("P3-B1-S1", "reply-criteria.md"): (9, 3),
    ("P3-B1-S10", "reply-criteria.md"): (8, 4),
    ("P3-B1-S2", "reply-criteria.md"): (2, 10),
    ("P3-B1-S3", "reply-criteria.md"): (7, 3),
    ("P3-B1-S4", "reply-criteria.md"): (6, 4),
    ("P3-B1-S5", "reply-criteria.md"): (8, 3),
    ("P3-B1-S6", "reply-criteria.md"): (7, 3),
    ("P3-B1-S7", "reply-criteria.md"): (9, 3),
    ("P3-B1-S8", "reply-criteria.md"): (8, 3),
    ("P3-B1-S9", "reply-criteria.md"): (9, 3),
    ("P3-B2-S1", "reply-criteria.md"): (8, 2),
    ("P3-B2-S2", "reply-criteria.md"): (6, 4),
    ("P3-B2-S3", "reply-criteria.md"): (9, 2),
}


@pytest.fixture(scope="module")
def loader() -> BenchmarkLoader:
    return BenchmarkLoader(BENCHMARK, evaluation_types=builtin_registry())


@pytest.fixture(scope="module")
def items(loader: BenchmarkLoader) -> list[CalibrationItem]:
    found: list[CalibrationItem] = []
    for path in sorted(BLIND.glob("P*.yml")):
        if path.name.startswith(PILLARS):
            found += parse_calibration_file(load_yaml(loader.files.read_text(path), path), path)
    return found


# Scenarios added after the blind set was written (issue #28 point 4, the live delusion and mania scripts):
# no blind replies exist for them yet, so they are left out here by name until someone writes them blind.
NOT_YET_BLIND = frozenset(f"P3-B1-S{n}" for n in range(11, 19))


@pytest.fixture(scope="module")
def scenarios(loader: BenchmarkLoader) -> dict:
    return {
        f.name: loader.load_scenario(f)
        for f in loader.scenario_dirs()
        if f.name.startswith(PILLARS) and f.name not in NOT_YET_BLIND
    }


def test_the_scenarios_not_yet_written_blind_exist_and_have_no_blind_file(loader):
    """The exemption names real scenarios, and is dropped as soon as a blind file exists for one."""
    names = {f.name for f in loader.scenario_dirs()}
    assert NOT_YET_BLIND <= names
    assert not [code for code in NOT_YET_BLIND if (BLIND / f"{code}.yml").exists()]


def test_every_p2_p3_scenario_has_a_blind_file_that_loads_and_holds(items, scenarios):
    assert {i.scenario for i in items} == set(scenarios)
    check_calibration(CalibrationSet(tuple(items)), scenarios)  # cases exist, gold complete per rubric


def test_every_rubric_of_the_scenarios_has_items(items, scenarios):
    rubrics = {(s.code, c.criteria.name) for s in scenarios.values() for c in s.checks if c.criteria}
    assert rubrics == {(i.scenario, i.rubric) for i in items}


def test_each_rubric_has_passing_and_failing_items(items, scenarios):
    rubrics = {
        (s.code, c.criteria.name): c.criteria for s in scenarios.values() for c in s.checks if c.criteria
    }
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for item in items:
        counts[(item.scenario, item.rubric)][
            0 if gold_passes(item.gold, rubrics[(item.scenario, item.rubric)]) else 1
        ] += 1
    short = {key: tuple(n) for key, n in counts.items() if min(n) < MIN_EACH}
    assert short == KNOWN_SHORT
    assert all(p and f for p, f in counts.values())  # even a short rubric has both kinds


def test_replies_are_realistic_in_length(items):
    lengths = [len(i.response or "") for i in items if i.rubric == "reply-criteria.md"]
    assert statistics.median(lengths) >= 800


def test_items_spread_over_the_conditions_and_user_contexts(items):
    conditions: dict[str, set[str]] = defaultdict(set)
    for item in items:
        conditions[item.scenario].add(item.case.split("-")[3])
    assert all(len(c) >= 6 for c in conditions.values()), conditions
    with_context = Counter(bool(re.search(r"-U\d+-", i.case)) for i in items)
    assert with_context[True] and with_context[False]


def test_blind_items_are_labelled_by_the_authors_not_clinicians(items):
    assert {i.labeller for i in items} == {"authors-blind"}


def test_items_written_after_the_rubric_are_marked_and_few(items):
    per_rubric: dict[tuple[str, str], list[bool]] = defaultdict(list)
    for item in items:
        per_rubric[(item.scenario, item.rubric)].append("written after reading the rubric" in item.note)
    for key, marks in per_rubric.items():
        assert sum(marks) <= 0.2 * len(marks), key


def test_a_blind_file_with_an_unknown_key_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "P2-B1-S1.yml"
    data = {
        "labeller": "authors-blind",
        "items": [
            {
                "id": "x",
                "case": "P2-B1-S1-C1-PT1",
                "rubric": "criteria.md",
                "reply": "hi",
                "gold": {"verdict": "SAFE"},
                "quality": "good",
            }
        ],
    }
    with pytest.raises(BenchmarkError, match="unknown key"):
        parse_calibration_file(data, path)


WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?")


def _four_grams(text: str) -> set[tuple[str, ...]]:
    words = WORD.findall(text.lower())
    return {tuple(words[i : i + 4]) for i in range(len(words) - 3)}


def _own_rubric_overlap(items: list[CalibrationItem]) -> float:
    """Mean share of a reply's 4-grams that also occur in its own scenario's rubric files."""
    rubric: dict[str, set[tuple[str, ...]]] = {}
    shares = []
    for item in items:
        if item.scenario not in rubric:
            folder = BENCHMARK / "scenarios" / item.scenario
            rubric[item.scenario] = _four_grams("\n".join(p.read_text() for p in folder.glob("*criteria.md")))
        grams = _four_grams(item.response or "")
        shares.append(len(grams & rubric[item.scenario]) / len(grams))
    return statistics.mean(shares)


def test_blind_replies_borrow_far_less_rubric_wording_than_the_authors_set(loader, items):
    old = []
    for path in sorted((BENCHMARK / "calibration").glob("P*.yml")):
        if path.name.startswith(PILLARS):
            old += parse_calibration_file(load_yaml(loader.files.read_text(path), path), path)
    blind = [i for i in items if "written after reading the rubric" not in i.note]
    assert _own_rubric_overlap(blind) < _own_rubric_overlap(old) / 2
