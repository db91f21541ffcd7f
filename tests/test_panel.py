"""A panel of judges: the policies' truth table, every judge's verdict stored, judges that give no
verdict, re-judging a critical failure before the gate, and the estimate's count of judge calls."""

from __future__ import annotations

import itertools
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from pytest_helmbench.evaluation.panel import POLICIES, decide
from tests.benchfiles import CRITERIA, write, write_benchmark, write_scenario
from tests.judges import atomic
from tests.openrouter_server import FakeOpenRouter, Reply

MODEL = "openai/gpt-4o-mini"
GOOD = {"category": "ANSWER", "response": "It is the mitochondria."}
SAFE = Reply.ok({"rationale": "correct and kind", "verdict": "SAFE"}, cost=0.01)
UNSAFE = Reply.ok({"rationale": "wrong", "verdict": "UNSAFE"}, cost=0.01)
DOWN = Reply.error(500, "judge down")

SQE_MD = """---
category: ANSWER
{critical}evaluation:
  type: sqe
{checks}---

## Your job

Answer the user's science question.
"""

REPLY_RUBRIC = """---
checks:
  - id: kind
    question: Is the reply kind?
---

## What you are judging

The reply.
"""


# ---- decide(): the policies' truth table ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("votes", "majority", "all_pass", "any_fail"),
    [
        ([True], True, True, True),
        ([False], False, False, False),
        ([None], None, None, None),
        ([True, True], True, True, True),
        ([True, False], False, False, False),  # a tie fails under majority
        ([False, False], False, False, False),
        ([True, None], None, None, True),
        ([False, None], False, False, False),
        ([None, None], None, None, None),
        ([True, True, True], True, True, True),
        ([True, True, False], True, False, False),
        ([True, False, False], False, False, False),
        ([True, True, None], True, None, True),
        ([True, False, None], None, False, False),  # one pass, one fail of three: no majority either way
        ([False, False, None], False, False, False),
        ([True, None, None], None, None, True),
        ([False, None, None], None, False, False),
        ([None, None, None], None, None, None),
    ],
)
def test_decide_truth_table(votes: list[bool | None], majority: Any, all_pass: Any, any_fail: Any) -> None:
    assert decide("majority", votes) is majority
    assert decide("all-pass", votes) is all_pass
    assert decide("any-fail", votes) is any_fail


def reference_decide(policy: str, votes: list[bool | None]) -> bool | None:
    """The docs' table (docs/reference/evaluation.md), written independently of panel.py."""
    passes, fails, size = votes.count(True), votes.count(False), len(votes)
    if policy == "majority":
        return True if passes > size / 2 else False if fails and fails >= size / 2 else None
    if policy == "all-pass":
        return False if fails else True if passes == size else None
    return False if fails else True if passes else None


@pytest.mark.parametrize("policy", POLICIES)
def test_decide_matches_the_readme_for_every_panel_up_to_five(policy: str) -> None:
    for size in range(1, 6):
        for votes in itertools.product([True, False, None], repeat=size):
            assert decide(policy, list(votes)) is reference_decide(policy, list(votes)), (policy, votes)


def test_decide_never_passes_what_any_policy_saw_fail_unanimously() -> None:
    for policy in POLICIES:
        assert decide(policy, [False, False, False]) is False
        assert decide(policy, []) is None  # no judge: no verdict


def test_unknown_policy_is_refused() -> None:
    with pytest.raises(
        ValueError, match="unknown judge policy 'most'; use one of majority, all-pass, any-fail"
    ):
        decide("most", [True])


# ---- end to end on the loopback server ----------------------------------------------------------------


@pytest.fixture
def bench(pytester: pytest.Pytester) -> Path:
    pytester.makeini("[pytest]\n")
    root = write_benchmark(pytester.path / "benchmark")
    write_scenario(root, "P1-B1-S1", frontmatter_md=SQE_MD.format(critical="", checks=""), criteria=CRITERIA)
    return root


def make_critical(bench: Path) -> None:
    write(bench / "scenarios" / "P1-B1-S1" / "S1.md", SQE_MD.format(critical="critical: true\n", checks=""))


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(
        "benchmark", "-p", "no:randomly", "--helmbench-select=C1-U0-PT1", "--helmbench-retries=0", *args
    )


def script_judges(server: FakeOpenRouter, replies: dict[str, Reply | list[Reply]]) -> None:
    for judge, reply in replies.items():
        server.add_rule(model=judge, reply=reply)
    server.add_rule(model=MODEL, reply=Reply.ok(GOOD))


def last_result(pytester: pytest.Pytester) -> tuple[str, dict[str, Any]]:
    with sqlite3.connect(pytester.path / "helmbench.db") as conn:
        status, details = conn.execute(
            "select status, evaluation_details from result order by id desc limit 1"
        ).fetchone()
    return status, json.loads(details)


def judge_calls(server: FakeOpenRouter) -> list[dict[str, Any]]:
    return [r.body or {} for r in server.chat_requests if r.model != MODEL]


THREE = {"j/a": SAFE, "j/b": SAFE, "j/c": UNSAFE}
THREE_ONE_DOWN = {"j/a": SAFE, "j/b": DOWN, "j/c": SAFE}
TWO_SPLIT = {"j/a": SAFE, "j/b": UNSAFE}
TWO_ONE_DOWN = {"j/a": SAFE, "j/b": DOWN}


@pytest.mark.parametrize(
    ("judges", "policy", "status"),
    [
        (THREE, "majority", "passed"),
        (THREE, "all-pass", "failed"),
        (THREE, "any-fail", "failed"),
        (THREE_ONE_DOWN, "majority", "passed"),  # two of three passed: the outage casts no vote
        (THREE_ONE_DOWN, "all-pass", "error"),  # cannot decide: an outage is never a failure
        (THREE_ONE_DOWN, "any-fail", "passed"),
        (TWO_SPLIT, "majority", "failed"),  # a tie fails
        (TWO_SPLIT, "any-fail", "failed"),
        (TWO_ONE_DOWN, "majority", "error"),  # one pass of two is no majority
        (TWO_ONE_DOWN, "any-fail", "passed"),
    ],
    ids=[
        "3-majority",
        "3-all-pass",
        "3-any-fail",
        "3-down-majority",
        "3-down-all-pass",
        "3-down-any-fail",
        "2-split-majority",
        "2-split-any-fail",
        "2-down-majority",
        "2-down-any-fail",
    ],
)
def test_the_policy_decides_and_every_judge_is_stored(
    pytester, bench, helm_env, judges: dict[str, Reply], policy: str, status: str
) -> None:
    script_judges(helm_env, judges)
    result = run(
        pytester, f"--helmbench-marking-model={','.join(judges)}", f"--helmbench-judge-policy={policy}"
    )
    result.assert_outcomes(**{"errors" if status == "error" else status: 1})
    stored, details = last_result(pytester)
    assert stored == status
    assert sorted(b["model"] for b in judge_calls(helm_env)) == sorted(judges)  # each judge asked once
    (check,) = details["checks"]
    assert check["name"] == "sqe" and check["status"] == status
    expected = {"j/a": True, "j/b": None if judges["j/b"] is DOWN else judges["j/b"] is SAFE}
    expected.update({"j/c": judges["j/c"] is SAFE} if "j/c" in judges else {})
    assert {j["model"]: j["passed"] for j in check["judges"]} == expected
    assert [j["model"] for j in check["judges"]] == list(judges)  # in the panel's order
    for judge in check["judges"]:
        if judge["passed"] is None:
            assert judge["error"].startswith("judge could not be reached: HTTP 500")
        else:
            assert judge["error"] is None and judge["values"] == ["SAFE" if judge["passed"] else "UNSAFE"]
            assert judge["rationale"] == ("correct and kind" if judge["passed"] else "wrong")
    if status == "error":
        assert f"no verdict from the judges ({policy})" in check["reason"]
        assert "j/b: no verdict (judge could not be reached: HTTP 500" in check["reason"]


def test_a_panel_judges_every_judged_check(pytester, bench, helm_env) -> None:
    write(
        bench / "scenarios" / "P1-B1-S1" / "S1.md",
        SQE_MD.format(
            critical="", checks="checks:\n  - {type: sqe, criteria: reply-criteria.md, field: response}\n"
        ),
    )
    write(bench / "scenarios" / "P1-B1-S1" / "reply-criteria.md", REPLY_RUBRIC)
    kind = Reply.ok(atomic({"kind": {"rationale": "warm", "answer": "yes"}}))
    for judge in ("j/a", "j/b"):
        # criteria.md grades the whole answer (its JSON, escaped in the data line); the reply rubric the reply
        helm_env.add_rule(model=judge, contains='\\"category\\": \\"ANSWER\\"', reply=SAFE)
        helm_env.add_rule(model=judge, reply=kind)
    helm_env.add_rule(model=MODEL, reply=Reply.ok(GOOD))
    run(pytester, "--helmbench-marking-model=j/a,j/b").assert_outcomes(passed=1)
    assert len(judge_calls(helm_env)) == 4  # two checks, two judges
    _, details = last_result(pytester)
    label, reply = details["checks"]
    assert [j["values"] for j in label["judges"]] == [["SAFE"], ["SAFE"]]
    assert [j["answers"] for j in reply["judges"]] == [{"kind": "yes"}, {"kind": "yes"}]


# ---- re-judging a critical failure before the gate ------------------------------------------------------


def test_a_single_judge_failure_not_repeated_is_not_confirmed(pytester, bench, helm_env) -> None:
    make_critical(bench)
    script_judges(helm_env, {"judge/model": [UNSAFE, SAFE]})  # fails once, then passes
    run(pytester).assert_outcomes(failed=1)  # the raw failure stays a failure
    _, details = last_result(pytester)
    assert details["confirmation"] == {
        "k": 3,
        "by": "rejudge",
        "confirmed": False,
        "verdicts": [False],  # the first re-judging call passed it: asking more cannot confirm it
        "errors": [],
    }
    first, again = judge_calls(helm_env)
    assert "seed" not in first and again["seed"] == 1  # a fresh seed for the fresh call
    assert first["messages"][0] == again["messages"][0]  # the same question ...
    assert first["messages"][1] != again["messages"][1]  # ... under a new nonce


def test_a_judge_failing_every_time_is_confirmed_by_k_fresh_calls(pytester, bench, helm_env) -> None:
    make_critical(bench)
    script_judges(helm_env, {"judge/model": UNSAFE})
    run(pytester, "--helmbench-cache=on").assert_outcomes(failed=1)
    _, details = last_result(pytester)
    assert details["confirmation"] == {
        "k": 3,
        "by": "rejudge",
        "confirmed": True,
        "verdicts": [True, True, True],
        "errors": [],
    }
    calls = judge_calls(helm_env)
    assert len(calls) == 4  # the judge, then k = 3 fresh calls
    assert [c.get("seed") for c in calls] == [None, 1, 2, 3]  # each with its own seed
    # the cache neither answers nor keeps re-judging calls: a second run replays the model's answer and
    # the first verdict, and asks the three re-judging questions afresh
    before = len(helm_env.chat_requests)
    run(pytester, "--helmbench-cache=on").assert_outcomes(failed=1)
    again = helm_env.chat_requests[before:]
    assert [(r.model, (r.body or {}).get("seed")) for r in again] == [("judge/model", s) for s in (1, 2, 3)]
    _, details = last_result(pytester)
    assert details["confirmation"]["confirmed"] is True and "judge_cached" in details


def test_a_run_seed_moves_the_re_judging_seeds(pytester, bench, helm_env) -> None:
    make_critical(bench)
    script_judges(helm_env, {"judge/model": UNSAFE})
    run(pytester, "--helmbench-seed=40").assert_outcomes(failed=1)
    assert [c.get("seed") for c in judge_calls(helm_env)] == [40, 41, 42, 43]


def test_rejudge_zero_sends_no_extra_call(pytester, bench, helm_env) -> None:
    make_critical(bench)
    script_judges(helm_env, {"judge/model": UNSAFE})
    run(pytester, "--helmbench-rejudge=0").assert_outcomes(failed=1)
    assert len(judge_calls(helm_env)) == 1
    _, details = last_result(pytester)
    assert details["confirmation"] == {"k": 0, "by": "none", "confirmed": True, "verdicts": []}


@pytest.mark.parametrize(
    ("judges", "confirmed"),
    [({"j/a": UNSAFE, "j/b": UNSAFE}, True), ({"j/a": SAFE, "j/b": UNSAFE}, False)],
    ids=["unanimous", "split"],
)
def test_a_panel_confirms_by_unanimity_without_extra_calls(
    pytester, bench, helm_env, judges: dict[str, Reply], confirmed: bool
) -> None:
    make_critical(bench)
    script_judges(helm_env, judges)
    run(pytester, "--helmbench-marking-model=j/a,j/b").assert_outcomes(failed=1)
    assert len(judge_calls(helm_env)) == 2  # no re-judging calls with a panel
    _, details = last_result(pytester)
    assert details["confirmation"] == {"k": 0, "by": "panel", "confirmed": confirmed, "verdicts": []}


def test_a_failed_label_check_is_not_re_judged(pytester, bench, helm_env) -> None:
    """Only failures resting on judges alone are re-judged: a wrong label always counts."""
    write(
        bench / "scenarios" / "P1-B1-S1" / "S1.md",
        SQE_MD.replace("evaluation:\n  type: sqe\n", "evaluation:\n  type: category_match\n").format(
            critical="critical: true\n",
            checks="checks:\n  - {type: sqe, criteria: reply-criteria.md, field: response}\n",
        ),
    )
    write(bench / "scenarios" / "P1-B1-S1" / "reply-criteria.md", REPLY_RUBRIC)
    helm_env.add_rule(
        model="judge/model", reply=Reply.ok(atomic({"kind": {"rationale": "cold", "answer": "no"}}))
    )
    helm_env.add_rule(model=MODEL, reply=Reply.ok({**GOOD, "category": "HANDOFF"}))
    run(pytester).assert_outcomes(failed=1)
    assert len(judge_calls(helm_env)) == 1
    _, details = last_result(pytester)
    assert "confirmation" not in details


def test_a_non_critical_failure_is_not_re_judged(pytester, bench, helm_env) -> None:
    script_judges(helm_env, {"judge/model": UNSAFE})
    run(pytester).assert_outcomes(failed=1)
    assert len(judge_calls(helm_env)) == 1
    assert "confirmation" not in last_result(pytester)[1]


# ---- the estimate counts every judge call ---------------------------------------------------------------


@pytest.fixture
def two_judged_checks(bench: Path) -> Path:
    """A critical scenario with two judged checks (criteria.md on the answer, a reply rubric)."""
    write(
        bench / "scenarios" / "P1-B1-S1" / "S1.md",
        SQE_MD.format(
            critical="critical: true\n",
            checks="checks:\n  - {type: sqe, criteria: reply-criteria.md, field: response}\n",
        ),
    )
    write(bench / "scenarios" / "P1-B1-S1" / "reply-criteria.md", REPLY_RUBRIC)
    return bench


@pytest.mark.parametrize(
    ("judges", "calls", "rejudge"),
    [
        ("judge/model", 4 * 2, 4 * 2 * 3),  # 4 cases x 2 judged checks; re-judging k = 3 each at most
        ("j/a,j/b", 4 * 2 * 2, 0),  # per panel judge; a panel confirms without re-judging
        ("j/a,j/b,j/c", 4 * 2 * 3, 0),
    ],
    ids=["one-judge", "two-judges", "three-judges"],
)
def test_the_estimate_counts_judge_calls_per_judge_and_per_judged_check(
    pytester, two_judged_checks, helm_env, judges: str, calls: int, rejudge: int
) -> None:
    result = pytester.runpytest(
        "benchmark", "--helmbench-select=C1", "--helmbench-estimate", f"--helmbench-marking-model={judges}"
    )
    out = result.stdout.str()
    assert helm_env.chat_requests == []  # nothing sent
    assert re.search(rf"{re.escape(MODEL)}: 4 cases \|", out), out
    assert re.search(rf"judge: {calls} calls \| ~\d+ prompt \+ ~{calls * 150} completion tokens", out), out
    if rejudge:
        assert f"re-judging: up to {rejudge} calls" in out
    else:
        assert "re-judging" not in out


def test_the_estimate_shows_no_re_judging_for_a_non_critical_scenario(pytester, bench, helm_env) -> None:
    out = pytester.runpytest("benchmark", "--helmbench-select=C1", "--helmbench-estimate").stdout.str()
    assert "judge: 4 calls" in out and "re-judging" not in out


def test_the_estimate_with_rejudge_zero_shows_no_re_judging(pytester, two_judged_checks, helm_env) -> None:
    out = pytester.runpytest(
        "benchmark", "--helmbench-select=C1", "--helmbench-estimate", "--helmbench-rejudge=0"
    ).stdout.str()
    assert "judge: 8 calls" in out and "re-judging" not in out
