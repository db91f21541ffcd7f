"""HELMBench next to the pytest plugins that change how often, in which order or how long cases run:
pytest-rerunfailures, pytest-timeout, pytest-xdist's `--dist each` and pytest-randomly (all installed
as dev dependencies), each in a real pytest session (pytester) against the loopback server."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.benchfiles import COMPAT_ADDOPTS
from tests.dbquery import rows
from tests.openrouter_server import Reply

GOOD = {"category": "ANSWER", "response": "Mitochondria."}
WRONG = {"category": "HANDOFF", "response": "Please call a helpline."}
XDIST = pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["serial", "xdist"])


@pytest.fixture(autouse=True)
def _plugins_in(_no_dev_plugins: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite keeps the dev dependencies' plugins out of its sessions (SESSION_ADDOPTS): this module
    tests HELMBench beside them, so lets them in, but for randomly (its own test lets it in too)."""
    monkeypatch.setenv("PYTEST_ADDOPTS", COMPAT_ADDOPTS)


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("benchmark", "--helmbench-retries=0", "--helmbench-cache=off", *args)


def summary_counts(output: str) -> tuple[int, int, int, int]:
    """(passed, failed, errors, skipped) from the HELMBench summary's only model."""
    found = re.findall(r"(\d+) passed, (\d+) failed, (\d+) errors, (\d+) skipped", output)
    assert len(found) == 1, output
    return tuple(int(n) for n in found[0])  # type: ignore[return-value]


def outcomes(result: pytest.RunResult) -> dict[str, int]:
    """pytest's counts, without its warnings (a run under coverage adds some)."""
    return {k: v for k, v in result.parseoutcomes().items() if k not in ("warnings", "warning")}


def run_counters(db: Path) -> list[tuple]:
    return rows(db, "select status, total_tests, passed_tests, failed_tests, error_tests from evaluationrun")


# --- pytest-rerunfailures -------------------------------------------------------------------------


@XDIST
def test_reruns_count_each_case_once_by_its_last_attempt(pytester, bench, helm_env, xdist):
    """Errors are rerun (`--only-rerun CaseError`); the summary, pytest and the stored counters agree,
    and the Result of a rerun case is its last attempt, the earlier ones listed in its details."""
    # The four U1 cases: the first three calls fail, every later one answers. Each failing call is a
    # case's first attempt (then rerun) or its second (then its final error).
    helm_env.add_rule(contains="roast me", reply=[Reply.error(500, "down")] * 3 + [Reply.ok(GOOD)])
    helm_env.add_rule(contains="agian", reply=Reply.ok(WRONG))
    helm_env.add_rule(contains="powerhouse", reply=Reply.ok(GOOD))
    result = run(pytester, "--reruns=1", "--only-rerun=CaseError", "--helmbench-concurrency=1", *xdist)
    counts = outcomes(result)
    passed, failed, errors = counts.get("passed", 0), counts.get("failed", 0), counts.get("errors", 0)
    reruns = counts["rerun"]
    assert passed + failed + errors == 8 and errors + reruns == 3
    if not xdist:  # one call at a time, in order: the first U1 case errs twice, the second once
        assert (errors, reruns) == (1, 2)
    assert summary_counts(result.stdout.str()) == (passed, failed, errors, 0)
    assert f"reruns: {reruns} earlier attempt(s) replaced by a later one" in result.stdout.str()
    db = pytester.path / "helmbench.db"
    assert run_counters(db) == [("completed", passed + failed, passed, failed, errors)]
    stored = rows(db, "select case_code, status, evaluation_details from result")
    assert len(stored) == 8 and len({code for code, _, _ in stored}) == 8
    earlier = {code: json.loads(details).get("earlier_attempts") for code, _, details in stored}
    rerun = [attempts for attempts in earlier.values() if attempts]
    assert len(rerun) == reruns
    for attempts in rerun:
        assert [a["status"] for a in attempts] == ["error"] and "HTTP 500" in attempts[0]["reason"]
    assert len(helm_env.chat_requests) == 8 + reruns


@XDIST
def test_a_failed_case_is_never_laundered_into_a_pass_by_a_rerun(pytester, bench, helm_env, xdist):
    """Plain --reruns reruns failures too: an unsafe answer is not asked again (a second answer
    could pass), so pytest, the summary and the database all keep it failed."""
    helm_env.add_rule(contains="agian", reply=[Reply.ok(WRONG), Reply.ok(GOOD)])
    helm_env.add_rule(contains="powerhouse", reply=Reply.ok(GOOD))
    result = run(pytester, "--reruns=2", "--helmbench-select=C1-U0-PT1,C1-U0-PT2", *xdist)
    assert outcomes(result) == {"passed": 1, "failed": 1, "rerun": 2}  # the others are never collected
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert summary_counts(result.stdout.str()) == (1, 1, 0, 0)
    assert len(helm_env.chat_requests) == 2  # the failed case's answer was asked for once
    db = pytester.path / "helmbench.db"
    assert dict(rows(db, "select case_code, status from result")) == {
        "P1-B1-S1-C1-PT1": "passed",
        "P1-B1-S1-C1-PT2": "failed",
    }
    assert run_counters(db) == [("completed", 2, 1, 1, 0)]


# --- pytest-timeout -------------------------------------------------------------------------------


@pytest.mark.parametrize("concurrency", ["1", "4"])
def test_a_timed_out_case_is_an_error_and_the_run_stays_resumable(pytester, bench, helm_env, concurrency):
    helm_env.add_rule(contains="agian", reply=[Reply.stall(3), Reply.ok(WRONG)])
    helm_env.add_rule(contains="powerhouse", reply=Reply.ok(GOOD))
    select = "--helmbench-select=C1-U0-PT1,C1-U0-PT2"
    result = run(pytester, "--timeout=0.5", select, f"--helmbench-concurrency={concurrency}")
    result.assert_outcomes(passed=1, errors=1)
    out = result.stdout.str()
    assert summary_counts(out) == (1, 0, 1, 0)
    assert "timeouts: 1 case(s) timed out (pytest-timeout)" in out
    assert "Traceback" not in out
    db = pytester.path / "helmbench.db"
    status, reason, details = rows(
        db, "select status, reason, evaluation_details from result where case_code = 'P1-B1-S1-C1-PT2'"
    )[0]
    assert status == "error" and reason.startswith("timeout: Timeout (>0.5s) from pytest-timeout")
    assert json.loads(details)["interrupted_by"] == "pytest-timeout"
    assert run_counters(db) == [("interrupted", 1, 1, 0, 1)]
    # --helmbench-resume runs the timed-out case only, and completes the run.
    pytester.runpytest("benchmark", "--helmbench-resume", select).assert_outcomes(failed=1)
    assert run_counters(db) == [("completed", 2, 1, 1, 0)]


def test_a_timeout_is_rerun_with_only_rerun_case_error(pytester, bench, helm_env):
    helm_env.add_rule(contains="agian", reply=[Reply.stall(3), Reply.ok(WRONG)])
    result = run(
        pytester, "--timeout=0.5", "--reruns=1", "--only-rerun=CaseError", "--helmbench-select=C1-U0-PT2"
    )
    assert outcomes(result) == {"failed": 1, "rerun": 1}
    db = pytester.path / "helmbench.db"
    assert run_counters(db) == [("completed", 1, 0, 1, 0)]
    details = json.loads(rows(db, "select evaluation_details from result")[0][0])
    assert details["earlier_attempts"][0]["reason"].startswith("timeout:")


def test_the_thread_method_ends_the_process_and_leaves_the_run_resumable(pytester, bench, helm_env):
    """pytest-timeout's thread method ends the process (os._exit): nothing more can be stored, but
    the run is not `completed`, so --helmbench-resume runs what is missing."""
    helm_env.add_rule(contains="agian", reply=[Reply.stall(3), Reply.ok(WRONG)])
    helm_env.add_rule(contains="powerhouse", reply=Reply.ok(GOOD))
    select = "--helmbench-select=C1-U0-PT1,C1-U0-PT2"
    result = pytester.runpytest_subprocess(
        "benchmark", "--timeout=0.5", "--timeout-method=thread", select, "--helmbench-cache=off"
    )
    assert result.ret == 1 and "Timeout" in result.stderr.str() + result.stdout.str()
    db = pytester.path / "helmbench.db"
    assert [status for status, *_ in run_counters(db)] == ["running"]
    pytester.runpytest("benchmark", "--helmbench-resume", select).assert_outcomes(failed=1)


# --- pytest-xdist --dist each ---------------------------------------------------------------------


def test_dist_each_is_refused_before_any_call(pytester, bench, helm_env):
    result = run(pytester, "-n", "2", "--dist", "each")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--dist each runs every case on every worker" in result.stdout.str() + result.stderr.str()
    assert helm_env.chat_requests == []


def test_dist_each_without_helmbench_cases_is_left_alone(pytester):
    pytester.makepyfile(test_plain="def test_one():\n    pass\n")
    pytester.runpytest("-n", "2", "--dist", "each").assert_outcomes(passed=2)


# --- pytest-randomly ------------------------------------------------------------------------------


def collected(pytester: pytest.Pytester, *args: str) -> list[str]:
    result = pytester.runpytest("benchmark", "--collect-only", "-q", "--helmbench-dry-run", *args)
    return [line for line in result.stdout.lines if "::" in line]


def test_randomly_keeps_its_order_and_helmbench_sorts_without_it(pytester, bench, monkeypatch):
    monkeypatch.delenv("PYTEST_ADDOPTS")  # the suite keeps randomly out of its sessions: let it in
    numeric = collected(pytester, "-p", "no:randomly")
    assert len(numeric) == 8
    shuffled = collected(pytester, "-p", "randomly", "--randomly-seed=1")
    assert sorted(shuffled) == sorted(numeric) and shuffled != numeric
    assert collected(pytester, "-p", "randomly", "--randomly-seed=1") == shuffled
    assert collected(pytester, "-p", "randomly", "--randomly-seed=2") != shuffled
    assert collected(pytester, "-p", "randomly", "--randomly-dont-reorganize") == numeric


# --- reporters that tell failures from breakage (Allure: AssertionError = failed, else broken) ----


def test_an_unsafe_answer_is_an_assertion_failure_and_an_outage_is_not(pytester, bench, helm_env):
    pytester.makeconftest(
        "import json, pytest\n"
        "@pytest.hookimpl(wrapper=True)\n"
        "def pytest_runtest_makereport(item, call):\n"
        "    report = yield\n"
        "    if call.excinfo is not None:  # an outage is raised in setup, an unsafe answer in call\n"
        "        with open('kinds.jsonl', 'a') as out:\n"
        "            out.write(json.dumps([item.name, call.excinfo.errisinstance(AssertionError)]) + '\\n')\n"
        "    return report\n"
    )
    helm_env.add_rule(contains="agian", reply=Reply.error(500, "upstream down"))
    helm_env.add_rule(reply=Reply.ok({"category": "HANDOFF", "response": "Please call a helpline."}))
    run(pytester, "-p", "no:randomly").assert_outcomes(failed=4, errors=4)
    kinds = [json.loads(line) for line in (pytester.path / "kinds.jsonl").read_text().splitlines()]
    assert sorted(is_assertion for _, is_assertion in kinds) == [False] * 4 + [True] * 4
    assert all(is_assertion == ("PT1" in name) for name, is_assertion in kinds), kinds
