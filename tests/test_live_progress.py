"""A slow case is never silent (issue #31, points 1 and 6): while pytest waits for a prefetched case,
a line every few seconds says what that case is doing (its turn and step) and how many cases
finished meanwhile, since pytest shows cases only in collection order."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

from pytest_helmbench.execution.activity import Activity
from tests.benchfiles import write_benchmark
from tests.openrouter_server import Reply

GOOD = {"category": "ANSWER", "response": "Mitochondria."}


def test_the_waiting_line_names_the_step_its_age_and_the_cases_finished_meanwhile():
    now = [100.0]
    activity = Activity(clock=lambda: now[0])
    assert "queued behind the calls in flight" in activity.waiting_line("a::X", "X", 10, shown=0)
    activity.doing("a::X", "turn 2: checks and judge calls")
    activity.doing("a::Y", "the model's reply")
    now[0] = 112.4
    activity.done("a::Y")
    line = activity.waiting_line("a::X", "X", 20.2, shown=0)
    assert line == (
        "HELMBench: still waiting 20 s for X: turn 2: checks and judge calls (12 s); "
        "1 other case(s) finished, not yet shown; 1 running"
    )
    assert "0 other case(s) finished, not yet shown" in activity.waiting_line("a::X", "X", 20, shown=1)


def test_a_slow_prefetched_case_reports_what_it_is_doing_while_others_finish(pytester, helm_env, monkeypatch):
    monkeypatch.setattr("pytest_helmbench.plugin.items.SILENCE_SECONDS", 0.3)
    pytester.makeini("[pytest]\n")
    write_benchmark(pytester.path / "benchmark", scenarios=("P1-B1-S1", "P1-B1-S2"))
    slow_second = [Reply.ok(GOOD), Reply.ok(GOOD, seconds=2.0), Reply.ok(GOOD)]
    helm_env.add_rule(model="openai/gpt-4o-mini", contains="powerhouse of the cell called", reply=slow_second)
    helm_env.add_rule(reply=Reply.ok(GOOD))
    result = pytester.runpytest(
        "benchmark", "-p", "no:randomly", "--helmbench-concurrency=4", "--helmbench-cache=off"
    )
    result.assert_outcomes(passed=16)
    waiting = [line for line in result.outlines if "HELMBench: still waiting" in line]
    assert waiting, result.stdout.str()[-3000:]
    # The first call of a model goes alone (the others wait for it); the slow one is a later call.
    assert all("PT1: the model's reply (" in line for line in waiting), waiting
    # Every other case finished behind the slow one (16 cases, 4 at once): the line says how many.
    ahead = [int(line.split("; ")[1].split()[0]) for line in waiting]
    assert ahead[-1] > 0, waiting


def test_the_waiting_line_reaches_a_pipe_while_the_slow_case_still_runs(pytester, helm_env, monkeypatch):
    """On CI or through `| tee`, standard output is a pipe: the line is written past pytest's capture of
    fd 1 (which would keep it for the case's report, never shown) and flushed, so the log shows it while
    the slow reply is still awaited. The slow reply goes out only when the line has been read (or after
    a minute): a line held back until the case ends would come after it."""
    pytester.makeini("[pytest]\n")
    # The run is a subprocess (a real pipe): its conftest shortens the silence, as monkeypatch does above.
    pytester.makeconftest("import pytest_helmbench.plugin.items as items\n\nitems.SILENCE_SECONDS = 0.3\n")
    write_benchmark(pytester.path / "benchmark")
    line_read = threading.Event()
    slow = Reply.ok(GOOD, seconds=60.0, release=line_read)  # the first PT1 call
    helm_env.add_rule(
        model="openai/gpt-4o-mini", contains="powerhouse of the cell called", reply=[slow, Reply.ok(GOOD)]
    )
    helm_env.add_rule(reply=Reply.ok(GOOD))
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)  # a pipe is block-buffered, as on CI
    command = [sys.executable, "-m", "pytest", "benchmark", "-p", "no:randomly", "-p", "no:cacheprovider"]
    command += ["--helmbench-concurrency=4", "--helmbench-cache=off"]
    proc = subprocess.Popen(command, cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    stuck = threading.Timer(300, proc.kill)  # a hung run fails the test rather than hanging it
    stuck.start()
    lines, first_line_at = [], None
    try:
        for raw in proc.stdout:  # type: ignore[union-attr]
            lines.append(raw.decode())
            if "HELMBench: still waiting" in lines[-1] and first_line_at is None:
                first_line_at = time.time()
                line_read.set()
    finally:
        stuck.cancel()
    assert proc.wait() == 0, "".join(lines)[-3000:]
    assert first_line_at is not None, "".join(lines)[-3000:]
    asked = min(
        r.received_at for r in helm_env.chat_requests if "powerhouse of the cell called" in str(r.body)
    )
    assert first_line_at < asked + 60.0  # it came while the slow reply was held back, not after it
