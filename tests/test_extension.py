"""Evaluation types from outside HELMBench: a conftest.py registers one through HELMBench's own hook.

The conftest below is the docs' "Write an evaluator" example (docs/how-to/write-an-evaluator.md), run
end to end against the loopback OpenRouter server (serial and -n 2), plus the registry's rules: unknown
and duplicate types.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from pytest_helmbench.errors import BenchmarkError
from pytest_helmbench.evaluation.base import Evaluation, EvaluationContext, Evaluator
from pytest_helmbench.evaluation.builtin import builtin_registry
from pytest_helmbench.evaluation.category_match import CategoryMatch
from pytest_helmbench.evaluation.judge import JudgeVerdict
from pytest_helmbench.evaluation.pipeline import evaluate
from pytest_helmbench.evaluation.registry import EvaluatorConflict, EvaluatorRegistry
from pytest_helmbench.execution.estimate import EstimateSettings, estimate
from pytest_helmbench.providers.chat import ChatResponse
from pytest_helmbench.suite.cases import expand
from pytest_helmbench.suite.loader import BenchmarkLoader
from pytest_helmbench.suite.model import Criteria
from pytest_helmbench.suite.prompt import compose
from tests.benchfiles import write_benchmark, write_scenario
from tests.openrouter_server import Reply

WORD_COUNT_CONFTEST = '''
from pytest_helmbench.errors import BenchmarkError
from pytest_helmbench.evaluation.base import Evaluation, EvaluationContext, Evaluator


class WordCount(Evaluator):
    """Passes when the answer's `response` has at most `max_words` words."""

    type = "word_count"  # scenarios say `evaluation: {type: word_count, max_words: 40}`

    def check_spec(self, spec, scenario_path):
        limit = spec.settings.get("max_words")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            message = "word_count needs 'max_words': a positive whole number"
            raise BenchmarkError(scenario_path, message, fix="e.g. max_words: 40")
        return super().check_spec(spec, scenario_path)  # keeps the mapping as spec.settings

    def evaluate(self, context: EvaluationContext) -> Evaluation:
        limit = context.spec.settings["max_words"]
        words = len(str(context.answer.get("response", "")).split())
        if words <= limit:
            return Evaluation(True, f"{words} words, at most {limit}", context.answer, limit, words)
        return Evaluation(False, f"{words} words, more than {limit}", context.answer, limit, words)


def pytest_helmbench_register_evaluators(registry):
    registry.add(WordCount())
'''

WORD_COUNT_MD = """---
evaluation:
  type: word_count
  max_words: {limit}
---

## Your job

You are an AI science tutor for Sydney University. Answer in a few words and categorise the request.
"""

SHORT = {"category": "ANSWER", "response": "Mitochondria."}
LONG = {"category": "ANSWER", "response": "It is the mitochondria, of course, my friend."}


def bench(pytester: pytest.Pytester, limit: Any = 3, conftest: str = WORD_COUNT_CONFTEST) -> Path:
    pytester.makeini("[pytest]\n")
    pytester.makeconftest(conftest)
    root = write_benchmark(pytester.path / "benchmark")
    write_scenario(root, frontmatter_md=WORD_COUNT_MD.format(limit=limit))
    return root


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("benchmark", "-p", "no:randomly", "--helmbench-select=U0", *args)


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_conftest_evaluator_runs_end_to_end(pytester, helm_env, xdist):
    bench(pytester)
    helm_env.add_rule(contains="powerhouse of the cell agian", reply=Reply.ok(LONG))
    helm_env.add_rule(contains="powerhouse", reply=Reply.ok(SHORT))
    result = run(pytester, *xdist)
    result.assert_outcomes(passed=2, failed=2)
    assert "8 words, more than 3" in result.stdout.str()
    with sqlite3.connect(pytester.path / "helmbench.db") as conn:
        found = conn.execute("select case_code, status, reason, evaluation_details from result").fetchall()
    by_code = {code: (status, reason, json.loads(details)) for code, status, reason, details in found}
    assert by_code["P1-B1-S1-C1-PT1"][:2] == ("passed", "1 words, at most 3")
    assert by_code["P1-B1-S1-C1-PT2"][:2] == ("failed", "8 words, more than 3")
    assert {details["evaluation"] for _, _, details in by_code.values()} == {"word_count"}
    assert all(not request.body.get("model", "").startswith("judge/") for request in helm_env.chat_requests)


def test_bad_settings_of_a_conftest_evaluator_are_a_collection_error(pytester, helm_env):
    root = bench(pytester, limit="lots")
    result = run(pytester)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    md = root / "scenarios" / "P1-B1-S1" / "S1.md"
    result.stdout.fnmatch_lines(
        [
            f"*{md}: word_count needs 'max_words': a positive whole number",
            "*fix: e.g. max_words: 40",
        ]
    )
    assert helm_env.chat_requests == []


def test_an_unknown_type_is_still_a_collection_error_listing_the_registered_ones(pytester, helm_env):
    root = bench(pytester)
    write_scenario(root, frontmatter_md="---\ncategory: ANSWER\nevaluation:\n  type: fuzzy_match\n---\n\nx\n")
    result = run(pytester)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        [
            f"*{root / 'scenarios' / 'P1-B1-S1' / 'S1.md'}: unknown evaluation type 'fuzzy_match'",
            "*fix: use one of category_match, list_includes, reply_language, resource_check, sqe, word_count",
        ]
    )
    assert helm_env.chat_requests == []


IMPOSTOR_CONFTEST = """
from pytest_helmbench.evaluation.category_match import CategoryMatch


class Impostor(CategoryMatch):
    pass


def pytest_helmbench_register_evaluators(registry):
    registry.add(Impostor())
"""


def test_a_duplicate_type_name_is_an_error_naming_both(pytester, helm_env):
    bench(pytester, conftest=IMPOSTOR_CONFTEST)
    result = run(pytester)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        [
            "*evaluation type 'category_match' is registered twice: by "
            "pytest_helmbench.evaluation.category_match.CategoryMatch and by conftest.Impostor",
            "*fix: give one of them another type name, or register it only once",
        ]
    )
    assert helm_env.chat_requests == []


# ---- the registry and the interface, without a session ------------------------------------------------


class Shouty(Evaluator):
    """A test type: the answer's `response` must be upper case; optionally asks the judge."""

    type = "shouty"

    def evaluate(self, context: EvaluationContext) -> Evaluation:
        text = str(context.answer.get("response", ""))
        return Evaluation(
            text.isupper(), "upper case" if text.isupper() else "not upper case", context.answer
        )


class JudgedShouty(Shouty):
    type = "judged_shouty"
    needs_judge = True


def test_registry_add_get_names() -> None:
    registry = builtin_registry()
    assert registry.names() == ["category_match", "list_includes", "reply_language", "resource_check", "sqe"]
    registry.add(Shouty())
    assert registry.names() == [
        "category_match",
        "list_includes",
        "reply_language",
        "resource_check",
        "shouty",
        "sqe",
    ]
    assert isinstance(registry.get("shouty"), Shouty) and "shouty" in registry and len(registry) == 6
    assert [registry.get(n).needs_judge for n in registry.names()] == [False] * 5 + [True]
    with pytest.raises(KeyError, match="unknown evaluation type 'nope' \\(known: category_match"):
        registry.get("nope")


def test_registry_rejects_a_second_evaluator_of_a_type() -> None:
    registry = EvaluatorRegistry()
    registry.add(CategoryMatch())
    with pytest.raises(
        EvaluatorConflict, match="'category_match' is registered twice: by .*CategoryMatch and by"
    ):
        registry.add(CategoryMatch())


def test_an_evaluator_without_a_type_name_is_refused() -> None:
    class Nameless(Shouty):
        type = ""

    with pytest.raises(EvaluatorConflict, match="has no type name"):
        EvaluatorRegistry().add(Nameless())


def shouty_scenario(tmp_path: Path, kind: str, registry: EvaluatorRegistry):
    root = write_benchmark(tmp_path / "benchmark")
    write_scenario(root, frontmatter_md=f"---\nevaluation:\n  type: {kind}\n  loud: true\n---\n\nx\n")
    return BenchmarkLoader(root, evaluation_types=registry).load_scenario(root / "scenarios" / "P1-B1-S1")


def test_the_default_check_keeps_the_settings_for_evaluate(tmp_path: Path) -> None:
    registry = builtin_registry()
    registry.add(Shouty())
    scenario = shouty_scenario(tmp_path, "shouty", registry)
    assert scenario.evaluation.type == "shouty" and scenario.evaluation.settings["loud"] is True
    assert scenario.criteria is None


def answer(text: str) -> ChatResponse:
    content = json.dumps({"category": "ANSWER", "response": text})
    return ChatResponse(content, None, "stop", content, 10, 10, 0.0, 1.0, 1)


def test_the_judge_is_handed_only_to_evaluators_that_declare_it(tmp_path: Path) -> None:
    registry = builtin_registry()
    registry.add(Shouty())
    scenario = shouty_scenario(tmp_path, "shouty", registry)
    calls: list[str] = []

    def judge(criteria: Criteria, prompt: str, text: str) -> JudgeVerdict:
        calls.append(text)
        raise AssertionError("not this one")

    result = evaluate(Shouty(), scenario, "p", answer("HELLO"), judge)
    assert (result.passed, result.reason) == (True, "upper case")
    result = evaluate(Shouty(), scenario, "p", answer("hello"), judge)
    assert (result.passed, result.reason) == (False, "not upper case")
    assert calls == []

    class Asking(JudgedShouty):
        def evaluate(self, context: EvaluationContext) -> Evaluation:
            assert context.judge is judge
            return super().evaluate(context)

    assert evaluate(Asking(), scenario, "p", answer("HELLO"), judge).passed


def test_schema_and_json_faults_are_ruled_on_before_the_evaluator(tmp_path: Path) -> None:
    registry = builtin_registry()
    registry.add(Shouty())
    scenario = shouty_scenario(tmp_path, "shouty", registry)
    result = evaluate(Shouty(), scenario, "p", ChatResponse("not json", None, "stop", "", 1, 1, 0.0, 1.0, 1))
    assert not result.passed and "not valid JSON" in result.reason


def test_the_estimate_counts_judge_calls_by_needs_judge(tmp_path: Path) -> None:
    registry = builtin_registry()
    registry.add(JudgedShouty())
    registry.add(Shouty())
    judged = shouty_scenario(tmp_path / "a", "judged_shouty", registry)
    plain = shouty_scenario(tmp_path / "b", "shouty", registry)

    def judge_calls(scenario: Any) -> int:
        entries = [(case, compose(case)) for case in expand(scenario, ["m/x"])]
        settings = EstimateSettings(
            max_tokens=100, marking_model="judge/model", pricing=lambda m: None, evaluators=registry
        )
        found = estimate(entries, settings)
        return found[0].judge_calls

    assert judge_calls(judged) == 8 and judge_calls(plain) == 0


def test_a_bad_setting_names_the_scenario_file(tmp_path: Path) -> None:
    class Strict(Shouty):
        type = "strict"

        def check_spec(self, spec: Any, scenario_path: Path) -> Any:
            raise BenchmarkError(scenario_path, "strict wants nothing", fix="remove 'loud'")

    registry = builtin_registry()
    registry.add(Strict())
    with pytest.raises(BenchmarkError) as info:
        shouty_scenario(tmp_path, "strict", registry)
    assert str(info.value).endswith("P1-B1-S1/S1.md: strict wants nothing\n  fix: remove 'loud'")


def test_the_docs_example_is_the_conftest_tested_here() -> None:
    page = Path(__file__).resolve().parent.parent / "docs" / "how-to" / "write-an-evaluator.md"
    assert f"```python\n{WORD_COUNT_CONFTEST.strip()}\n```" in page.read_text(encoding="utf-8")
