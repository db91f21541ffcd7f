"""A slow case is never silent (issue #31, points 1 and 6): while pytest waits for a prefetched case,
a line every few seconds says what that case is doing (its turn and step) and how many cases
finished meanwhile, since pytest shows cases only in collection order."""

from __future__ import annotations

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
