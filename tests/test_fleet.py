"""One run across processes: three `--helmbench-shard k/3` processes with one `--helmbench-run-key`
into one database (SQLite and a real PostgreSQL), against the loopback OpenRouter server.

One run per model, every selected case stored exactly once, the run completed by the last shard to
finish (whose summary shows the whole run), counters that agree with the rows; the cost ceiling and
a model's stop (bad key) hold across the processes; the cache serves one process's answers to another.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pytest_helmbench.cli import app
from tests import docpages
from tests.benchfiles import make_outcomes, write_benchmark
from tests.dbquery import query
from tests.openrouter_server import Reply
from tests.test_faults import assert_counters_agree, assert_no_duplicate_content

pytestmark = pytest.mark.e2e  # starts pytest, servers or processes: out of `dev.py test --quick`

SCENARIOS = ("P1-B1-S1", "P1-B1-S2", "P1-B2-S1")
GOOD, BAD = "openai/gpt-4o-mini", "vendor/other"
MODELS = f"marking_model: judge/model\nmodels:\n  - id: {GOOD}\n  - id: {BAD}\n"
KEY = "pipeline-7"


def _project(tmp_path: Path) -> tuple[Path, set[str]]:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pytest.ini").write_text("[pytest]\n")
    root = write_benchmark(project / "benchmark", scenarios=SCENARIOS, models=MODELS)
    return project, {o.case_code for o in make_outcomes(root, "m")}


def shard(project: Path, db_url: str, k: int | None, *extra: str) -> subprocess.Popen[str]:
    """One process of the fleet (a CI matrix job)."""
    args = [sys.executable, "-m", "pytest", "benchmark", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
    args += [f"--helmbench-db={db_url}", f"--helmbench-run-key={KEY}", *extra]
    if k is not None:
        args.append(f"--helmbench-shard={k}/3")
    return subprocess.Popen(
        args,
        cwd=project,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish(processes: list[subprocess.Popen[str]]) -> list[tuple[int, str]]:
    done = [(p.wait(timeout=300), p.communicate()[0]) for p in processes]
    for _, output in done:
        _no_crash(output)
    return done


def alone(project: Path, db_url: str, k: int | None, *extra: str) -> tuple[int, str]:
    """One process of the fleet while no other runs (a shard run on its own, a refused one): pytest run
    in this process, as a process of its own would run it (docpages.run_pytest), for a second less of CPU
    than starting one. What runs at the same time as another process is started by `shard`."""
    args = ["benchmark", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
    args += [f"--helmbench-db={db_url}", f"--helmbench-run-key={KEY}", *extra]
    if k is not None:
        args.append(f"--helmbench-shard={k}/3")
    done = docpages.run_pytest(args, project, dict(os.environ))
    _no_crash(done.stdout)
    return done.returncode, done.stdout


def _no_crash(output: str) -> None:
    for sign in ("INTERNALERROR", "Traceback", "RESULTS NOT RECORDED"):
        assert sign not in output, output[-3000:]


def _runs(db_url: str) -> dict[str, tuple]:
    rows = query(
        db_url,
        "select llm.model_id, evaluationrun.id, status, run_key, shard_count, passed_tests + failed_tests "
        "+ error_tests + skipped_tests from evaluationrun join llm on llm.id = evaluationrun.llm_id",
    )
    found = {row[0]: row[1:] for row in rows}
    assert len(found) == len(rows), f"more than one run of a model: {rows}"
    return found


def _stored_once(db_url: str, run_id: int, codes: set[str]) -> None:
    stored = [code for (code,) in query(db_url, f"select case_code from result where run_id = {run_id}")]
    assert sorted(stored) == sorted(codes), f"run {run_id}: each case exactly once"


def test_three_shards_with_one_key_make_one_run_per_model_completed_by_the_last(tmp_path, db_url, helm_env):
    project, codes = _project(tmp_path)
    helm_env.latency = 0.02  # the three processes overlap
    outputs = finish([shard(project, db_url, k) for k in (1, 2, 3)])
    for status, output in outputs:
        assert status in (0, 1), output[-3000:]  # 1: some answers fail their evaluation, as in one run
    runs = _runs(db_url)
    assert set(runs) == {GOOD, BAD}
    for model, (run_id, run_status, key, count, stored) in runs.items():
        assert (run_status, key, count, stored) == ("completed", KEY, 3, len(codes)), model
        _stored_once(db_url, run_id, codes)
        shards = query(db_url, f"select shard, status from runshard where run_id = {run_id} order by shard")
        assert shards == [(1, "completed"), (2, "completed"), (3, "completed")]
    assert_counters_agree(db_url)
    assert_no_duplicate_content(db_url)
    # The figures stored on each run are the whole run's (the last shard computes them once more).
    for scores, passed, failed, errors in query(
        db_url, "select scores, passed_tests, failed_tests, error_tests from evaluationrun"
    ):
        scores = json.loads(scores) if isinstance(scores, str) else scores
        assert (scores["passed"], scores["failed"], scores["errors"]) == (passed, failed, errors)
    selection = query(db_url, "select subset, selected_cases, benchmark_cases from evaluationrun")
    assert {(bool(s), n, t) for s, n, t in selection} == {(False, len(codes), len(codes))}  # not a subset
    assert not any("subset" in output for _, output in outputs)
    # The shard that finished last (exactly one) shows the whole run; the others their own part.
    whole = [output for _, output in outputs if _total(output, len(codes))]
    assert len(whole) == 1, [output[-1500:] for _, output in outputs]
    # Its latencies are the whole run's too (the server answers after 20 ms).
    medians = [int(ms) for ms in re.findall(r"latency p50 (\d+) ms", whole[0])]
    assert medians and all(ms >= 20 for ms in medians), whole[0][-1500:]
    costs = CliRunner().invoke(app, ["costs", "--db", db_url])  # what `helmbench` reads: the whole run
    assert costs.exit_code == 0, costs.output
    rows = [
        line.split()
        for line in costs.output.splitlines()
        if line.split()[:1] in ([str(r[0])] for r in runs.values())
    ]
    assert sorted((row[1], row[2], sum(map(int, row[3:6]))) for row in rows) == [
        (GOOD, "completed", len(codes)),
        (BAD, "completed", len(codes)),
    ]
    sent = len(helm_env.chat_requests)
    assert sent > 0
    # Another process of another key, same database, temperature 0: every answer comes from the cache.
    again = subprocess.run(
        [sys.executable, "-m", "pytest", "benchmark", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
        + [f"--helmbench-db={db_url}", "--helmbench-run-key=another"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode in (0, 1), again.stdout[-3000:]
    assert len(helm_env.chat_requests) == sent, "a case answered by one process was bought again"
    assert f"{2 * len(codes)} from cache" in again.stdout or f"{len(codes)} from cache" in again.stdout


def test_a_process_that_does_not_fit_the_keys_run_is_refused_before_it_calls_anything(
    tmp_path, db_url, helm_env
):
    """Another shard count, other answer-deciding settings or another benchmark.yml: exit 4 with what
    differs, before a single call; the run and its Results stay as they were."""
    project, _ = _project(tmp_path)
    status, output = alone(project, db_url, 1)
    assert status in (0, 1), output[-3000:]
    before = (query(db_url, "select id, status from evaluationrun order by id"), _results(db_url))
    sent = len(helm_env.chat_requests)
    assert sent > 0
    mismatches = [
        (["--helmbench-shard=2/2"], "was started with 3 shard(s), this process has --helmbench-shard K/2"),
        (
            ["--helmbench-shard=2/3", "--helmbench-temperature=0.7"],
            "was started with other settings (temperature",
        ),
    ]
    for extra, says in mismatches:
        status, output = alone(project, db_url, None, *extra)
        assert status == pytest.ExitCode.USAGE_ERROR, output[-3000:]
        assert says in output and "--helmbench-run-key pipeline-7" in output, output[-3000:]
    # A shard resumed with other settings would leave the run half one thing, half another.
    status, output = alone(project, db_url, 1, "--helmbench-resume", "--helmbench-temperature=0.7")
    assert status == pytest.ExitCode.USAGE_ERROR, output[-3000:]
    assert "was started with other settings (temperature 0.0 there, 0.7 here" in output, output[-3000:]
    yml = project / "benchmark" / "benchmark.yml"
    yml.write_text(yml.read_text().replace("description: test", "description: edited"))
    status, output = alone(project, db_url, 2)
    assert status == pytest.ExitCode.USAGE_ERROR, output[-3000:]
    assert "was started with another benchmark.yml" in output, output[-3000:]
    assert len(helm_env.chat_requests) == sent, "a refused process paid for calls"
    assert (query(db_url, "select id, status from evaluationrun order by id"), _results(db_url)) == before


def test_shards_under_xdist_make_one_run_of_the_whole_selection(tmp_path, db_url, helm_env):
    """Each shard runs under `-n 2`: its controller sees only the node ids left after the split, yet
    the run records what every shard selected together (not a subset), and is completed once. (One
    after another: that shards overlap is the test above's.)"""
    project, codes = _project(tmp_path)
    outputs = [alone(project, db_url, k, "-n", "2") for k in (1, 2, 3)]
    for status, output in outputs:
        assert status in (0, 1), output[-3000:]
        assert "subset" not in output, output[-3000:]
    runs = _runs(db_url)
    for model, (run_id, run_status, key, count, stored) in runs.items():
        assert (run_status, key, count, stored) == ("completed", KEY, 3, len(codes)), model
        _stored_once(db_url, run_id, codes)
    selection = query(db_url, "select subset, selected_cases, benchmark_cases from evaluationrun")
    assert {(bool(s), n, t) for s, n, t in selection} == {(False, len(codes), len(codes))}


def _results(db_url: str) -> list[tuple]:
    return query(db_url, "select run_id, case_code, status from result order by id")


SUMMARY_COUNTS = r"(\d+) passed, (\d+) failed, (\d+) errors?, (\d+) skipped"


def _total(output: str, expected: int) -> bool:
    """The summary's `N passed, M failed, E errors, S skipped` adds up to `expected` for each model."""
    found = re.findall(SUMMARY_COUNTS, output)
    return bool(found) and all(sum(int(n) for n in counts) == expected for counts in found)


def test_a_stop_and_the_cost_ceiling_hold_across_the_processes_of_a_key(tmp_path, db_url, helm_env):
    project, codes = _project(tmp_path)
    helm_env.add_rule(model=BAD, reply=Reply.error(401, "User not found."))
    per_call = 0.00014  # the server's cost of a call without a price list
    ceiling = 8 * per_call
    limits = ["--helmbench-max-cost", str(ceiling), "--helmbench-concurrency=2"]
    first = [alone(project, db_url, 1, *limits)]  # meets the bad key: the model is stopped
    assert "STOPPED vendor/other" in first[0][1], first[0][1][-3000:]
    bad_calls = [r for r in helm_env.chat_requests if (r.body or {}).get("model") == BAD]
    assert len(bad_calls) == 1, "the first call of a model goes alone: one 401"
    others = finish([shard(project, db_url, k, *limits) for k in (2, 3)])
    for status, output in [*first, *others]:
        assert status == pytest.ExitCode.INTERRUPTED, output[-3000:]  # a stopped model: as in one run
        assert "STOPPED vendor/other" in output, output[-3000:]  # every process says so
    assert [r for r in helm_env.chat_requests if (r.body or {}).get("model") == BAD] == bad_calls, (
        "shards 2 and 3 called a model another shard had stopped: "
        + others[0][1][-2500:]
        + others[1][1][-2500:]
    )
    (spent,) = query(db_url, "select spent_usd from fleetspend where run_key = 'pipeline-7'")[0]
    paid = query(db_url, "select sum(coalesce(cost_usd, 0) + coalesce(judge_cost_usd, 0)) from result")[0][0]
    assert abs(spent - paid) < 1e-9
    in_flight = 3 * 2 * 2 * per_call  # processes x concurrency x (answer + judge)
    assert ceiling <= spent <= ceiling + in_flight, (spent, ceiling)
    runs = _runs(db_url)
    good_run = runs[GOOD][0]
    _stored_once(db_url, good_run, codes)
    skipped = query(db_url, f"select count(*) from result where run_id = {good_run} and status = 'skipped'")
    assert skipped[0][0] > 0, "the ceiling skipped nothing: this test proves nothing"
    assert {runs[GOOD][1], runs[BAD][1]} == {"interrupted"}  # resumable
    assert_counters_agree(db_url)


def test_an_interrupted_shard_leaves_the_run_resumable_and_its_resume_completes_it(
    tmp_path, db_url, helm_env
):
    project, codes = _project(tmp_path)
    alone(project, db_url, 1)
    alone(project, db_url, 2)
    assert {status for _, status, *_ in _runs(db_url).values()} == {"running"}  # shard 3 still to come
    # A run still running has no figures yet: the shard that ends it stores the whole run's.
    stored = [
        json.loads(v) if isinstance(v, str) else v
        for (v,) in query(db_url, "select scores from evaluationrun")
    ]
    assert stored == [None, None]
    status, output = alone(project, db_url, 3, "--helmbench-max-cost=0.0000001")
    assert "cost ceiling" in output, output[-3000:]  # the key's spend is over it: every case skipped
    runs = _runs(db_url)
    assert {status for _, status, *_ in runs.values()} == {"interrupted"}
    skipped = "select count(*) from result where status = 'skipped'"
    assert query(db_url, skipped)[0][0] > 0, "the ceiling skipped nothing: this test proves nothing"
    status, output = alone(project, db_url, 3, "--helmbench-resume")
    assert status in (0, 1), output[-3000:]
    assert _total(output, len(codes)), output[-3000:]  # the last shard shows the whole run
    assert query(db_url, skipped)[0][0] == 0  # the resumed shard ran what the ceiling skipped
    for model, (run_id, run_status, *_) in _runs(db_url).items():
        assert run_status == "completed", model
        assert run_id == runs[model][0]  # the same run, resumed
        _stored_once(db_url, run_id, codes)  # the skipped Results replaced, none twice
    assert_counters_agree(db_url)


def test_processes_joining_a_key_at_the_same_moment_make_one_run(tmp_path, db_url):
    """Four recorders with one key write their first Result at once: one run, four Results."""
    from pytest_helmbench.storage.engine import upgrade
    from pytest_helmbench.storage.recorder import Recorder
    from pytest_helmbench.suite.shards import FleetRole

    root = write_benchmark(tmp_path / "benchmark", scenarios=SCENARIOS)
    outcomes = make_outcomes(root, GOOD)[:4]
    upgrade(db_url)
    barrier = threading.Barrier(len(outcomes))
    errors: list[BaseException] = []

    def record(k: int) -> None:
        recorder = Recorder(db_url, f"session-{k}", FleetRole(KEY, k + 1, len(outcomes)))
        try:
            barrier.wait()
            recorder.record(outcomes[k], {})
            recorder.finish({})
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
        finally:
            recorder.close()

    threads = [threading.Thread(target=record, args=(k,)) for k in range(len(outcomes))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    runs = _runs(db_url)
    assert list(runs) == [GOOD] and runs[GOOD][1:] == ("completed", KEY, len(outcomes), len(outcomes))
    assert_counters_agree(db_url)


def test_a_keyed_run_is_joined_only_with_its_benchmark_and_answer_deciding_settings():
    """check_same_settings / check_same_benchmark: the settings a headline groups by must match (as
    stored: JSON); the others (concurrency, cache, pytest's arguments) may differ."""
    from pytest_helmbench.storage.fleet import FleetError, check_same_benchmark, check_same_settings
    from pytest_helmbench.suite.shards import FleetRole

    role = FleetRole(KEY, 2, 3)
    stored = {
        "model": "m",
        "temperature": 0.0,
        "marking_models": ["a", "b"],
        "concurrency": 50,
        "pytest_args": [],
    }
    same = {**stored, "marking_models": ("a", "b"), "concurrency": 8, "pytest_args": ["-x"], "cache": "off"}
    check_same_settings(7, stored, same, role)  # differs only where a headline does not look
    with pytest.raises(FleetError, match=r"run 7 \(--helmbench-run-key pipeline-7\) was started with other "):
        check_same_settings(7, stored, {**same, "temperature": 0.7}, role)
    with pytest.raises(FleetError, match=r"temperature 0.0 there, 0.7 here"):
        check_same_settings(7, stored, {**same, "temperature": 0.7}, role)
    with pytest.raises(FleetError, match="seed None there, 5 here"):
        check_same_settings(7, stored, {**same, "seed": 5}, role)
    with pytest.raises(FleetError, match="another benchmark.yml"):
        check_same_benchmark(7, 1, 2, role)
    with pytest.raises(FleetError, match=r"layouts \['seed'\] there, \['seed', 'deployed'\] here"):
        check_same_settings(
            7, {**stored, "layouts": ["seed"]}, {**same, "layouts": ("seed", "deployed")}, role
        )


def test_a_keyed_run_is_joined_only_with_its_selection_and_content():
    """check_same_selection (#30.6-7): the cases chosen before the shard, then what they are made of;
    a side that has not selected yet (a resume planned before collection, an older run) passes."""
    from pytest_helmbench.execution.selection import SelectedCase, run_fingerprints
    from pytest_helmbench.storage.fleet import FleetError, check_same_selection
    from pytest_helmbench.suite.shards import FleetRole

    role = FleetRole(KEY, 2, 3)

    def chosen(*cases: tuple[str, str]) -> dict:
        picked = [SelectedCase("m", code, "seed", 0, ("s", "c", "", text)) for code, text in cases]
        return {"selection": run_fingerprints(picked)["m"]}

    run = chosen(("P1-B1-S1-C1-PT1", "a"), ("P1-B1-S1-C1-PT2", "b"))
    reordered = chosen(("P1-B1-S1-C1-PT2", "b"), ("P1-B1-S1-C1-PT1", "a"))
    check_same_selection(7, run, reordered, role)
    check_same_selection(7, run, {}, role)
    check_same_selection(7, {}, run, role)
    with pytest.raises(FleetError, match=r"another selection of cases \(2 item\(s\) there, 1 here"):
        check_same_selection(7, run, chosen(("P1-B1-S1-C1-PT1", "a")), role)
    with pytest.raises(FleetError, match="other benchmark content"):
        check_same_selection(7, run, chosen(("P1-B1-S1-C1-PT1", "a"), ("P1-B1-S1-C1-PT2", "edited")), role)


def test_the_key_s_stops_are_waited_for_once_then_read_without_waiting(tmp_path):
    """FleetStopList, asked before every call: until its first read every caller waits for it (not read
    yet is not "not stopped"); after it, a caller never queues behind another thread's read."""
    from pytest_helmbench.storage.engine import make_engine, upgrade
    from pytest_helmbench.storage.fleet import FleetStopList

    url = f"sqlite:///{tmp_path / 'results.db'}"
    upgrade(url)
    here, there = (FleetStopList(lambda: make_engine(url), KEY, refresh=0.0) for _ in range(2))
    try:
        there.stop(BAD, "bad key (401)")
        answers: list[str | None] = []
        here._lock.acquire()  # another thread's first read in progress
        waiting = threading.Thread(target=lambda: answers.append(here.reason(BAD)))
        waiting.start()
        waiting.join(0.3)
        assert waiting.is_alive() and answers == []  # waits: it must not answer "not stopped"
        here._lock.release()
        waiting.join(10)
        assert answers == ["bad key (401)"]
        there.stop(GOOD, "credit exhausted (402)")
        answers.clear()
        with here._lock:  # a read in progress: answered at once, from the last read
            quick = threading.Thread(target=lambda: answers.extend([here.reason(BAD), here.reason(GOOD)]))
            quick.start()
            quick.join(5)
            assert answers == ["bad key (401)", None]
        quick.join(10)
        assert here.reason(GOOD) == "credit exhausted (402)"  # the next read finds it
        assert here.stopped(fresh=True) == {BAD: "bad key (401)", GOOD: "credit exhausted (402)"}
    finally:
        here.close()
        there.close()
