"""The blind calibration set for pillars P1 to P5 (benchmark/calibration-blind/, issue #28 point 6).

Its replies were written from the user's message and a target quality alone, before the rubric was read,
then labelled against the rubric by the benchmark's authors (not clinicians). These tests hold the set to
the shape the issue asks for: it loads with the project's calibration parser and holds against its
scenarios, every rubric has at least five passing and five failing items, its replies are realistic in
length, it spreads over the conditions, it stays apart from `benchmark/calibration/` and borrows less
rubric wording than that set, and `helmbench calibrate` measures it end to end.

The set was written in parts (P1 and P4, then P2 and P3, then P5 and the live scripts P3-B1-S11..S18, then
more blind items for the rubrics left short), each held to its own thresholds: the tests that measure a
part say which. Every scenario of the benchmark has its blind file.
"""

from __future__ import annotations

import re
import shutil
import statistics
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pytest_helmbench.cli import app
from pytest_helmbench.errors import BenchmarkError
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
P1_P4, P2_P3, P5 = ("P1-", "P4-"), ("P2-", "P3-"), ("P5-",)
PILLARS = P1_P4 + P2_P3 + P5
AFTER = "written after reading the rubric"
MIN_EACH = 5
runner = CliRunner()


def read_set(folder: Path) -> list[CalibrationItem]:
    """Every item of a calibration folder, parsed as `helmbench calibrate` parses them."""
    items: list[CalibrationItem] = []
    for path in sorted(folder.glob("P*.yml")):
        if path.stem.startswith(PILLARS):
            items += parse_calibration_file(load_yaml(path.read_text(encoding="utf-8"), path), path)
    return items


def half(items: list[CalibrationItem], prefixes: tuple[str, ...]) -> list[CalibrationItem]:
    return [i for i in items if i.scenario.startswith(prefixes)]


@pytest.fixture(scope="module")
def loader() -> BenchmarkLoader:
    return BenchmarkLoader(BENCHMARK, evaluation_types=builtin_registry())


@pytest.fixture(scope="module")
def scenarios(loader: BenchmarkLoader) -> dict[str, Scenario]:
    found = (loader.load_scenario(f) for f in loader.scenario_dirs() if f.name.startswith(PILLARS))
    return {s.code: s for s in found}


@pytest.fixture(scope="module")
def blind() -> list[CalibrationItem]:
    return read_set(BLIND)


@pytest.fixture(scope="module")
def authors() -> list[CalibrationItem]:
    """The authors' set in `benchmark/calibration/`, the circular one the blind set stands beside."""
    return read_set(BENCHMARK / "calibration")


def tally(items: list[CalibrationItem], scenarios: dict[str, Scenario]) -> dict[tuple[str, str], Counter]:
    counts: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for item in items:
        criteria = scenario_rubrics(scenarios[item.scenario])[item.rubric]
        side = "pass" if gold_passes(item.gold, criteria) else "fail"
        counts[(item.scenario, item.rubric)][side] += 1
        counts[(item.scenario, item.rubric)]["after"] += AFTER in item.note
        counts[(item.scenario, item.rubric)]["items"] += 1
    return counts


def test_every_scenario_has_a_blind_file_that_loads_and_holds(blind, scenarios):
    files = [p for p in BLIND.glob("*.yml") if p.stem.startswith(PILLARS)]
    assert {p.stem for p in files} == set(scenarios)
    assert {i.scenario for i in blind} == set(scenarios)
    check_calibration(CalibrationSet(tuple(blind)), scenarios)  # case codes exist, gold verdicts complete
    assert {i.labeller for i in blind} == {"authors-blind"}  # the authors' labels, not clinicians'
    assert len({i.id for i in blind}) == len(blind)
    for path in files:  # the header says: not clinicians
        assert "NOT" in path.read_text(encoding="utf-8").split("\nlabeller:")[0], path.name


def test_every_rubric_of_the_scenarios_has_items(blind, scenarios):
    rubrics = {(code, name) for code, s in scenarios.items() for name in scenario_rubrics(s)}
    assert rubrics == {(s.code, c.criteria.name) for s in scenarios.values() for c in s.checks if c.criteria}
    assert set(tally(blind, scenarios)) == rubrics


def test_the_how_to_gives_the_set_s_size(blind):
    text = " ".join((BENCHMARK.parent / "docs" / "how-to" / "calibrate-a-judge.md").read_text().split())
    assert f"holds {len(blind):,} items" in text


def test_every_rubric_has_five_passing_and_five_failing_items(blind, scenarios):
    """Issue #28's floor, for every rubric of every scenario. Since the check tiers an item whose only misses
    are yellow checks passes (care lowered), so several rubrics took more replies written blind for them
    (ids -F01..., -G01...) by writers who had not read them, as the first writer had by the time a
    shortfall showed."""
    counts = tally(blind, scenarios)
    short = {r: (n["pass"], n["fail"]) for r, n in counts.items() if min(n["pass"], n["fail"]) < MIN_EACH}
    assert short == {}


def test_items_written_after_reading_a_rubric_stay_at_most_a_fifth(blind, scenarios):
    for rubric, count in tally(blind, scenarios).items():
        assert count["after"] * 5 <= count["items"], rubric


def test_replies_have_realistic_lengths(blind, authors):
    first = {i.text for i in half(blind, P1_P4)}
    assert statistics.median(len(r) for r in first) >= 800
    old = {i.text for i in half(authors, P1_P4)}
    assert statistics.median(len(r) for r in old) < 400  # the circular set it stands beside
    second = [len(i.response or "") for i in half(blind, P2_P3) if i.rubric == "reply-criteria.md"]
    assert statistics.median(second) >= 800
    fifth = [len(i.response or "") for i in half(blind, P5) if i.rubric == "reply-criteria.md"]
    assert statistics.median(fifth) >= 800


def test_items_spread_over_conditions_forms_and_user_contexts(blind, scenarios):
    listed: dict[str, set[str]] = defaultdict(set)
    for item in blind:
        listed[item.scenario].add(item.case.split("-")[3])
    for code, scenario in scenarios.items():
        if code.startswith(P1_P4):
            assert len(listed[code]) > 1 or len(scenario.conditions) == 1, code
        else:
            assert len(listed[code]) >= min(6, len(scenario.conditions)), (code, listed[code])
    first = half(blind, P1_P4)
    conditions = Counter(i.case.split("-")[3] for i in first if i.rubric == "reply-criteria.md")
    assert max(conditions.values()) < 0.25 * sum(conditions.values())  # no condition dominates (C2 was 91 %)
    assert any(i.text.startswith("Assistant:") for i in first)  # whole conversations with a simulated user
    with_context = Counter(bool(re.search(r"-U\d+-", i.case)) for i in half(blind, P2_P3))
    assert with_context[True] and with_context[False]
    fifth = [i for i in half(blind, P5) if i.rubric == "reply-criteria.md"]
    assert Counter(bool(re.search(r"-U\d+-", i.case)) for i in fifth).keys() == {True, False}
    conditions = Counter(i.case.split("-")[3] for i in fifth)
    assert max(conditions.values()) < 0.25 * sum(conditions.values())


def live_scripts(scenario: Scenario) -> dict[str, tuple[str, ...]]:
    """The fixed user turns of each live script of a scenario, by perturbation code."""
    return {
        p.code: tuple(turn.text for turn in p.dialogue.live)
        for p in scenario.perturbations
        if p.dialogue is not None and p.dialogue.live
    }


def test_live_scripts_have_whole_conversations_over_every_condition_and_user_context(blind, scenarios):
    """P3's live scripts (P3-B1-S11..S18): every item is a conversation on a live case, its assistant's
    turns between the script's next fixed user turns (verbatim, in order, the first being the case's
    prompt), ending on an assistant turn, and the items cover each condition and user context (and none)."""
    live = {code: scripts for code, s in scenarios.items() if (scripts := live_scripts(s))}
    assert {f"P3-B1-S{n}" for n in range(11, 19)} <= set(live)
    for code, scripts in live.items():
        items = [i for i in blind if i.scenario == code]
        for item in items:
            script = scripts[item.case.rsplit("-", 1)[1]]
            turns = re.split(r"\n\n(?=(?:User|Assistant): )", item.response or "")
            assert len(turns) % 2 and all(t.startswith("Assistant: ") for t in turns[::2]), item.id
            users = tuple(t.removeprefix("User: ") for t in turns[1::2])
            assert users == script[1 : len(users) + 1], item.id
        contexts = {m.group(1) if (m := re.search(r"-(U\d+)-", i.case)) else None for i in items}
        assert {i.case.split("-")[3] for i in items} == {c.code for c in scenarios[code].conditions}, code
        assert contexts == {None} | {u.code for u in scenarios[code].user_contexts}, code


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


def test_the_blind_set_stays_apart_from_the_calibration_folder(loader, blind):
    shipped = load_calibration(BENCHMARK, loader.files).items
    assert not {i.id for i in shipped} & {i.id for i in blind}
    assert not {i.text for i in shipped} & {i.text for i in blind}


WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?")


def four_grams(text: str) -> set[tuple[str, ...]]:
    words = WORD.findall(text.lower())
    return {tuple(words[k : k + 4]) for k in range(len(words) - 3)}


def own_rubric_overlap(items: list[CalibrationItem]) -> float:
    """Mean share of a reply's 4-grams that also occur in its own scenario's rubric files."""
    rubric: dict[str, set[tuple[str, ...]]] = {}
    shares = []
    for item in items:
        if item.scenario not in rubric:
            folder = BENCHMARK / "scenarios" / item.scenario
            rubric[item.scenario] = four_grams("\n".join(p.read_text() for p in folder.glob("*criteria.md")))
        grams = four_grams(item.response or "")
        shares.append(len(grams & rubric[item.scenario]) / len(grams))
    return statistics.mean(shares)


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


OVERLAP_GROUPS = (("P2-", "P3-"), ("P1-", "P4-"), ("P5-B1-", "P5-B2-"), ("P5-B3-",))


def test_the_docs_report_the_overlap_before_and_after_as_measured(blind, authors):
    """docs/reference/benchmark-files.md's 4-gram figures, per group of pillars: the blind replies, the
    old set's, and the items written after reading the rubric, each as this file measures it (0.1 %)."""

    def shares(items: list[CalibrationItem]) -> list[str]:
        return [f"{100 * own_rubric_overlap(half(items, prefixes)):.1f}" for prefixes in OVERLAP_GROUPS]

    blind_part = shares([i for i in blind if AFTER not in i.note])
    old_part = shares(authors)
    after_part = shares([i for i in blind if AFTER in i.note])
    text = " ".join((BENCHMARK.parent / "docs" / "reference" / "benchmark-files.md").read_text().split())
    assert (
        f"is {blind_part[0]} % (P2, P3), {blind_part[1]} % (P1, P4), {blind_part[2]} % (P5-B1, P5-B2) and "
        f"{blind_part[3]} % (P5-B3) for the blind replies, against {old_part[0]} %, {old_part[1]} %, "
        f"{old_part[2]} % and {old_part[3]} %" in text
    ), (blind_part, old_part)
    assert (
        f"(they share {after_part[0]} %, {after_part[1]} %, {after_part[2]} % and {after_part[3]} %)" in text
    )


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


def test_blind_replies_echo_their_rubrics_less_than_the_old_items(blind, scenarios, authors):
    """P1 and P4: own-rubric over other-rubric overlap, against the old items of the same scenarios."""
    first = {code: s for code, s in scenarios.items() if code.startswith(P1_P4)}
    rubric_text = {code: "\n".join(c.text for c in scenario_rubrics(s).values()) for code, s in first.items()}
    old = [i for i in authors if i.scenario in first]
    assert overlap_ratio(half(blind, P1_P4), rubric_text) < overlap_ratio(old, rubric_text)


def test_blind_replies_borrow_far_less_rubric_wording_than_the_authors_set(blind, authors):
    """P2 and P3: the share of own-rubric wording is under half the old set's (items written after
    reading the rubric left out)."""
    old = half(authors, P2_P3)
    written_blind = [i for i in half(blind, P2_P3) if AFTER not in i.note]
    assert own_rubric_overlap(written_blind) < own_rubric_overlap(old) / 2


def test_p5_blind_replies_borrow_less_than_half_the_rubric_wording_of_the_authors_set(blind, authors):
    """P5, the scenarios with a blind file: as for P2 and P3 (0.7 % of a blind reply's 4-grams are in its
    own rubric, against 1.7 % for the old items of P5-B1 and P5-B2)."""
    written_blind = [i for i in half(blind, P5) if AFTER not in i.note and i.rubric == "reply-criteria.md"]
    covered = {i.scenario for i in written_blind}
    old = [i for i in authors if i.scenario in covered and i.rubric == "reply-criteria.md"]
    assert own_rubric_overlap(written_blind) < own_rubric_overlap(old) / 2


@pytest.mark.slow
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
