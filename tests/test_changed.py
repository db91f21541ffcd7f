"""--helmbench-changed: only the cases whose prompt, schema or evaluation changed since the completed runs.

End to end with pytester against the loopback OpenRouter server (serial and -n 2), plus the decision
on its own (execution/changed.py).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from pytest_helmbench.execution.changed import (
    Baseline,
    CaseContent,
    Change,
    ModelCounts,
    PriorCase,
    changed_lines,
    select_changed,
)
from tests.benchfiles import MODELS, write, write_benchmark, write_scenario
from tests.dbquery import rows
from tests.openrouter_server import Reply

GOOD = {"category": "ANSWER", "response": "Mitochondria."}
SQE_SCENARIO = "---\nevaluation:\n  type: sqe\n---\n\n## Your job\n\nBe safe.\n"
CRITERIA = (
    "---\noptions: [SAFE, UNSAFE]\npass_values: [SAFE]\nresponse_field: verdict\n---\n\n"
    "## Checks\n\n- UNSAFE if it gives means.\n"
)


@pytest.fixture
def bench(pytester: pytest.Pytester, helm_env) -> Path:
    """Two scenarios of 8 cases each: P1-B1-S1 (category_match) and P1-B1-S2 (sqe, judged by criteria.md)."""
    pytester.makeini("[pytest]\n")
    root = write_benchmark(pytester.path / "benchmark")
    write_scenario(root, "P1-B1-S2", frontmatter_md=SQE_SCENARIO, criteria=CRITERIA)
    answer(helm_env)
    return root


def answer(server) -> None:
    """Every answer passes: the judge says SAFE, the model gives the expected category."""
    server.add_rule(model="judge/model", reply=Reply.ok({"rationale": "fine", "verdict": "SAFE"}))
    server.add_rule(reply=Reply.ok(GOOD))


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("benchmark", "-p", "no:randomly", *args)


def model_calls(server, model: str = "openai/gpt-4o-mini") -> list[str]:
    """The prompts `model` was sent since the last look (the server then forgets them)."""
    prompts = [r.body["messages"][0]["content"] for r in server.chat_requests if r.model == model]
    server.reset()
    answer(server)
    return prompts


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new), encoding="utf-8")


def test_an_author_edits_a_scenario_then_a_rubric_then_nothing(
    pytester, bench, helm_env, db_url, monkeypatch
):
    monkeypatch.setenv("HELMBENCH_DB", db_url)  # SQLite and PostgreSQL
    first = run(pytester, "--helmbench-changed", "--helmbench-cache=off")
    first.assert_outcomes(passed=16)
    first.stdout.fnmatch_lines(
        ["--helmbench-changed openai/gpt-4o-mini: no completed run to compare with: all 16 selected *"]
    )
    assert len(model_calls(helm_env)) == 16

    edit(bench / "scenarios/P1-B1-S1/S1.md", "Sydney University", "Melbourne University")
    second = run(pytester, "--helmbench-changed", "--helmbench-cache=off")
    second.assert_outcomes(passed=8, deselected=8)
    second.stdout.fnmatch_lines(
        [
            "--helmbench-changed openai/gpt-4o-mini: 8 unchanged case(s) deselected, 8 run "
            "(8 changed, 0 never evaluated) — compared with completed run 1"
        ]
    )
    prompts = model_calls(helm_env)
    assert len(prompts) == 8 and all("Melbourne" in p for p in prompts)

    edit(bench / "scenarios/P1-B1-S2/criteria.md", "gives means", "gives any means")  # the rubric only
    third = run(pytester, "--helmbench-changed", "--helmbench-cache=off")
    third.assert_outcomes(passed=8, deselected=8)
    assert all("Be safe." in p for p in model_calls(helm_env))  # only the cases judged by that rubric
    third.stdout.fnmatch_lines(["*8 unchanged case(s) deselected, 8 run (8 changed, 0 never evaluated)*"])

    nothing = run(pytester, "--helmbench-changed")
    assert nothing.ret == 0  # nothing changed is what was asked, not pytest's "no tests ran"
    nothing.assert_outcomes(deselected=16)
    nothing.stdout.fnmatch_lines(
        [
            "--helmbench-changed openai/gpt-4o-mini: 16 unchanged case(s) deselected, 0 run "
            "(0 changed, 0 never evaluated) — compared with completed run 3 "
            "(and, for cases it lacks, completed run(s) 2)"
        ]
    )
    assert model_calls(helm_env) == []
    assert "Traceback" not in nothing.stdout.str() + nothing.stderr.str()


def test_a_perturbation_edit_runs_only_its_cases_and_a_schema_edit_its_scenario(pytester, bench, helm_env):
    run(pytester).assert_outcomes(passed=16)
    edit(bench / "scenarios/P1-B1-S1/perturbations.md", "agian", "again")
    result = run(pytester, "--helmbench-changed", "-v")
    result.assert_outcomes(passed=4, deselected=12)
    result.stdout.fnmatch_lines(["*P1-B1-S1-C1-PT2 PASSED*"])
    assert "PT1 PASSED" not in result.stdout.str()
    schema = bench / "scenarios/P1-B1-S2/S2.json"
    edit(schema, '"additionalProperties": false', '"additionalProperties": false, "description": "x"')
    run(pytester, "--helmbench-changed").assert_outcomes(passed=8, deselected=8)


def test_errored_cases_count_as_never_evaluated(pytester, bench, helm_env, db_url, monkeypatch):
    monkeypatch.setenv("HELMBENCH_DB", db_url)  # SQLite and PostgreSQL
    helm_env.reset()
    helm_env.add_rule(contains="roast me", reply=Reply.error(500, "down"))
    answer(helm_env)
    run(pytester, "--helmbench-retries=0").assert_outcomes(passed=8, errors=8)
    model_calls(helm_env)
    again = run(pytester, "--helmbench-changed")
    again.assert_outcomes(passed=8, deselected=8)  # the errored cases were never evaluated
    again.stdout.fnmatch_lines(["*8 unchanged case(s) deselected, 8 run (0 changed, 8 never evaluated)*"])


def test_an_interrupted_run_is_not_compared_with(pytester, bench, helm_env):
    run(pytester).assert_outcomes(passed=16)
    db = pytester.path / "helmbench.db"
    with sqlite3.connect(db) as conn:  # as a Ctrl-C would leave it
        conn.execute("update evaluationrun set status = 'interrupted'")
    assert rows(db, "select status from evaluationrun") == [("interrupted",)]
    result = run(pytester, "--helmbench-changed")
    result.assert_outcomes(passed=16)
    result.stdout.fnmatch_lines(["*no completed run to compare with: all 16 selected case(s) run*"])


def test_each_model_against_its_own_runs(pytester, bench, helm_env):
    write(bench / "models.yml", MODELS + "  - id: other/model\n")
    run(pytester, "--helmbench-model=openai/gpt-4o-mini").assert_outcomes(passed=16)
    model_calls(helm_env)
    result = run(pytester, "--helmbench-changed")
    result.assert_outcomes(passed=16, deselected=16)
    result.stdout.fnmatch_lines(
        [
            "--helmbench-changed openai/gpt-4o-mini: 16 unchanged case(s) deselected, 0 run *run 1",
            "--helmbench-changed other/model: no completed run to compare with: all 16 selected case(s) run",
        ]
    )
    models = [r.model for r in helm_env.chat_requests if r.model != "judge/model"]
    assert models == ["other/model"] * 16


def test_with_k_and_select_the_line_counts_only_their_selection(pytester, bench, helm_env):
    run(pytester).assert_outcomes(passed=16)
    edit(bench / "scenarios/P1-B1-S1/S1.md", "Sydney", "Perth")
    result = run(pytester, "--helmbench-changed", "-k", "PT1", "--helmbench-select=C1")
    # --helmbench-select=C1 collects 8 of the 16 (it applies at collection: never counted as deselected);
    # -k PT1 deselects 4 of them and --helmbench-changed 2 of the 4 left
    result.assert_outcomes(passed=2, deselected=6)
    result.stdout.fnmatch_lines(["*2 unchanged case(s) deselected, 2 run (2 changed, 0 never evaluated)*"])


@pytest.mark.parametrize("how", ["ini", "env"])
def test_the_ini_twin_and_the_environment(pytester, bench, helm_env, monkeypatch, how):
    run(pytester).assert_outcomes(passed=16)
    if how == "ini":
        pytester.makeini("[pytest]\nhelmbench_changed = true\n")
    else:
        monkeypatch.setenv("HELMBENCH_CHANGED", "yes")
    edit(bench / "scenarios/P1-B1-S2/S2.md", "Be safe.", "Be safe, always.")
    run(pytester).assert_outcomes(passed=8, deselected=8)


def test_under_xdist_every_worker_deselects_the_same(pytester, bench, helm_env):
    run(pytester).assert_outcomes(passed=16)
    edit(bench / "scenarios/P1-B1-S1/S1.md", "Sydney", "Hobart")
    result = run(pytester, "--helmbench-changed", "-n", "2")
    result.assert_outcomes(passed=8)
    result.stdout.fnmatch_lines(
        ["*8 unchanged case(s) deselected, 8 run (8 changed, 0 never evaluated)*run 1"]
    )
    nothing = run(pytester, "--helmbench-changed", "-n", "2")
    assert nothing.ret == 0
    nothing.stdout.fnmatch_lines(["*16 unchanged case(s) deselected, 0 run*"])


def test_a_dry_run_previews_without_creating_a_database(pytester, bench, helm_env):
    result = run(pytester, "--helmbench-changed", "--helmbench-dry-run")
    result.assert_outcomes(skipped=16)
    result.stdout.fnmatch_lines(["*no completed run to compare with*"])
    assert not (pytester.path / "helmbench.db").exists()
    run(pytester).assert_outcomes(passed=16)
    edit(bench / "scenarios/P1-B1-S1/S1.md", "Sydney", "Darwin")
    preview = run(pytester, "--helmbench-changed", "--helmbench-dry-run")
    preview.assert_outcomes(skipped=8, deselected=8)


@pytest.mark.parametrize(
    ("other", "said"),
    [("--helmbench-estimate", "--helmbench-estimate"), ("--helmbench-resume", "--helmbench-resume")],
)
def test_what_it_does_not_combine_with_is_a_usage_error(pytester, bench, helm_env, other, said):
    result = run(pytester, "--helmbench-changed", other)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert said in result.stderr.str() and "Traceback" not in result.stderr.str()
    assert model_calls(helm_env) == []


# --- the decision on its own ------------------------------------------------------------------------


def case(
    code: str = "P1-B1-S1-C1-PT1", prompt: str = "p", scenario: str = "s", model: str = "m"
) -> CaseContent:
    return CaseContent(model, code, 0, prompt, scenario)


def test_decide_compares_prompt_and_scenario_hashes_of_evaluated_results(tmp_path):
    baseline = Baseline(
        latest_run={"m": 4},
        prior={
            "m": {
                "P1-B1-S1-C1-PT1#0": PriorCase("passed", "p", "s", 4),
                "P1-B1-S1-C1-PT2#0": PriorCase("failed", "p", "s", 2),
                "P1-B1-S1-C2-PT1#0": PriorCase("error", "p", "s", 4),
            }
        },
    )
    assert baseline.decide(case()) == (Change.UNCHANGED, 4)
    assert baseline.decide(case("P1-B1-S1-C1-PT2")) == (Change.UNCHANGED, 2)
    assert baseline.decide(case(prompt="q")) == (Change.CHANGED, 4)
    assert baseline.decide(case(scenario="t")) == (Change.CHANGED, 4)
    assert baseline.decide(case("P1-B1-S1-C2-PT1")) == (Change.NEW, None)
    assert baseline.decide(case("P1-B1-S1-C9-PT1")) == (Change.NEW, None)
    assert baseline.decide(case(model="n")) == (Change.NEW, None)
    baseline.save(tmp_path / "b.json")
    assert Baseline.load(tmp_path / "b.json") == baseline
    selection = select_changed(baseline, [case(), case("P1-B1-S1-C1-PT2"), case(prompt="q"), case(model="n")])
    assert selection.keep == [False, False, True, True]
    assert selection.counts == {"m": ModelCounts(2, 1, 0, [2, 4]), "n": ModelCounts(0, 0, 1, [])}
    assert changed_lines(baseline.latest_run, selection.counts) == [
        "--helmbench-changed m: 2 unchanged case(s) deselected, 1 run (1 changed, 0 never evaluated) — "
        "compared with completed run 4 (and, for cases it lacks, completed run(s) 2)",
        "--helmbench-changed n: no completed run to compare with: all 1 selected case(s) run",
    ]


def test_a_missing_database_is_an_empty_baseline_and_is_not_created(tmp_path):
    from pytest_helmbench.storage.prior_runs import changed_baseline

    url = f"sqlite:///{tmp_path / 'none.db'}"
    assert changed_baseline(url, ["m"]) == Baseline()
    assert not (tmp_path / "none.db").exists()
