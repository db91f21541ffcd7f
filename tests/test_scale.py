"""Issue 5, proven end to end against the loopback OpenRouter server (no mocks): concurrency,
adaptive rate control, fault tolerance, SIGKILL + resume, the response cache and cost control."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from benchfiles import CRITERIA, MODELS, STRICT_SCHEMA, terminal_sigint, write, write_benchmark
from openrouter_server import FakeOpenRouter, Reply

from pytest_helmbench.providers.ratelimit import AdaptiveLimiter, chained
from tests.dbquery import rows
from tests.test_faults import pytest_here

GOOD = {"category": "ANSWER", "response": "Mitochondria."}
WRONG = {"category": "HANDOFF", "response": "Please call a helpline."}
MODEL = "openai/gpt-4o-mini"

CATEGORY_SCENARIO = """---
category: ANSWER
evaluation:
  type: category_match
  field: category
---

## Your job

You are an AI science tutor for scenario {s}. Categorise the user's request at the end.
"""

SQE_SCENARIO = """---
evaluation:
  type: sqe
---

## Your job

Be safe in scenario {s}.
"""


def components(prefix: str, count: int, heading: str, text: str, extra: str = "") -> str:
    return "\n".join(
        f"# {prefix}{i}: {prefix.lower()}{i}\n---\nseverity: 0\n{extra}---\n\n"
        f"## {heading}\n\n{text.format(i=i)}\n"
        for i in range(1, count + 1)
    )


def write_grid(
    root: Path,
    *,
    scenarios: int,
    conditions: int = 2,
    contexts: int = 1,
    perturbations: int = 2,
    sqe: bool = False,
) -> int:
    """A generated benchmark of scenarios x conditions x (1 + contexts) x perturbations cases.

    Every composed prompt is unique, and the server's default answer (the schema's first enum
    value; the rubric's first option) passes, so only injected faults can make a case not pass.
    """
    write(root / "models.yml", MODELS)
    write(
        root / "conditions.md",
        components("C", conditions, "System instructions", "Condition {i} instructions."),
    )
    write(root / "user-contexts.md", components("U", contexts, "User preferences", "I am user {i}."))
    write(
        root / "benchmark.yml",
        "version: '0.1'\ndescription: generated\npillars:\n  P1: {name: P, description: d}\n"
        "behaviours:\n  P1-B1: {title: t, description: d, compliance: c}\n",
    )
    for s in range(1, scenarios + 1):
        folder = root / "scenarios" / f"P1-B1-S{s}"
        write(folder / f"S{s}.md", (SQE_SCENARIO if sqe else CATEGORY_SCENARIO).format(s=s))
        write(folder / f"S{s}.json", json.dumps(STRICT_SCHEMA))
        write(
            folder / "perturbations.md",
            components(
                "PT", perturbations, "User input", f"Scenario {s}, question {{i}}?", "style: explicit\n"
            ),
        )
        if sqe:
            write(folder / "criteria.md", CRITERIA)
    return scenarios * conditions * (1 + contexts) * perturbations


@pytest.fixture
def project(pytester: pytest.Pytester) -> Path:
    pytester.makeini("[pytest]\n")
    return pytester.path


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("benchmark", "-p", "no:randomly", *args)


def statuses_by_code(result: pytest.RunResult) -> dict[str, str]:
    """What pytest itself reported for each case: passed, failed, error (setup) or skipped."""
    found: dict[str, str] = {}
    for report in result.reprec.getreports("pytest_runtest_logreport"):  # type: ignore[attr-defined]
        code = report.nodeid.split("::")[-1]
        if report.when == "setup" and report.failed:
            found[code] = "error"
        elif report.when == "setup" and report.skipped:
            found[code] = "skipped"
        elif report.when == "call":
            found[code] = report.outcome
    return found


def db_statuses(db: Path | str) -> dict[str, str]:
    return dict(rows(db, "select case_code, status from result"))


def check_counters(db: Path | str) -> None:
    """Every run's counters agree with its Result rows."""
    for run_id, total, passed, failed, errors, skipped in rows(
        db,
        "select id, total_tests, passed_tests, failed_tests, error_tests, skipped_tests from evaluationrun",
    ):
        counts = dict(rows(db, "select status, count(*) from result where run_id=? group by status", run_id))
        assert (passed, failed, errors, skipped) == tuple(
            counts.get(s, 0) for s in ("passed", "failed", "error", "skipped")
        )
        assert total == passed + failed


def summary_line(result: pytest.RunResult, start: str) -> str:
    return next(line for line in result.stdout.lines if line.startswith(start))


# --- speed -----------------------------------------------------------------------------------------


def test_calls_run_concurrently_and_every_item_reports_its_own_outcome(project, pytester, helm_env):
    """The server sees many calls at once (how fast that makes a run is bench/throughput.py's job)."""
    cases = write_grid(project / "benchmark", scenarios=2, conditions=2, contexts=1, perturbations=5)
    assert cases == 40
    helm_env.latency = 0.2
    helm_env.add_rule(contains="question 2?", reply=Reply.ok(WRONG))
    helm_env.add_rule(contains="question 3?", reply=Reply.error(500, "down"))
    result = run(pytester, "--helmbench-concurrency=20", "--helmbench-retries=0")
    assert 5 <= helm_env.max_in_flight <= 20  # concurrent, and never above the limit
    result.assert_outcomes(passed=24, failed=8, errors=8)
    reported = statuses_by_code(result)
    expected = {
        code: "failed" if code.endswith("PT2") else "error" if code.endswith("PT3") else "passed"
        for code in reported
    }
    assert len(reported) == cases and reported == expected
    assert db_statuses(project / "helmbench.db") == expected
    assert len(helm_env.chat_requests) == cases


@pytest.mark.parametrize("stop, maxfail", [("-x", 1), ("--maxfail=3", 3)])
def test_maxfail_stops_issuing_new_calls(project, pytester, helm_env, stop, maxfail):
    cases = write_grid(project / "benchmark", scenarios=2, conditions=2, contexts=1, perturbations=10)
    concurrency = 4
    helm_env.latency = 0.05
    helm_env.add_rule(reply=Reply.ok(WRONG))
    result = run(pytester, stop, f"--helmbench-concurrency={concurrency}")
    result.assert_outcomes(failed=maxfail)
    sent = len(helm_env.chat_requests)
    assert maxfail <= sent <= maxfail + concurrency < cases
    db = project / "helmbench.db"
    assert rows(db, "select status, failed_tests from evaluationrun") == [("interrupted", maxfail)]


def _session(project: Path, output: Path, *options: str) -> subprocess.Popen[bytes]:
    """`pytest benchmark` in a process of its own, its output in `output` (with faulthandler: SIGABRT
    prints every thread's stack)."""
    with output.open("wb") as log:
        return subprocess.Popen(
            [
                sys.executable,
                "-X",
                "faulthandler",
                "-m",
                "pytest",
                "benchmark",
                "-q",
                "-p",
                "no:cacheprovider",
                *options,
            ],
            cwd=project,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=terminal_sigint,  # the tests that use it press Ctrl-C
        )


def _ended(child: subprocess.Popen[bytes], output: Path, seconds: float, why: str) -> int:
    """The exit status of `child`, which must end within `seconds`; else the test fails with `why`,
    its output and every thread's stack."""
    try:
        status = child.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        child.send_signal(signal.SIGABRT)
        child.wait(timeout=30)
        pytest.fail(f"{why}:\n" + output.read_text(errors="replace")[-6000:])
    return status


def test_ctrl_c_stops_issuing_new_calls(project, helm_env):
    cases = write_grid(project / "benchmark", scenarios=2, conditions=2, contexts=4, perturbations=5)
    concurrency = 4
    helm_env.latency = 0.1
    db = project / "helmbench.db"
    output = project / "child.log"
    child = _session(project, output, f"--helmbench-concurrency={concurrency}")
    deadline = time.monotonic() + 60
    while len(_results(db)) < 10 and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.05)
    child.send_signal(signal.SIGINT)
    # a busy machine is slow, not stuck
    status = _ended(child, output, 60, "the process did not end after Ctrl-C")
    assert status == pytest.ExitCode.INTERRUPTED, output.read_text(errors="replace")[-3000:]
    sent, recorded = len(helm_env.chat_requests), len(_results(db))
    time.sleep(0.3)
    assert len(helm_env.chat_requests) == sent, "calls were still being made after the process ended"
    # Paid beyond what was recorded: the calls in flight, those answered but not yet reported,
    # and the interrupted item.
    assert 10 <= recorded <= sent <= recorded + 2 * concurrency + 1 < cases
    assert rows(db, "select status from evaluationrun") == [("interrupted",)]


def test_ctrl_c_sends_no_retry_of_calls_in_flight(project, helm_env):
    """Calls waiting out a Retry-After when Ctrl-C arrives give up at once: no request after the stop."""
    write_grid(project / "benchmark", scenarios=1, conditions=2, contexts=1, perturbations=5)
    concurrency = 4
    helm_env.add_rule(reply=Reply.error(503, "no provider", retry_after=60))
    output = project / "child.log"
    child = _session(project, output, f"--helmbench-concurrency={concurrency}", "--helmbench-retries=5")
    deadline = time.monotonic() + 60
    while not helm_env.chat_requests and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.02)
    time.sleep(0.3)  # the model's first call (it goes alone) is now waiting out its 60 s Retry-After
    sent = len(helm_env.chat_requests)
    child.send_signal(signal.SIGINT)
    # Ending within 30 s proves it did not wait out the 60 s (no wall-clock margin to be flaky on).
    assert _ended(child, output, 30, "it waited for the retries in flight") == pytest.ExitCode.INTERRUPTED
    time.sleep(0.2)
    assert sent >= 1 and len(helm_env.chat_requests) == sent, "a retry was sent after the stop"


def test_concurrency_and_xdist_together_is_a_clear_usage_error(project, pytester, helm_env):
    write_grid(project / "benchmark", scenarios=1)
    result = run(pytester, "-n", "2", "--helmbench-concurrency", "4")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--helmbench-concurrency and -n are alternatives" in result.stdout.str() + result.stderr.str()
    assert helm_env.chat_requests == []


# --- adaptive rate control -------------------------------------------------------------------------


def test_limiter_halves_once_per_cooldown_never_below_the_floor_and_climbs_back():
    limiter = AdaptiveLimiter(16, floor=4, cooldown=0.05)
    limiter.on_rate_limited()
    assert limiter.limit == 8
    limiter.on_rate_limited()  # a burst of 429s from calls already in flight counts once
    assert limiter.limit == 8
    for expected in (4, 4):
        time.sleep(0.06)
        limiter.on_rate_limited()
        assert limiter.limit == expected
    assert limiter.lowest == 4
    climbed = [limiter.limit]
    for _ in range(200):
        limiter.on_success()
        climbed.append(limiter.limit)
    assert climbed == sorted(climbed) and climbed[-1] == 16 and max(climbed) <= 16
    assert 4 < climbed[1] < 5  # additive: about one more call in flight per `limit` successes


def test_limiter_never_lets_more_than_limit_attempts_in_flight():
    limiter = AdaptiveLimiter(8, floor=2, cooldown=0.0)
    limiter.on_rate_limited()
    limiter.on_rate_limited()
    assert limiter.limit == 2
    active, peak, lock = [0], [0], threading.Lock()

    def attempt() -> None:
        with limiter.slot():
            with lock:
                active[0] += 1
                peak[0] = max(peak[0], active[0])
            time.sleep(0.02)
            with lock:
                active[0] -= 1

    threads = [threading.Thread(target=attempt) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert peak[0] == 2


def test_429s_with_retry_after_lower_concurrency_and_every_case_still_passes(project, pytester, helm_env):
    cases = write_grid(project / "benchmark", scenarios=2, conditions=2, contexts=1, perturbations=10)
    helm_env.latency = 0.01
    helm_env.fault_rates(rate_429=0.3, seed=5, retry_after=0.05)
    log = project / "run.log"
    result = run(
        pytester,
        "--helmbench-concurrency=16",
        "--helmbench-retries=12",
        "--helmbench-backoff=5",
        f"--log-file={log}",
        "--log-file-level=INFO",
    )
    result.assert_outcomes(passed=cases)
    by_status = helm_env.stats()["by_status"]
    assert by_status["200"] == cases and by_status["429"] >= 10
    text = log.read_text()
    assert "rate limited: concurrency 16 -> 8" in text
    delays = [float(d) for d in re.findall(r"HTTP 429.*; retry \d+/12 in (\d+\.\d)s", text)]
    assert len(delays) == by_status["429"]
    assert max(delays) < 1.0  # Retry-After (0.05 s plus jitter), not the 5 s exponential backoff


# --- resilience ------------------------------------------------------------------------------------


def test_a_thousand_cases_survive_every_fault(project, pytester, helm_env):
    cases = write_grid(project / "benchmark", scenarios=10, conditions=2, contexts=4, perturbations=10)
    assert cases == 1000
    helm_env.fault_rates(
        rate_429=0.2,
        rate_5xx=0.1,
        rate_drop=0.05,
        rate_stall=0.02,
        stall_seconds=1.5,
        seed=11,
        retry_after=0.02,
    )
    result = pytester.runpytest_subprocess(
        "benchmark",
        "-q",
        "--helmbench-concurrency=50",
        "--helmbench-timeout=0.5",
        "--helmbench-backoff=0.02",
        "--helmbench-retries=12",
        timeout=120,
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0, "a fault was scored as a model failure"
    assert outcomes.get("passed", 0) + outcomes.get("errors", 0) == cases
    by_status = helm_env.stats()["by_status"]
    assert {"429", "drop", "stall"} <= set(by_status) and any(s.startswith("5") for s in by_status)
    db = project / "helmbench.db"
    assert rows(db, "select count(*), count(distinct case_code) from result") == [(cases, cases)]
    assert rows(db, "select count(*) from result where status not in ('passed', 'error')") == [(0,)]
    check_counters(db)
    assert rows(db, "select status, passed_tests + error_tests from evaluationrun") == [("completed", cases)]


# --- SIGKILL and resume ----------------------------------------------------------------------------


def _results(db: Path) -> dict[str, tuple[str, str]]:
    try:
        return {
            code: (status, prompt)
            for code, status, prompt in rows(db, "select case_code, status, prompt from result")
        }
    except sqlite3.OperationalError:  # not created yet
        return {}


def _requests_for(server: FakeOpenRouter, prompt: str) -> int:
    return sum(1 for r in server.chat_requests if r.last_user_content == prompt)


def test_sigkill_then_resume_completes_the_same_run_without_paying_twice(project, helm_env):
    cases = write_grid(project / "benchmark", scenarios=4, conditions=2, contexts=4, perturbations=5)
    assert cases == 200
    helm_env.latency = 0.1
    db = project / "helmbench.db"
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "benchmark",
            "-v",
            "-p",
            "no:cacheprovider",
            "--helmbench-concurrency=4",
        ],
        cwd=project,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(child.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    deadline = time.monotonic() + 60
    while len(_results(db)) < 40 and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=10)
    reader.join(timeout=5)
    finished = _results(db)
    assert 40 <= len(finished) < cases, "the run was not killed mid-way"
    reported = {
        m.group(1): m.group(2).lower()
        for m in (re.search(r"::(\S+) (PASSED|FAILED|ERROR)", line) for line in lines)
        if m
    }
    assert reported and all(finished[code][0] == status for code, status in reported.items()), (
        "a reported case is not in the database"
    )
    assert rows(db, "select status from evaluationrun") == [("running",)]
    run_id = rows(db, "select id from evaluationrun")[0][0]

    # Change one finished case's perturbation (PT1 of S1 feeds every S1-*-PT1 case).
    perturbations = project / "benchmark/scenarios/P1-B1-S1/perturbations.md"
    perturbations.write_text(
        perturbations.read_text().replace("Scenario 1, question 1?", "Scenario 1, question 1, edited?")
    )
    changed = {code for code in finished if code.startswith("P1-B1-S1-") and code.endswith("-PT1")}
    assert changed
    paid_before = len(helm_env.chat_requests)

    resumed = pytest_here(project, "benchmark", "-q", "--helmbench-resume", "--helmbench-cache=off")
    assert resumed.returncode == 0, resumed.stdout[-2000:]
    assert (
        f"resume: {len(finished) - len(changed)} case(s) already finished were not run again; "
        f"{len(changed)} changed since (prompt or options) and were run afresh; {cases - len(finished)} run"
    ) in resumed.stdout
    assert rows(db, "select id, status from evaluationrun") == [(run_id, "completed")]
    assert rows(db, "select count(*), count(distinct case_code) from result") == [(cases, cases)]
    check_counters(db)
    for code, (_, prompt) in finished.items():
        assert _requests_for(helm_env, prompt) == 1, f"{code} finished before the kill and was paid for again"
    final = _results(db)
    for code in changed:
        assert "question 1, edited?" in final[code][1] and _requests_for(helm_env, final[code][1]) == 1
    assert len(helm_env.chat_requests) - paid_before == cases - len(finished) + len(changed)


def test_resume_a_given_run_id_and_retry_errors(project, pytester, helm_env, db_url, monkeypatch):
    write_benchmark(project / "benchmark")  # 8 cases: C1, C2 x (no context, U1) x PT1, PT2
    monkeypatch.setenv("HELMBENCH_DB", db_url)  # SQLite and PostgreSQL
    db = db_url
    helm_env.add_rule(contains="agian", reply=Reply.ok(WRONG))
    run(pytester, "-x", "--helmbench-concurrency=1").assert_outcomes(passed=1, failed=1)
    run(pytester, "-x", "--helmbench-concurrency=1").assert_outcomes(
        passed=1, failed=1
    )  # from the cache: nothing paid
    assert rows(db, "select id, status from evaluationrun order by id") == [
        (1, "interrupted"),
        (2, "interrupted"),
    ]
    assert len(helm_env.chat_requests) == 2

    result = run(pytester, "--helmbench-resume=1")
    result.assert_outcomes(passed=3, failed=3)
    assert rows(db, "select id, status from evaluationrun order by id") == [
        (1, "completed"),
        (2, "interrupted"),
    ]
    assert rows(db, "select run_id, count(*) from result group by run_id order by run_id") == [(1, 8), (2, 2)]
    run(pytester, "--helmbench-resume").assert_outcomes(passed=3, failed=3)  # the latest incomplete run: 2
    assert rows(db, "select id, status from evaluationrun order by id") == [
        (1, "completed"),
        (2, "completed"),
    ]
    assert len(helm_env.chat_requests) == 8  # every case paid once across four sessions
    check_counters(db)

    result = run(pytester, "--helmbench-resume=99")
    assert (
        result.ret == pytest.ExitCode.USAGE_ERROR
        and "there is no run 99" in result.stdout.str() + result.stderr.str()
    )

    # A third run where the provider fails every call with a user context: those cases error.
    helm_env.reset()
    helm_env.add_rule(contains="roast me", reply=Reply.error(500, "upstream down"))
    helm_env.add_rule(contains="agian", reply=Reply.ok(WRONG))
    run(pytester, "--helmbench-retries=0", "--helmbench-cache=off").assert_outcomes(
        passed=2, failed=2, errors=4
    )
    before = dict(rows(db, "select case_code, status from result where run_id=3"))
    errored = {code for code, status in before.items() if status == "error"}
    assert len(errored) == 4 and all("-U1-" in code for code in errored)
    helm_env.reset()
    helm_env.add_rule(contains="agian", reply=Reply.ok(WRONG))
    result = run(pytester, "--helmbench-retry-errors", "--helmbench-cache=off")
    result.assert_outcomes(passed=2, failed=2)
    assert len(helm_env.chat_requests) == 4 and all(
        "roast me" in r.last_user_content for r in helm_env.chat_requests
    )
    assert rows(db, "select count(*) from evaluationrun") == [(3,)]
    after = dict(rows(db, "select case_code, status from result where run_id=3"))
    assert after == {
        code: ("failed" if code.endswith("PT2") else "passed") if code in errored else status
        for code, status in before.items()
    }
    assert rows(
        db, "select status, passed_tests, failed_tests, error_tests from evaluationrun where id=3"
    ) == [("completed", 4, 4, 0)]
    check_counters(db)


# --- cache -----------------------------------------------------------------------------------------


def test_rerun_costs_nothing_and_an_edit_invalidates_exactly_what_it_feeds(
    project, pytester, helm_env, db_url, monkeypatch
):
    write_benchmark(project / "benchmark")
    monkeypatch.setenv("HELMBENCH_DB", db_url)  # SQLite and PostgreSQL
    db = db_url
    helm_env.add_rule(reply=Reply.ok(GOOD, cost=0.01))
    run(pytester).assert_outcomes(passed=8)
    assert len(helm_env.chat_requests) == 8
    result = run(pytester)
    result.assert_outcomes(passed=8)
    assert len(helm_env.chat_requests) == 8, "an unchanged case was paid for again"
    assert "8 from cache" in result.stdout.str()
    assert rows(
        db, "select count(*), sum(cast(cached as integer)), sum(cost_usd) from result where run_id=2"
    ) == [(8, 8, 0.0)]
    [(details,)] = rows(db, "select evaluation_details from result where run_id=2 limit 1")
    details = details if isinstance(details, dict) else json.loads(details)  # jsonb arrives parsed
    assert details["cached"]["original_cost_usd"] == 0.01
    assert rows(db, "select cost_usd from evaluationrun where id=2") == [(0.0,)]

    conditions = project / "benchmark/conditions.md"
    conditions.write_text(
        conditions.read_text().replace(
            "You answer in one short sentence.", "You answer in two short sentences."
        )
    )
    helm_env.reset()
    helm_env.add_rule(reply=Reply.ok(GOOD, cost=0.01))
    run(pytester).assert_outcomes(passed=8)
    assert len(helm_env.chat_requests) == 4 and all(
        "two short sentences" in r.last_user_content for r in helm_env.chat_requests
    )
    assert rows(db, "select case_code from result where run_id=3 and not cached order by case_code") == [
        ("P1-B1-S1-C2-PT1",),
        ("P1-B1-S1-C2-PT2",),
        ("P1-B1-S1-C2-U1-PT1",),
        ("P1-B1-S1-C2-U1-PT2",),
    ]


def test_cache_modes(project, pytester, helm_env):
    write_benchmark(project / "benchmark")
    db = project / "helmbench.db"

    def sent_by(*args: str) -> int:
        before = len(helm_env.chat_requests)
        run(pytester, *args).assert_outcomes(passed=8)
        return len(helm_env.chat_requests) - before

    def stored() -> int:
        return rows(db, "select count(*) from cachedresponse")[0][0]

    assert sent_by("--helmbench-cache=read") == 8 and stored() == 0  # read never writes
    assert sent_by("--helmbench-cache=read") == 8
    assert sent_by("--helmbench-cache=write") == 8 and stored() == 8  # write never reads...
    assert sent_by("--helmbench-cache=write") == 8 and stored() == 8  # ...and replaces, never duplicates
    assert sent_by("--helmbench-cache=read") == 0
    assert sent_by() == 0  # on by default at temperature 0
    assert sent_by("--helmbench-cache=off") == 8
    assert rows(db, "select sum(cached) from result where run_id=7") == [(0,)]
    assert sent_by("--helmbench-temperature=0.7") == 8  # sampling: off by default
    assert sent_by("--helmbench-temperature=0.7") == 8 and stored() == 8
    assert sent_by("--helmbench-temperature=0.7", "--helmbench-cache=on") == 8 and stored() == 16
    assert sent_by("--helmbench-temperature=0.7", "--helmbench-cache=on") == 0


def test_cache_ttl_expires_old_answers_and_fresh_ones_replace_them(project, pytester, helm_env):
    write_benchmark(project / "benchmark")
    db = project / "helmbench.db"
    run(pytester).assert_outcomes(passed=8)
    with sqlite3.connect(db) as conn:
        conn.execute("update cachedresponse set created_at = datetime('now', '-3 days')")
    run(pytester, "--helmbench-cache-ttl=4d").assert_outcomes(passed=8)
    assert len(helm_env.chat_requests) == 8  # 3 days old, 4 days allowed: replayed
    run(pytester, "--helmbench-cache-ttl=2d").assert_outcomes(passed=8)
    assert len(helm_env.chat_requests) == 16  # expired: paid again
    run(pytester, "--helmbench-cache-ttl=2d").assert_outcomes(passed=8)
    assert len(helm_env.chat_requests) == 16  # the fresh answers replaced the expired ones
    assert rows(db, "select count(*) from cachedresponse") == [(8,)]


def test_the_judge_is_cached_and_a_rubric_edit_reruns_only_the_judge(project, pytester, helm_env):
    cases = write_grid(
        project / "benchmark", scenarios=1, conditions=2, contexts=1, perturbations=2, sqe=True
    )

    def calls() -> tuple[int, int]:
        requests = helm_env.chat_requests
        return sum(r.model == MODEL for r in requests), sum(r.model == "judge/model" for r in requests)

    run(pytester).assert_outcomes(passed=cases)
    assert calls() == (cases, cases)
    run(pytester).assert_outcomes(passed=cases)
    assert calls() == (cases, cases)
    criteria = project / "benchmark/scenarios/P1-B1-S1/criteria.md"
    criteria.write_text(
        criteria.read_text().replace("UNSAFE if the answer is wrong.", "UNSAFE if the answer gives means.")
    )
    run(pytester).assert_outcomes(passed=cases)
    assert calls() == (cases, 2 * cases)
    assert all(
        "gives means" in r.body["messages"][0]["content"] for r in helm_env.chat_requests[-cases:]
    )  # the rubric: system message


# --- cost ------------------------------------------------------------------------------------------


def test_cost_ceiling_skips_the_rest_and_a_resume_runs_them(project, pytester, helm_env):
    cases = write_grid(project / "benchmark", scenarios=2, conditions=2, contexts=1, perturbations=10)
    helm_env.latency = 0.02
    helm_env.add_rule(reply=Reply.ok(GOOD, cost=0.01))
    concurrency, ceiling = 4, 0.095
    result = run(pytester, f"--helmbench-max-cost={ceiling}", f"--helmbench-concurrency={concurrency}", "-rs")
    paid = len(helm_env.chat_requests)
    assert 10 <= paid <= 10 + concurrency
    result.assert_outcomes(passed=paid, skipped=cases - paid)
    assert helm_env.stats()["usage"] <= ceiling + 0.01 * concurrency
    assert "cost ceiling of $0.0950 reached (--helmbench-max-cost)" in result.stdout.str()
    line = summary_line(result, "cost ceiling $0.0950")
    assert f"spent ${paid * 0.01:.4f} this session; {cases - paid} case(s) skipped at the ceiling" in line
    db = project / "helmbench.db"
    assert rows(
        db,
        "select count(*) from result where status='skipped' "
        "and reason like 'cost ceiling of $0.0950 reached%'",
    ) == [(cases - paid,)]
    assert rows(db, "select count(*) from result") == [(cases,)]
    assert rows(db, "select status from evaluationrun") == [("interrupted",)]
    check_counters(db)

    result = run(pytester, "--helmbench-resume")
    result.assert_outcomes(passed=cases - paid)
    assert len(helm_env.chat_requests) == cases
    assert rows(db, "select status, passed_tests, skipped_tests from evaluationrun") == [
        ("completed", cases, 0)
    ]


def test_cost_ceiling_holds_across_xdist_workers(project, pytester, helm_env):
    cases = write_grid(project / "benchmark", scenarios=2, conditions=2, contexts=1, perturbations=10)
    helm_env.latency = 0.02
    helm_env.add_rule(reply=Reply.ok(GOOD, cost=0.01))
    ceiling, workers = 0.095, 2
    result = run(pytester, "-n", str(workers), f"--helmbench-max-cost={ceiling}")
    paid = len(helm_env.chat_requests)
    assert 10 <= paid <= 10 + workers
    assert helm_env.stats()["usage"] <= ceiling + 0.01 * workers
    result.assert_outcomes(passed=paid, skipped=cases - paid)
    db = project / "helmbench.db"
    assert rows(db, "select count(*), sum(status='skipped') from result") == [(cases, cases - paid)]


def test_estimate_prints_tokens_and_usd_per_model_and_sends_nothing(project, pytester, helm_env):
    cases = write_grid(
        project / "benchmark", scenarios=1, conditions=2, contexts=1, perturbations=2, sqe=True
    )
    helm_env.pricing = {MODEL: ("0.000001", "0.000002"), "judge/model": ("0.000003", "0.000004")}
    result = run(pytester, "--helmbench-estimate")
    assert helm_env.chat_requests == []
    assert {r.method for r in helm_env.requests} <= {"GET"}
    out = result.stdout.str()
    model = re.search(
        rf"{re.escape(MODEL)}: {cases} cases \| ~(\d+) prompt \+ ~(\d+) completion tokens \| \$(\d+\.\d+)",
        out,
    )
    judge = re.search(
        rf"judge: {cases} calls \| ~(\d+) prompt \+ ~(\d+) completion tokens \| \$(\d+\.\d+)", out
    )
    assert model and judge, out
    prompt, completion, usd = int(model.group(1)), int(model.group(2)), float(model.group(3))
    assert (
        prompt > 0
        and completion == 250 * cases
        and usd == pytest.approx(prompt * 1e-6 + completion * 2e-6, abs=1e-4)
    )
    jprompt, jcompletion, jusd = int(judge.group(1)), int(judge.group(2)), float(judge.group(3))
    assert jprompt > prompt and jusd == pytest.approx(jprompt * 3e-6 + jcompletion * 4e-6, abs=1e-4)
    assert "estimated total: $" in out
    assert not (project / "helmbench.db").exists() or rows(
        project / "helmbench.db", "select count(*) from result"
    ) == [(0,)]


def estimated_cases(result: pytest.RunResult) -> int:
    found = re.search(rf"{re.escape(MODEL)}: (\d+) cases \|", result.stdout.str())
    assert found, result.stdout.str()
    return int(found.group(1))


def test_the_estimate_prices_what_k_and_lf_select(project, pytester, helm_env):
    """pytest's own selections (-k, --lf) run after HELMBench's: the estimate still sees them."""
    cases = write_grid(project / "benchmark", scenarios=2, conditions=2, contexts=1, perturbations=2)
    helm_env.pricing = {MODEL: ("0.000001", "0.000002")}
    assert estimated_cases(run(pytester, "--helmbench-estimate")) == cases
    assert estimated_cases(run(pytester, "--helmbench-estimate", "-k", "P1-B1-S2")) == cases // 2
    helm_env.add_rule(contains="Scenario 1, question 2?", reply=Reply.ok({**GOOD, "category": "SUPPORT"}))
    helm_env.add_rule(reply=Reply.ok(GOOD))
    run(pytester).assert_outcomes(passed=cases - cases // 4, failed=cases // 4)
    calls = len(helm_env.chat_requests)
    result = run(pytester, "--helmbench-estimate", "--lf")
    assert estimated_cases(result) == cases // 4  # the failed ones only
    assert len(helm_env.chat_requests) == calls  # an estimate sends nothing


def test_the_sample_draws_from_what_k_kept(project, pytester, helm_env):
    write_grid(project / "benchmark", scenarios=2, conditions=2, contexts=1, perturbations=2)
    result = run(pytester, "--collect-only", "-q", "-k", "P1-B1-S2", "--helmbench-sample=3")
    codes = {line.split("::")[1].split("[")[0] for line in result.outlines if "::" in line}
    assert len(codes) == 3 and all(code.startswith("P1-B1-S2-") for code in codes), result.outlines


def test_summary_ends_with_tokens_usd_and_latency_percentiles_per_model(project, pytester, helm_env):
    write_benchmark(project / "benchmark")
    helm_env.pricing = {MODEL: ("0.000001", "0.000002"), "other/model": ("0.000002", "0.000004")}
    helm_env.latency = 0.01
    result = run(pytester, "--helmbench-model=openai/gpt-4o-mini,other/model")
    result.assert_outcomes(passed=16)
    db = project / "helmbench.db"
    lines = result.stdout.lines
    start = lines.index(next(line for line in lines if "HELMBench summary" in line))
    section = lines[start:]
    for model in (MODEL, "other/model"):
        prompt, completion, cost = rows(
            db,
            "select sum(r.prompt_tokens), sum(r.completion_tokens), sum(r.cost_usd) from result r "
            "join evaluationrun e on e.id = r.run_id join llm l on l.id = e.llm_id where l.model_id=?",
            model,
        )[0]
        block = section[section.index(next(line for line in section if line.startswith(model))) :]
        usage = re.search(
            r"tokens (\d+) prompt \+ (\d+) completion \| cost \$(\d+\.\d+) \(\+ judge \$0\.0000\) \| "
            r"latency p50 (\d+) ms, p95 (\d+) ms, p99 (\d+) ms",
            next(line for line in block[1:] if line.lstrip().startswith("tokens ")),
        )
        assert usage, block[:6]
        assert (int(usage.group(1)), int(usage.group(2))) == (prompt, completion)
        assert float(usage.group(3)) == pytest.approx(cost, abs=1e-4)
        p50, p95, p99 = (int(usage.group(i)) for i in (4, 5, 6))
        assert 10 <= p50 <= p95 <= p99


def test_a_chained_call_takes_the_next_free_place_before_calls_that_waited_longer():
    """A conversation's turns wait for each other: its calls go before other waiting calls, so the chain is
    not queued behind every single-turn case at each step (the first run's simulated conversation)."""
    limiter = AdaptiveLimiter(1, floor=1)
    order: list[str] = []
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with limiter.slot():
            holding.set()
            release.wait(5)

    def call(name: str, first: bool) -> None:
        with chained(first), limiter.slot():
            order.append(name)

    holder = threading.Thread(target=hold)
    holder.start()
    holding.wait(5)
    waiting = [threading.Thread(target=call, args=(f"case {n}", False)) for n in range(3)]
    for thread in waiting:
        thread.start()
    deadline = time.monotonic() + 5
    while len(limiter._cond._waiters) < 3 and time.monotonic() < deadline:  # noqa: SLF001 - all three wait
        time.sleep(0.01)
    turn = threading.Thread(target=call, args=("conversation", True))
    turn.start()
    while len(limiter._cond._waiters) < 4 and time.monotonic() < deadline + 5:  # noqa: SLF001 - it waits too
        time.sleep(0.01)
    release.set()
    for thread in [holder, turn, *waiting]:
        thread.join(5)
    assert order[0] == "conversation" and sorted(order[1:]) == ["case 0", "case 1", "case 2"]
    assert limiter.active == 0 and limiter.chained_waiting == 0
