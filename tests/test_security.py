"""Benchmark trees written by strangers, end to end: nothing outside the tree is read, sent or stored;
hostile input (links, FIFOs, /proc, alias bombs, huge or misnamed files) is a collection error that
names the file and the fix, never a traceback or a hang."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.benchfiles import PERTURBATIONS, STRICT_SCHEMA, write, write_benchmark
from tests.openrouter_server import Reply

CANARY = "CANARY-5c1e-do-not-leak"
GOOD = {"category": "ANSWER", "response": "Mitochondria."}
# Subprocess runs get this long before a hang is declared (an old reader blocked on a FIFO forever).
HANG_TIMEOUT = 120


@pytest.fixture
def bench(pytester: pytest.Pytester, helm_env) -> Path:
    """A benchmark with a good scenario P1-B1-S1 whose cases pass; the attack goes in P1-B1-S2."""
    pytester.makeini("[pytest]\n")
    helm_env.add_rule(contains="powerhouse", reply=Reply.ok(GOOD))
    return write_benchmark(pytester.path / "benchmark", scenarios=("P1-B1-S1", "P1-B1-S2"))


@pytest.fixture
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder outside the benchmark tree holding a valid-looking scenario full of the canary."""
    folder = tmp_path_factory.mktemp("outside")
    write(folder / "S2.md", f"---\ncategory: ANSWER\n---\n\n## Your job\n\n{CANARY} in the scenario.\n")
    write(folder / "S2.json", json.dumps(STRICT_SCHEMA))
    write(folder / "perturbations.md", f"# PT1\n\n## User input\n\n{CANARY}, powerhouse?\n")
    return folder


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("benchmark", "-p", "no:randomly", "--continue-on-collection-errors", *args)


def run_subprocess(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "benchmark", "-p", "no:randomly", "--continue-on-collection-errors", *args, timeout=HANG_TIMEOUT
    )


def output(result: pytest.RunResult) -> str:
    return result.stdout.str() + result.stderr.str()


def assert_collection_error(result: pytest.RunResult, path: Path, message: str) -> None:
    """One collection error (P1-B1-S2's), naming the file and the fix; P1-B1-S1's 8 cases still pass."""
    result.assert_outcomes(passed=8, errors=1)
    out = output(result)
    assert f"{path}: {message}" in out or f"{path}:" in out and message in out, out
    assert "  fix: " in out
    assert "Traceback" not in out


def assert_canary_nowhere(pytester: pytest.Pytester, result: pytest.RunResult, helm_env) -> None:
    assert CANARY not in output(result)
    assert all(CANARY not in json.dumps(request.body) for request in helm_env.requests)
    assert helm_env.requests, "the good scenario ran"
    for db in pytester.path.glob("helmbench.db*"):
        assert CANARY.encode() not in db.read_bytes()


def test_a_link_to_a_file_outside_the_tree_is_an_error_and_nothing_it_holds_leaks(
    pytester, bench, outside, helm_env
):
    link = bench / "scenarios/P1-B1-S2/perturbations.md"
    link.unlink()
    link.symlink_to(outside / "perturbations.md")
    result = run(pytester)
    assert_collection_error(result, link, "is a symbolic link that leads outside the benchmark root")
    assert_canary_nowhere(pytester, result, helm_env)


def test_a_linked_folder_outside_the_tree_is_an_error_naming_the_link(pytester, bench, outside, helm_env):
    folder = bench / "scenarios/P1-B1-S2"
    for path in folder.iterdir():
        path.unlink()
    folder.rmdir()
    folder.symlink_to(outside, target_is_directory=True)
    result = run(pytester)
    assert_collection_error(result, folder, "is a symbolic link that leads outside the benchmark root")
    assert_canary_nowhere(pytester, result, helm_env)


def test_a_folder_link_to_proc_is_an_error_and_pytest_never_walks_it(pytester, bench, helm_env):
    link = bench / "scenarios/P1-B1-S3"
    link.symlink_to("/proc", target_is_directory=True)  # walked, /proc/self/root reaches the whole disk
    result = run_subprocess(pytester)
    result.assert_outcomes(passed=16, errors=1)
    assert f"{link}: is a symbolic link that leads outside the benchmark root" in output(result)
    assert "Traceback" not in output(result)


def test_a_link_elsewhere_under_the_root_fails_every_scenario(pytester, bench, outside, helm_env):
    (bench / "notes").mkdir()
    (bench / "notes/secret.md").symlink_to(outside / "S2.md")
    result = run(pytester)
    result.assert_outcomes(errors=2)
    assert f"{bench / 'notes/secret.md'}: is a symbolic link that leads outside" in output(result)
    assert CANARY not in output(result)
    assert helm_env.requests == []


def test_a_link_inside_the_tree_is_followed(pytester, bench, helm_env):
    own = bench / "scenarios/P1-B1-S2/perturbations.md"
    own.unlink()
    own.symlink_to(Path("../P1-B1-S1/perturbations.md"))
    run(pytester).assert_outcomes(passed=16)


def test_proc_self_environ_as_a_link_target_is_never_read(pytester, bench, helm_env, monkeypatch):
    monkeypatch.setenv("HELMBENCH_TEST_CANARY", CANARY)
    link = bench / "scenarios/P1-B1-S2/conditions.md"
    link.symlink_to("/proc/self/environ")
    result = run(pytester)
    assert_collection_error(result, link, "is a symbolic link that leads outside the benchmark root")
    assert_canary_nowhere(pytester, result, helm_env)


@pytest.mark.parametrize("name", ["conditions.md", "perturbations/PT2.md"])
def test_a_fifo_named_like_a_component_file_is_an_error_not_a_hang(pytester, bench, helm_env, name):
    folder = bench / "scenarios/P1-B1-S2"
    if name.startswith("perturbations/"):
        (folder / "perturbations.md").unlink()
        write(folder / "perturbations/PT1.md", "## User input\n\npowerhouse?\n")
    fifo = folder / name
    os.mkfifo(fifo)
    result = run_subprocess(pytester)
    assert_collection_error(result, fifo, "is not a regular file")


def test_a_yaml_alias_bomb_is_a_collection_error(pytester, bench, helm_env):
    levels = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        levels.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    md_path = bench / "scenarios/P1-B1-S2/S2.md"
    write(md_path, "---\ncategory: ANSWER\n" + "\n".join(levels) + "\n---\n\n## Your job\n\nHelp.\n")
    result = run_subprocess(pytester)  # the old loader expanded it for minutes: never hang this suite
    assert_collection_error(result, md_path, "YAML refused: the alias *a is not allowed")
    assert f"{md_path}:4: " in output(result)


def test_a_file_over_the_size_limit_is_an_error_and_the_option_raises_it(
    pytester, bench, helm_env, monkeypatch
):
    big = bench / "scenarios/P1-B1-S2/perturbations.md"
    write(big, PERTURBATIONS + "\n" + "padding " * 140_000)  # 1.1 MB
    assert big.stat().st_size > 1024 * 1024
    result = run(pytester)
    assert_collection_error(result, big, "is larger than the 1048576-byte limit")
    assert "--helmbench-max-file-size" in output(result)
    run(pytester, "--helmbench-max-file-size=2000000").assert_outcomes(passed=16)
    monkeypatch.setenv("HELMBENCH_MAX_FILE_SIZE", "2000")
    result = run(pytester, "--helmbench-dry-run")
    result.assert_outcomes(errors=1, skipped=8)  # env: the shared files are small, the padded one is not
    assert "is larger than the 2000-byte limit" in output(result)


def test_a_bad_max_file_size_is_a_clear_error(pytester, bench, helm_env):
    result = run(pytester, "--helmbench-max-file-size=lots")
    assert "--helmbench-max-file-size: 'lots' must be a whole number of bytes" in output(result)
    assert "Traceback" not in output(result)


def test_an_empty_scenario_body_is_an_error(pytester, bench, helm_env):
    md_path = bench / "scenarios/P1-B1-S2/S2.md"
    write(md_path, "---\ncategory: ANSWER\n---\n\n   \n")
    assert_collection_error(run(pytester), md_path, "the scenario body is empty")


def test_a_scenario_file_not_matching_its_folder_is_an_error_not_skipped(pytester, bench, helm_env):
    folder = bench / "scenarios/P1-B1-S2"
    misnamed = folder / "S02.md"
    (folder / "S2.md").rename(misnamed)
    result = run(pytester)
    assert_collection_error(result, misnamed, "file name 'S02.md' does not match its folder P1-B1-S2")
    assert "rename it to S2.md" in output(result)
