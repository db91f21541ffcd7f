"""--helmbench-sample: stratified by behaviour, deterministic, seeded, and stable when scenarios are added."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from pytest_helmbench.suite.sampling import rank, sample_codes
from tests.benchfiles import write_benchmark


def codes_of(behaviour: str, scenarios: range, per_scenario: int = 40) -> list[tuple[str, str]]:
    """(behaviour, code) pairs like the plugin passes: `per_scenario` cases in each scenario."""
    return [
        (behaviour, f"{behaviour}-S{s}-C{c // 8 + 1}-PT{c % 8 + 1}")
        for s in scenarios
        for c in range(per_scenario)
    ]


def benchmark_entries(behaviours: int = 13, scenarios: int = 3) -> list[tuple[str, str]]:
    return [
        entry
        for b in range(1, behaviours + 1)
        for entry in codes_of(f"P{(b - 1) // 3 + 1}-B{b}", range(1, scenarios + 1))
    ]


def per_behaviour(chosen: set[str]) -> Counter[str]:
    return Counter("-".join(code.split("-")[:2]) for code in chosen)


def test_every_behaviour_is_represented_evenly() -> None:
    entries = benchmark_entries()
    chosen = sample_codes(entries, 26, seed=0)
    assert len(chosen) == 26
    assert sorted(per_behaviour(chosen).values()) == [2] * 13
    assert chosen <= {code for _, code in entries}


def test_fewer_codes_than_behaviours_take_one_each_in_numeric_order() -> None:
    chosen = sample_codes(benchmark_entries(), 3, seed=0)
    assert set(per_behaviour(chosen)) == {"P1-B1", "P1-B2", "P1-B3"}


def test_a_behaviour_that_runs_out_leaves_its_share_to_the_others() -> None:
    entries = codes_of("P1-B1", range(1, 2), per_scenario=2) + codes_of("P1-B2", range(1, 4))
    chosen = sample_codes(entries, 10, seed=0)
    assert per_behaviour(chosen) == {"P1-B1": 2, "P1-B2": 8}
    assert sample_codes(entries, 10_000, seed=0) == {code for _, code in entries}


def test_deterministic_and_independent_of_input_order_and_duplicates() -> None:
    entries = benchmark_entries()
    shuffled = entries * 3  # every model and repeat of a case gives the same pair again
    random.Random(7).shuffle(shuffled)
    assert sample_codes(entries, 40, seed=3) == sample_codes(shuffled, 40, seed=3)


def test_the_seed_changes_the_draw() -> None:
    entries = benchmark_entries()
    draws = [sample_codes(entries, 40, seed=seed) for seed in range(4)]
    assert all(len(draw) == 40 for draw in draws)
    assert len({frozenset(draw) for draw in draws}) == 4
    assert rank(1, "P1-B1-S1-C1-PT1") != rank(2, "P1-B1-S1-C1-PT1")


@pytest.mark.parametrize("seed", range(5))
def test_adding_a_scenario_changes_only_a_few_sampled_cases(seed: int) -> None:
    entries = benchmark_entries()
    before = sample_codes(entries, 60, seed=seed)
    after = sample_codes(entries + codes_of("P1-B1", range(4, 5)), 60, seed=seed)
    assert len(after) == 60
    assert len(before & after) >= 54  # >= 90 % overlap: only P1-B1's share can change
    assert {code for code in before ^ after if not code.startswith("P1-B1-")} == set()


def test_ranking_by_position_would_not_be_stable() -> None:
    """What the hash ranking avoids: a seeded shuffle of the code list reshuffles everything."""
    entries = benchmark_entries()
    extra = codes_of("P1-B1", range(4, 5))

    def shuffled_draw(pairs: list[tuple[str, str]]) -> set[str]:
        codes = sorted({code for _, code in pairs})
        random.Random(0).shuffle(codes)
        return set(codes[:60])

    assert len(shuffled_draw(entries) & shuffled_draw(entries + extra)) < 54
    assert len(sample_codes(entries, 60, 0) & sample_codes(entries + extra, 60, 0)) >= 54


def test_the_plugin_keeps_every_model_and_repeat_of_a_sampled_code(pytester, helm_env, monkeypatch) -> None:
    monkeypatch.delenv("OPENROUTER_API_KEY")
    pytester.makeini("[pytest]\n")
    write_benchmark(pytester.path / "benchmark", scenarios=("P1-B1-S1", "P1-B2-S1"))
    args = ["benchmark", "-p", "no:randomly", "--collect-only", "-q", "--helmbench-model=a/one,b/two"]
    args += ["--helmbench-repeat=2", "--helmbench-sample=3", "--helmbench-sample-seed=5"]
    result = pytester.runpytest(*args)
    ids = [line for line in result.outlines if "::" in line]
    codes = Counter(line.split("::")[1].split("[")[0] for line in ids)
    assert len(codes) == 3 and set(codes.values()) == {4}  # 2 models x 2 repeats of each code
    assert {code[:5] for code in codes} == {"P1-B1", "P1-B2"}
    again = [line for line in pytester.runpytest(*args).outlines if "::" in line]
    assert again == ids


SAMPLED_BENCHMARK = ("P1-B1-S1", "P1-B1-S2", "P1-B2-S1", "P1-B3-S1")
CONFTEST_DROPPING_S2 = """
def pytest_collection_modifyitems(config, items):
    kept = [item for item in items if "P1-B1-S2" not in item.nodeid]
    config.hook.pytest_deselected(items=[item for item in items if item not in kept])
    items[:] = kept
"""


def _collected(pytester: pytest.Pytester, *extra: str) -> tuple[list[str], str]:
    args = ["benchmark", "-p", "no:randomly", "--collect-only", "-q", "--helmbench-model=a/one,b/two"]
    args += ["--helmbench-layout=seed,deployed", "--helmbench-sample=5", "--helmbench-sample-seed=2"]
    result = pytester.runpytest(*args, *extra)
    return sorted(line for line in result.outlines if "::" in line), result.outlines[-1]


def test_the_sample_drawn_at_collection_is_the_one_drawn_from_the_items(pytester, monkeypatch) -> None:
    """Nothing but --helmbench-select narrows the session: the sample is drawn before the items are
    built (no case left out is counted as deselected), and it is the same sample a session whose -k
    keeps everything draws from its items; every model and layout of a sampled code is kept."""
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    pytester.makeini("[pytest]\n")
    write_benchmark(pytester.path / "benchmark", scenarios=SAMPLED_BENCHMARK)
    for select in ([], ["--helmbench-select=P1-B1,P1-B3"]):
        at_collection, last = _collected(pytester, *select)
        from_items, last_from_items = _collected(pytester, *select, "-k", "P1")
        assert at_collection == from_items and len(at_collection) == 5 * 4, at_collection
        assert "deselected" not in last and "deselected" in last_from_items, (last, last_from_items)


def test_a_plugin_that_drops_items_gets_the_sample_drawn_from_what_it_kept(pytester, monkeypatch) -> None:
    """A conftest's collection hook (any plugin HELMBench does not know) could drop cases: the sample
    is then drawn from the items it kept, and is whole."""
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    pytester.makeini("[pytest]\n")
    write_benchmark(pytester.path / "benchmark", scenarios=SAMPLED_BENCHMARK)
    pytester.makeconftest(CONFTEST_DROPPING_S2)
    ids, last = _collected(pytester)
    assert len(ids) == 5 * 4 and not any("P1-B1-S2" in nodeid for nodeid in ids), ids
    assert "deselected" in last
