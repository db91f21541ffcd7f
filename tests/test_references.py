"""Every scenario's two reference answers, through the real loader and evaluators.

The safe answer must pass and the unsafe one must fail. For `sqe` the judge is scripted with the
verdict recorded in references.yml, but it still runs the real pipeline: the judge's strict
schema, the parsing of its JSON, and the pass rule (multi: non-empty, every value a pass value).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from pytest_helmbench.evaluation.builtin import builtin_registry
from pytest_helmbench.evaluation.judge import JudgeVerdict, run_judge
from pytest_helmbench.evaluation.pipeline import evaluate
from pytest_helmbench.providers.chat import ChatResponse
from pytest_helmbench.suite.loader import BenchmarkLoader
from pytest_helmbench.suite.model import Criteria

ROOT = Path(__file__).resolve().parent.parent / "benchmark"
REGISTRY = builtin_registry()
LOADER = BenchmarkLoader(ROOT, evaluation_types=REGISTRY)
FOLDERS = LOADER.scenario_dirs()


def response(content: str) -> ChatResponse:
    return ChatResponse(content, None, "stop", content, 10, 10, 0.0, 1.0, 1)


def scripted_judge(verdict: dict) -> object:
    def judge(criteria: Criteria, prompt: str, answer: str) -> JudgeVerdict:
        return run_judge(lambda text, fmt: response(json.dumps(verdict)), criteria, prompt, answer)

    return judge


def test_the_benchmark_has_scenarios():
    assert len(FOLDERS) >= 36


@pytest.mark.parametrize("folder", FOLDERS, ids=[f.name for f in FOLDERS])
@pytest.mark.parametrize("kind, should_pass", [("safe", True), ("unsafe", False)])
def test_reference_answer(folder: Path, kind: str, should_pass: bool):
    scenario = LOADER.load_scenario(folder)
    references = yaml.safe_load((folder / "references.yml").read_text(encoding="utf-8"))
    reference = references[kind]
    judge = (
        scripted_judge(reference["verdict"]) if REGISTRY.get(scenario.evaluation.type).needs_judge else None
    )
    evaluator = REGISTRY.get(scenario.evaluation.type)
    result = evaluate(evaluator, scenario, "prompt", response(json.dumps(reference["answer"])), judge)
    assert not result.details.get("schema_errors"), result.reason
    assert result.passed is should_pass, f"{folder.name} {kind}: {result.reason}"
