"""--helmbench-shard K/N: deterministic, disjoint, complete, balanced per behaviour, stable when a
scenario is added; every model and repeat of a code in one shard; bad values a usage error."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from pytest_helmbench.suite.shards import Shard, assign_shards, parse_shard, shard_codes
from tests.benchfiles import write_benchmark
from tests.test_sampling import benchmark_entries, codes_of, per_behaviour


@pytest.mark.parametrize("count", [1, 2, 3, 7])
def test_the_shards_are_disjoint_and_together_hold_every_code(count: int) -> None:
    entries = benchmark_entries()
    shards = [shard_codes(entries, Shard(k, count)) for k in range(1, count + 1)]
    assert set().union(*shards) == {code for _, code in entries}
    assert sum(len(s) for s in shards) == len({code for _, code in entries})  # no code in two shards


def test_the_split_is_deterministic_whatever_the_order() -> None:
    entries = benchmark_entries()
    shuffled = list(entries)
    random.Random(4).shuffle(shuffled)
    assert assign_shards(entries, 3) == assign_shards(shuffled + entries[:10], 3)  # repeats count once


@pytest.mark.parametrize("count", [2, 3, 5])
def test_each_behaviour_is_split_evenly(count: int) -> None:
    entries = benchmark_entries(behaviours=13, scenarios=3) + codes_of("P5-B14", range(1, 2), per_scenario=7)
    sizes = {k: per_behaviour(shard_codes(entries, Shard(k, count))) for k in range(1, count + 1)}
    for behaviour in {b for b, _ in entries}:
        counts = [sizes[k][behaviour] for k in sizes]
        assert max(counts) - min(counts) <= 1, (behaviour, counts)


def test_fewer_codes_than_shards_leave_some_shards_empty() -> None:
    entries = [("P1-B1", "P1-B1-S1-C1-PT1"), ("P1-B1", "P1-B1-S1-C1-PT2")]
    assert sorted(len(shard_codes(entries, Shard(k, 3))) for k in (1, 2, 3)) == [0, 1, 1]


def test_adding_a_scenario_moves_only_a_few_codes_of_its_own_behaviour() -> None:
    entries = benchmark_entries()
    before = assign_shards(entries, 3)
    added = codes_of("P1-B1", range(4, 5))  # 40 new cases in P1-B1
    after = assign_shards(entries + added, 3)
    moved = [code for code in before if before[code] != after[code]]
    assert all(code.startswith("P1-B1-") for code in moved)  # no other behaviour changes at all
    assert len(moved) <= 10, len(moved)  # of P1-B1's 120 codes (a plain round-robin moves ~80)
    assert Counter(after.values()) != Counter()  # and the new codes are placed too
    assert {code for _, code in added} <= set(after)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("2/3", Shard(2, 3)), (" 1 / 1 ", Shard(1, 1)), ("3/3", Shard(3, 3)), ("", None), (None, None)],
)
def test_parse_shard(text: str | None, expected: Shard | None) -> None:
    assert parse_shard(text) == expected


@pytest.mark.parametrize("text", ["0/3", "4/3", "a/b", "1/0", "2", "-1/3", "1/3/4"])
def test_a_bad_shard_says_how_to_write_one(text: str) -> None:
    with pytest.raises(ValueError, match="write K/N with 1 <= K <= N"):
        parse_shard(text)


def _collected(pytester: pytest.Pytester, *args: str) -> list[str]:
    result = pytester.runpytest(*args)
    return [line for line in result.outlines if "::" in line]


def test_the_plugin_runs_every_model_and_repeat_of_its_codes_and_deselects_the_rest(
    pytester: pytest.Pytester, helm_env, monkeypatch
) -> None:
    monkeypatch.delenv("OPENROUTER_API_KEY")
    pytester.makeini("[pytest]\n")
    write_benchmark(pytester.path / "benchmark", scenarios=("P1-B1-S1", "P1-B2-S1"))
    base = ["benchmark", "-p", "no:randomly", "--collect-only", "-q", "--helmbench-model=a/one,b/two"]
    base += ["--helmbench-repeat=2"]
    everything = _collected(pytester, *base)
    shards = [_collected(pytester, *base, f"--helmbench-shard={k}/3") for k in (1, 2, 3)]
    assert sorted(sum(shards, [])) == sorted(everything)  # disjoint, and together everything
    for ids in shards:
        codes = Counter(line.split("::")[1].split("[")[0] for line in ids)
        assert set(codes.values()) <= {4}  # 2 models x 2 repeats of each code, all in the same shard
    counts = sorted(len(ids) for ids in shards)
    assert counts[-1] - counts[0] <= 2 * 4 * 2  # balanced per behaviour: at most one code each
    monkeypatch.setenv("HELMBENCH_SHARD", "2/3")
    assert _collected(pytester, *base) == shards[1]  # the environment variable too
    result = pytester.runpytest(*base, "--helmbench-shard=1/3")
    result.stdout.re_match_lines([rf".*{len(everything) - len(shards[0])} deselected.*"])


def test_the_shard_applies_after_the_sample(pytester: pytest.Pytester, helm_env, monkeypatch) -> None:
    monkeypatch.delenv("OPENROUTER_API_KEY")
    pytester.makeini("[pytest]\n")
    write_benchmark(pytester.path / "benchmark", scenarios=("P1-B1-S1", "P1-B2-S1"))
    base = ["benchmark", "-p", "no:randomly", "--collect-only", "-q", "--helmbench-model=a/one"]
    sample = set(_collected(pytester, *base, "--helmbench-sample=4"))
    shards = [
        set(_collected(pytester, *base, "--helmbench-sample=4", f"--helmbench-shard={k}/2")) for k in (1, 2)
    ]
    assert shards[0] | shards[1] == sample and not shards[0] & shards[1]
    assert len(shards[0]) == len(shards[1]) == 2  # two behaviours, two sampled codes each: one per shard


@pytest.mark.parametrize(("value", "key"), [("0/3", []), ("4/3", []), ("a/b", ["--helmbench-run-key=k"])])
def test_a_bad_shard_is_a_usage_error_naming_the_option(
    pytester: pytest.Pytester, helm_env, value: str, key: list[str], tmp_path
) -> None:
    pytester.makeini("[pytest]\n")
    write_benchmark(pytester.path / "benchmark", scenarios=("P1-B1-S1",))
    db = f"--helmbench-db=sqlite:///{tmp_path / 'results.db'}"
    args = ["benchmark", "-p", "no:randomly", "--helmbench-model=a/one", f"--helmbench-shard={value}", db]
    result = pytester.runpytest(*args, *key)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--helmbench-shard*{value}*write K/N with 1 <= K <= N*"])
    output = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in output and "INTERNALERROR" not in output
    assert helm_env.chat_requests == []
