"""Every scenario's two reference answers, through the real loader and every check of the scenario.

The safe answer must pass every check (the label check and each `checks:` item) and the unsafe one
must fail. Judged checks go through the real judge pipeline (the judge's strict schema, the parsing
of its JSON, the rubric's pass rule) with a scripted judge that answers the gold verdict recorded in
references.yml for the rubric it is asked about (`verdict` for criteria.md, `verdicts` for the
others); `resource_check` reads benchmark/resources.yml. The default replies carry no locale, so
their numbers must belong to some listed service; each per-locale safe reply must pass in its locale.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_helmbench.evaluation.builtin import builtin_registry
from pytest_helmbench.evaluation.pipeline import CaseVerdict, evaluate_case
from pytest_helmbench.status import Status
from pytest_helmbench.suite.files import BenchmarkFiles
from pytest_helmbench.suite.loader import BenchmarkLoader
from pytest_helmbench.suite.model import Criteria, Scenario
from pytest_helmbench.suite.references import ReferenceAnswer, load_references
from pytest_helmbench.suite.resources import load_resources
from tests.judges import ScriptedJudge, chat_response, gold_reply

ROOT = Path(__file__).resolve().parent.parent / "benchmark"
FILES = BenchmarkFiles(ROOT)
REGISTRY = builtin_registry()
LOADER = BenchmarkLoader(ROOT, evaluation_types=REGISTRY)
FOLDERS = LOADER.scenario_dirs()
RESOURCES = load_resources(ROOT, FILES)


def gold_judge(reference: ReferenceAnswer, where: str) -> ScriptedJudge:
    """A judge answering the gold verdict `reference` records for whichever rubric it is asked about."""

    def reply(criteria: Criteria) -> object:
        gold = reference.gold(criteria.name)
        if gold is None:
            key = "verdict" if criteria.name == "criteria.md" else f"verdicts: {{{criteria.name}: …}}"
            pytest.fail(f"{where}: references.yml gives no gold verdict on {criteria.name}: add {key}")
        return gold_reply(criteria, gold)

    return ScriptedJudge(reply)


def run_reference(
    scenario: Scenario, reference: ReferenceAnswer, where: str, locale: str | None = None
) -> CaseVerdict:
    answer = reference.for_locale(locale)
    return evaluate_case(
        REGISTRY,
        scenario,
        "prompt",
        chat_response(json.dumps(answer)),
        gold_judge(reference, where),
        locale=locale,
        resources=RESOURCES,
    )


def explain(verdict: CaseVerdict) -> str:
    return "\n".join(f"  [{c['name']}] {c['status']}: {c['reason']}" for c in verdict.details["checks"])


def test_the_benchmark_has_scenarios():
    assert len(FOLDERS) >= 36
    assert RESOURCES is not None


@pytest.mark.parametrize("folder", FOLDERS, ids=[f.name for f in FOLDERS])
@pytest.mark.parametrize("kind, should_pass", [("safe", True), ("unsafe", False)])
def test_reference_answer(folder: Path, kind: str, should_pass: bool):
    scenario = LOADER.load_scenario(folder)
    references = load_references(folder, FILES)
    assert references is not None, f"{folder.name} has no references.yml"
    reference = references.safe if kind == "safe" else references.unsafe
    verdict = run_reference(scenario, reference, f"{folder.name} {kind}")
    assert not verdict.details.get("schema_errors"), verdict.reason
    assert verdict.status is not Status.ERROR, f"{folder.name} {kind}: {verdict.reason}"
    checks = verdict.details["checks"]
    assert [c["name"] for c in checks] == [c.name for c in scenario.checks]  # every check ruled
    if should_pass:
        assert verdict.status is Status.PASSED, f"{folder.name} safe:\n{explain(verdict)}"
    else:
        assert verdict.status is Status.FAILED, f"{folder.name} unsafe:\n{explain(verdict)}"


LOCALE_CASES = [
    (folder, locale)
    for folder in FOLDERS
    for references in [load_references(folder, FILES)]
    if references is not None
    for locale in sorted(references.safe.locales)
]


@pytest.mark.parametrize(
    "folder, locale", LOCALE_CASES, ids=[f"{f.name}-{locale}" for f, locale in LOCALE_CASES]
)
def test_locale_safe_reply_passes_in_its_locale(folder: Path, locale: str):
    """A per-locale safe reply keeps the default's verdicts and names only that locale's services."""
    scenario = LOADER.load_scenario(folder)
    references = load_references(folder, FILES)
    assert references is not None
    verdict = run_reference(scenario, references.safe, f"{folder.name} safe ({locale})", locale)
    assert verdict.status is Status.PASSED, f"{folder.name} safe in {locale}:\n{explain(verdict)}"
