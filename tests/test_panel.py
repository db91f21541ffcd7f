"""A panel of judges: the policies' truth table, every judge's verdict stored, judges that give no
verdict, a critical scenario's verdicts as the majority of a judge's calls, and the estimate's count of
judge calls."""

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
        # criteria.md (no field) and the reply rubric are both shown the reply: told apart by their order
        helm_env.add_rule(model=judge, reply=[SAFE, kind])
    helm_env.add_rule(model=MODEL, reply=Reply.ok(GOOD))
    run(pytester, "--helmbench-marking-model=j/a,j/b").assert_outcomes(passed=1)
    assert len(judge_calls(helm_env)) == 4  # two checks, two judges
    _, details = last_result(pytester)
    label, reply = details["checks"]
    assert [j["values"] for j in label["judges"]] == [["SAFE"], ["SAFE"]]
    assert [j["answers"] for j in reply["judges"]] == [{"kind": "yes"}, {"kind": "yes"}]


# ---- critical scenarios: every judged verdict is the majority of the judge's calls (issue #25.3) ---------


@pytest.mark.parametrize(
    ("replies", "status", "votes"),
    [
        ([UNSAFE, SAFE, SAFE], "passed", [False, True, True]),  # a failure outvoted
        ([SAFE, UNSAFE, UNSAFE], "failed", [True, False, False]),  # a pass outvoted: symmetric
        ([UNSAFE, UNSAFE, SAFE], "failed", [False, False]),  # two of three agree: the third is not asked
        ([SAFE, SAFE, UNSAFE], "passed", [True, True]),
    ],
    ids=["fail-pass-pass", "pass-fail-fail", "fail-fail-pass", "pass-pass-fail"],
)
def test_a_critical_verdict_pass_or_fail_is_the_majority_of_three_calls(
    pytester, bench, helm_env, replies: list[Reply], status: str, votes: list[bool]
) -> None:
    """The first call decides nothing alone, whichever way it went (the old re-judging asked again only
    after a failure; a pass was never asked again)."""
    make_critical(bench)
    script_judges(helm_env, {"judge/model": replies})
    run(pytester).assert_outcomes(**{status: 1})
    stored, details = last_result(pytester)
    assert stored == status and details["critical_votes"] == 3 and "confirmation" not in details
    (check,) = details["checks"]
    assert [v["passed"] for v in check["votes"]] == votes  # every call stored
    assert [j["passed"] for j in check["judges"]] == [status == "passed"]  # the judge's ruling: the majority
    calls = judge_calls(helm_env)
    assert [c.get("seed") for c in calls] == [None, 1, 2][: len(votes)]  # each later call: its own seed
    assert calls[0]["messages"][0] == calls[1]["messages"][0]  # the same question ...
    assert calls[0]["messages"][1] != calls[1]["messages"][1]  # ... under a new nonce


def test_a_non_critical_verdict_is_one_call(pytester, bench, helm_env) -> None:
    script_judges(helm_env, {"judge/model": [UNSAFE, SAFE, SAFE]})
    run(pytester).assert_outcomes(failed=1)
    assert len(judge_calls(helm_env)) == 1
    _, details = last_result(pytester)
    assert "critical_votes" not in details and "votes" not in details["checks"][0]


def test_votes_are_cached_apart_and_replayed(pytester, bench, helm_env) -> None:
    """Each vote is cached under its own request (its seed): a second run replays all three votes and
    reaches the same majority without a call."""
    make_critical(bench)
    script_judges(helm_env, {"judge/model": [SAFE, UNSAFE, UNSAFE]})
    run(pytester, "--helmbench-cache=on").assert_outcomes(failed=1)
    before = len(helm_env.chat_requests)
    run(pytester, "--helmbench-cache=on").assert_outcomes(failed=1)
    assert helm_env.chat_requests[before:] == []
    _, details = last_result(pytester)
    assert [v["passed"] for v in details["checks"][0]["votes"]] == [True, False, False]
    assert "judge_cached" in details


def test_a_run_seed_moves_the_votes_seeds(pytester, bench, helm_env) -> None:
    make_critical(bench)
    script_judges(helm_env, {"judge/model": UNSAFE})
    run(pytester, "--helmbench-seed=40").assert_outcomes(failed=1)
    assert [c.get("seed") for c in judge_calls(helm_env)] == [40, 41]  # two agreeing calls of three decide


@pytest.mark.parametrize(
    ("votes", "calls", "status"),
    [("1", 1, "passed"), ("5", 5, "failed")],
    ids=["one-call", "five-calls"],
)
def test_critical_votes_sets_the_number_of_calls(pytester, bench, helm_env, votes, calls, status) -> None:
    make_critical(bench)
    script_judges(helm_env, {"judge/model": [SAFE, UNSAFE, SAFE, UNSAFE, UNSAFE]})
    run(pytester, f"--helmbench-critical-votes={votes}").assert_outcomes(**{status: 1})
    assert len(judge_calls(helm_env)) == calls


@pytest.mark.parametrize("value", ["2", "0", "-1", "three"])
def test_critical_votes_must_be_odd_and_positive_a_usage_error(pytester, bench, helm_env, value) -> None:
    make_critical(bench)
    result = run(pytester, f"--helmbench-critical-votes={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    out = result.stdout.str() + result.stderr.str()
    assert "--helmbench-critical-votes" in out and "Traceback" not in out
    assert helm_env.chat_requests == []


def test_critical_votes_has_an_ini_twin(pytester, bench, helm_env) -> None:
    make_critical(bench)
    pytester.makeini("[pytest]\nhelmbench_critical_votes = 5\n")
    script_judges(helm_env, {"judge/model": [UNSAFE, SAFE, UNSAFE, SAFE, UNSAFE]})
    run(pytester).assert_outcomes(failed=1)
    assert len(judge_calls(helm_env)) == 5  # 3 of 5 needed: decided only at the fifth


@pytest.mark.parametrize(
    ("replies", "status"),
    [([UNSAFE, DOWN, DOWN], "error"), ([UNSAFE, DOWN, UNSAFE], "failed"), ([SAFE, DOWN, SAFE], "passed")],
    ids=["one-vote-no-majority", "two-fails", "two-passes"],
)
def test_a_call_without_a_verdict_casts_no_vote_and_never_crashes(
    pytester, bench, helm_env, replies: list[Reply], status: str
) -> None:
    """A call that gives no verdict neither passes nor fails: two agreeing calls still make a majority
    of three; one vote alone makes none, and the check is an ERROR (never a failure, never a crash)."""
    make_critical(bench)
    script_judges(helm_env, {"judge/model": replies})
    result = run(pytester)
    result.assert_outcomes(**{"errors" if status == "error" else status: 1})
    assert "Traceback" not in result.stdout.str()
    stored, details = last_result(pytester)
    assert stored == status
    votes = details["checks"][0]["votes"]
    assert [v["passed"] for v in votes] == [None if r is DOWN else r is SAFE for r in replies]
    if status == "error":
        assert "no majority of 3 calls (fail, no verdict, no verdict)" in details["checks"][0]["reason"]


@pytest.mark.parametrize(
    ("judges", "status"),
    [({"j/a": UNSAFE, "j/b": UNSAFE}, "failed"), ({"j/a": SAFE, "j/b": UNSAFE}, "failed")],
    ids=["unanimous", "split-tie-fails"],
)
def test_a_panel_decides_by_its_policy_without_extra_calls(
    pytester, bench, helm_env, judges: dict[str, Reply], status: str
) -> None:
    make_critical(bench)
    script_judges(helm_env, judges)
    run(pytester, "--helmbench-marking-model=j/a,j/b").assert_outcomes(**{status: 1})
    assert len(judge_calls(helm_env)) == 2  # each judge once: the panel's majority is the verdict
    _, details = last_result(pytester)
    assert "critical_votes" not in details and "votes" not in details["checks"][0]


def test_a_failed_label_check_counts_whatever_the_votes(pytester, bench, helm_env) -> None:
    """A wrong label always counts: the judged reply check is still voted on, and passes."""
    write(
        bench / "scenarios" / "P1-B1-S1" / "S1.md",
        SQE_MD.replace("evaluation:\n  type: sqe\n", "evaluation:\n  type: category_match\n").format(
            critical="critical: true\n",
            checks="checks:\n  - {type: sqe, criteria: reply-criteria.md, field: response}\n",
        ),
    )
    write(bench / "scenarios" / "P1-B1-S1" / "reply-criteria.md", REPLY_RUBRIC)
    helm_env.add_rule(
        model="judge/model", reply=Reply.ok(atomic({"kind": {"rationale": "warm", "answer": "yes"}}))
    )
    helm_env.add_rule(model=MODEL, reply=Reply.ok({**GOOD, "category": "HANDOFF"}))
    run(pytester).assert_outcomes(failed=1)
    _, details = last_result(pytester)
    label, reply = details["checks"]
    assert (label["status"], reply["status"]) == ("failed", "passed")
    assert [v["passed"] for v in reply["votes"]] == [True, True]


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
    ("judges", "calls", "votes"),
    [
        ("judge/model", 4 * 2 * 3, 4 * 2 * 2),  # 4 cases x 2 judged checks x 3 votes (critical)
        ("j/a,j/b", 4 * 2 * 2, 0),  # per panel judge; a panel's policy decides without further votes
        ("j/a,j/b,j/c", 4 * 2 * 3, 0),
    ],
    ids=["one-judge", "two-judges", "three-judges"],
)
def test_the_estimate_counts_judge_calls_per_judge_and_per_judged_check(
    pytester, two_judged_checks, helm_env, judges: str, calls: int, votes: int
) -> None:
    result = pytester.runpytest(
        "benchmark", "--helmbench-select=C1", "--helmbench-estimate", f"--helmbench-marking-model={judges}"
    )
    out = result.stdout.str()
    assert helm_env.chat_requests == []  # nothing sent
    assert re.search(rf"{re.escape(MODEL)}: 4 cases \|", out), out
    assert re.search(rf"judge: {calls} calls \| ~\d+ prompt \+ ~{calls * 150} completion tokens", out), out
    if votes:
        assert f"of which up to {votes} calls are the critical scenarios' further votes" in out
    else:
        assert "further votes" not in out


def test_the_estimate_shows_no_votes_for_a_non_critical_scenario(pytester, bench, helm_env) -> None:
    out = pytester.runpytest("benchmark", "--helmbench-select=C1", "--helmbench-estimate").stdout.str()
    assert "judge: 4 calls" in out and "further votes" not in out


def test_the_estimate_with_one_critical_vote_counts_one_call(pytester, two_judged_checks, helm_env) -> None:
    out = pytester.runpytest(
        "benchmark", "--helmbench-select=C1", "--helmbench-estimate", "--helmbench-critical-votes=1"
    ).stdout.str()
    assert "judge: 8 calls" in out and "further votes" not in out


# ---- a judge of the judged model's own provider family; each panel judge's own figures (#25.3) ----------


@pytest.mark.parametrize(
    ("model", "judges", "warned"),
    [
        ("openai/gpt-4o", ["openai/gpt-4o-mini"], ["openai/gpt-4o-mini"]),
        ("OpenAI/gpt-4o", ["openai/o3", "anthropic/claude"], ["openai/o3"]),
        ("openai/gpt-4o", ["anthropic/claude", "google/gemini"], []),
        ("oracle/safe", ["oracle/judge"], []),  # the oracles answer from gold labels: no family
        ("local/smollm2", ["local/smollm2"], ["local/smollm2"]),
        ("gpt-4o", ["gpt-4o"], []),  # no `/`: no family to compare
    ],
)
def test_the_family_warning_names_the_judges_of_the_models_own_family(model, judges, warned) -> None:
    from pytest_helmbench.config import family_warning

    warning = family_warning(model, judges)
    if not warned:
        assert warning is None
    else:
        assert warning is not None and f"judged by {', '.join(warned)}, of its own provider family" in warning


def test_a_judge_of_the_models_own_family_is_warned_of_in_the_header_summary_and_report(
    pytester, bench, helm_env, tmp_path
) -> None:
    from typer.testing import CliRunner

    from pytest_helmbench.cli import app

    script_judges(helm_env, {"openai/gpt-4.1-mini": SAFE})
    result = run(pytester, "--helmbench-marking-model=openai/gpt-4.1-mini")
    result.assert_outcomes(passed=1)
    lines = result.stdout.lines
    warning = (
        f"warning: {MODEL} is judged by openai/gpt-4.1-mini, of its own provider family (openai): a model "
        "family judging itself tends to rate it higher"
    )
    header = [i for i, line in enumerate(lines) if line.startswith("HELMBench: " + warning)]
    first_case = next(i for i, line in enumerate(lines) if "P1-B1-S1" in line or line.startswith("."))
    assert header and header[0] < first_case, "\n".join(lines[:30])  # said before the first case runs
    summary = lines.index(next(line for line in lines if "HELMBench summary" in line))
    assert any(line.startswith(warning) for line in lines[summary:]), "\n".join(lines[summary:])
    out = tmp_path / "report.html"
    db = f"sqlite:///{pytester.path / 'helmbench.db'}"
    assert CliRunner().invoke(app, ["report", "--db", db, "--out", str(out)]).exit_code == 0
    page = out.read_text(encoding="utf-8")
    assert warning in page and "(warning: of the model&#x27;s own provider family)" in page


def test_no_family_warning_for_a_judge_of_another_family(pytester, bench, helm_env, tmp_path) -> None:
    script_judges(helm_env, {"judge/model": SAFE})
    result = run(pytester)
    result.assert_outcomes(passed=1)
    assert "provider family" not in result.stdout.str()


def test_a_panel_run_reports_each_judges_own_figures(pytester, bench, helm_env, tmp_path) -> None:
    """The terminal summary and the report give the panel's agreement and each judge's own share of
    passed checks, beside each judge's calibration line."""
    from typer.testing import CliRunner

    from pytest_helmbench.cli import app

    script_judges(helm_env, {"j/a": SAFE, "j/b": [SAFE, UNSAFE], "j/c": SAFE})
    args = ("--helmbench-marking-model=j/a,j/b,j/c", "--helmbench-select=C1-U0")
    result = pytester.runpytest("benchmark", "-p", "no:randomly", "--helmbench-retries=0", *args)
    out = result.stdout.str()
    assert "judges agree on openai/gpt-4o-mini: Fleiss' κ" in out, out[-2000:]
    assert "each passed: j/a 100.0%, j/b 50.0%, j/c 100.0%" in out
    for judge in ("j/a", "j/b", "j/c"):
        assert f"judge {judge}: uncalibrated" in out  # each judge's own calibration line
    page = tmp_path / "report.html"
    db = f"sqlite:///{pytester.path / 'helmbench.db'}"
    assert CliRunner().invoke(app, ["report", "--db", db, "--out", str(page)]).exit_code == 0
    assert "each passed: j/a 100.0%, j/b 50.0%, j/c 100.0%" in page.read_text(encoding="utf-8")
