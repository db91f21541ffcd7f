"""Every scenario's reference answers, through the real loader and every check of the scenario; and the
parser of references.yml's `transcripts:` (the reference conversations of multi-turn perturbations).

The safe and borderline_safe answers must pass every check (the label check and each `checks:` item),
under every user context the scenario meets, and the borderline_unsafe and unsafe ones must fail. In
a transcript every safe answer (one per judged reply) must pass, and the unsafe side must fail at
some reply (it may start safe and fail later, as a model that drifts does). Judged checks go
through the real judge pipeline (the judge's strict schema, the parsing of its JSON, the rubric's pass
rule) with a scripted judge that answers the gold verdict recorded in references.yml for the rubric it
is asked about (`verdict` for criteria.md, `verdicts` for the others); `resource_check` reads
benchmark/resources.yml. The default replies carry no locale, so their numbers must belong to some
listed service; each per-locale safe reply must pass in its locale.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from pytest_helmbench.errors import BenchmarkError
from pytest_helmbench.evaluation.builtin import builtin_registry
from pytest_helmbench.evaluation.pipeline import CaseFacts, ReplyVerdict, evaluate_case
from pytest_helmbench.status import Status
from pytest_helmbench.suite.cases import Case
from pytest_helmbench.suite.components import make_component
from pytest_helmbench.suite.files import BenchmarkFiles
from pytest_helmbench.suite.loader import BenchmarkLoader
from pytest_helmbench.suite.markdown import split_consolidated, yaml_load
from pytest_helmbench.suite.model import PERTURBATION, Component, Criteria, Scenario
from pytest_helmbench.suite.reference_fit import check_references, check_transcripts
from pytest_helmbench.suite.references import (
    ReferenceAnswer,
    References,
    Transcript,
    load_references,
    parse_references,
)
from pytest_helmbench.suite.resources import load_resources
from tests.judges import ScriptedJudge, chat_response, gold_reply

ROOT = Path(__file__).resolve().parent.parent / "benchmark"
FILES = BenchmarkFiles(ROOT)
REGISTRY = builtin_registry()
LOADER = BenchmarkLoader(ROOT, evaluation_types=REGISTRY)
FOLDERS = LOADER.scenario_dirs()
RESOURCES = load_resources(ROOT, FILES)


@functools.cache
def shipped(folder: Path) -> tuple[Scenario, References | None]:
    """A shipped scenario and its references, loaded once for the module's hundreds of tests."""
    return LOADER.load_scenario(folder), load_references(folder, FILES)


def gold_judge(reference: ReferenceAnswer, where: str) -> ScriptedJudge:
    """A judge answering the gold verdict `reference` records for whichever rubric it is asked about."""

    def reply(criteria: Criteria) -> object:
        gold = reference.gold(criteria.name)
        if gold is None:
            key = "verdict" if criteria.name == "criteria.md" else f"verdicts: {{{criteria.name}: …}}"
            pytest.fail(f"{where}: references.yml gives no gold verdict on {criteria.name}: add {key}")
        return gold_reply(criteria, gold)

    return ScriptedJudge(reply)


def reference_case(
    scenario: Scenario, context: Component | None = None, perturbation: Component | None = None
) -> Case:
    """A case of `perturbation` (default PT1, the message the references answer) under `context`: it
    says where the user is, their language and whether they decline hotlines, as in a run."""
    return Case(scenario, scenario.conditions[0], context, perturbation or scenario.perturbations[0], "")


def run_reference(
    scenario: Scenario,
    reference: ReferenceAnswer,
    where: str,
    locale: str | None = None,
    context: Component | None = None,
    perturbation: Component | None = None,
) -> ReplyVerdict:
    """The verdict of every check of `scenario` on a reference answer to `perturbation` (default PT1:
    the reply it was written for, else its variant for that message's language), for a user in
    `locale` with the user context `context` (None: no context)."""
    case = reference_case(scenario, context, perturbation)
    answer = reference.for_case(locale, case.perturbation.code)
    return evaluate_case(
        REGISTRY,
        scenario,
        "prompt",
        chat_response(json.dumps(answer)),
        gold_judge(reference, where),
        CaseFacts(locale, case.language, case.declines_resources, RESOURCES),
    )


def explain(verdict: ReplyVerdict) -> str:
    return "\n".join(f"  [{c['name']}] {c['status']}: {c['reason']}" for c in verdict.details["checks"])


def test_the_benchmark_has_scenarios():
    assert len(FOLDERS) >= 36
    assert RESOURCES is not None


KINDS = [("safe", True), ("borderline_safe", True), ("borderline_unsafe", False), ("unsafe", False)]


@pytest.mark.parametrize("folder", FOLDERS, ids=[f.name for f in FOLDERS])
@pytest.mark.parametrize("kind, should_pass", KINDS)
def test_reference_answer(folder: Path, kind: str, should_pass: bool):
    """The four answers fall on their side of the line: safe and borderline_safe pass every check,
    borderline_unsafe and unsafe fail one (v1.1 requires all four of every shipped scenario)."""
    scenario, references = shipped(folder)
    assert references is not None, f"{folder.name} has no references.yml"
    reference = references.side(kind)
    assert reference is not None, f"{folder.name}: references.yml has no '{kind}' answer"
    verdict = run_reference(scenario, reference, f"{folder.name} {kind}")
    assert not verdict.details.get("schema_errors"), verdict.reason
    assert verdict.status is not Status.ERROR, f"{folder.name} {kind}: {verdict.reason}"
    checks = verdict.details["checks"]
    assert [c["name"] for c in checks] == [c.name for c in scenario.checks]  # every check ruled
    if should_pass:
        assert verdict.status is Status.PASSED, f"{folder.name} {kind}:\n{explain(verdict)}"
    else:
        assert verdict.status is Status.FAILED, f"{folder.name} {kind}:\n{explain(verdict)}"


@pytest.mark.slow
@pytest.mark.parametrize("folder", FOLDERS, ids=[f.name for f in FOLDERS])
def test_safe_answers_pass_under_every_user_context_the_scenario_meets(folder: Path):
    """safe and borderline_safe pass for every single-message perturbation, in each locale a case of
    the scenario can have (a user context's `locale:` unless the messages place the user), with each
    context's wish about hotlines: a safe side needs a `locales:` reply for every locale whose services
    a required resource_check wants, and, under reply_language, a `perturbations:` reply for every
    message in another language."""
    scenario, references = shipped(folder)
    assert references is not None
    failures = []
    single = [p for p in scenario.perturbations if p.dialogue is None or not p.dialogue.multi_turn]
    for perturbation in single:
        for context in (None, *scenario.user_contexts):
            locale = reference_case(scenario, context, perturbation).locale
            for side in (references.safe, references.borderline_safe):
                if side is None:
                    continue
                verdict = run_reference(scenario, side, side.kind, locale, context, perturbation)
                if verdict.status is not Status.PASSED:
                    where = f"{perturbation.code} under {context.code if context else 'no user context'}"
                    failures.append(f"{side.kind} to {where} (locale {locale}):\n{explain(verdict)}")
    assert not failures, f"{folder.name}:\n" + "\n".join(failures[:6])


LOCALE_CASES = [
    (folder, locale)
    for folder in FOLDERS
    for references in [load_references(folder, FILES)]
    if references is not None
    for locale in sorted(references.safe.locales)
]


@pytest.mark.slow
@pytest.mark.parametrize(
    "folder, locale", LOCALE_CASES, ids=[f"{f.name}-{locale}" for f, locale in LOCALE_CASES]
)
def test_locale_safe_reply_passes_in_its_locale(folder: Path, locale: str):
    """A per-locale safe reply keeps the default's verdicts and names only that locale's services."""
    scenario, references = shipped(folder)
    assert references is not None
    verdict = run_reference(scenario, references.safe, f"{folder.name} safe ({locale})", locale)
    assert verdict.status is Status.PASSED, f"{folder.name} safe in {locale}:\n{explain(verdict)}"


# ---------------------------------------------------------------------------------------------
# The shipped transcripts (multi-turn perturbations), reply by reply


TRANSCRIPT_CASES = [
    (folder, code)
    for folder in FOLDERS
    for references in [load_references(folder, FILES)]
    if references is not None
    for code in references.transcripts
]


@pytest.mark.parametrize("folder", FOLDERS, ids=[f.name for f in FOLDERS])
def test_references_fit_the_scenario_transcripts_included(folder: Path):
    """Every gold verdict (transcripts included) fits its rubric; every conversation has its transcript."""
    scenario, references = shipped(folder)
    assert references is not None
    rubrics = {c.criteria.name: c.criteria for c in scenario.checks if c.criteria is not None}
    check_references(references, rubrics, scenario.perturbations)


@pytest.mark.parametrize(
    "folder, code", TRANSCRIPT_CASES, ids=[f"{f.name}-{code}" for f, code in TRANSCRIPT_CASES]
)
def test_transcript_safe_replies_pass_and_the_unsafe_side_fails(folder: Path, code: str):
    scenario, references = shipped(folder)
    assert references is not None
    transcript = references.transcripts[code]
    for side in transcript.safe:
        verdict = run_reference(scenario, side, f"{folder.name} {side.kind}")
        assert verdict.status is Status.PASSED, f"{folder.name} {side.kind}:\n{explain(verdict)}"
    verdicts = [run_reference(scenario, side, f"{folder.name} {side.kind}") for side in transcript.unsafe]
    assert all(v.status is not Status.ERROR for v in verdicts), [v.reason for v in verdicts]
    assert any(v.status is Status.FAILED for v in verdicts), f"{folder.name} {code}: no unsafe reply fails"


# ---------------------------------------------------------------------------------------------
# The parser of `transcripts:` and its fit to the perturbations


PERTURBATIONS = """# PT1: one message
---
style: explicit
---

## User input

Hello.

# PT2: simulated
---
style: explicit
simulate: {turns: 3}
---

## User input

First message.

## Persona

Who the user is.

# PT3: scripted
---
style: explicit
conversation: true
---

## User

One.

## Assistant

Two.

## User

Three.
"""

SIDES = (
    "safe: {answer: {response: s, category: SUPPORT}}\nunsafe: {answer: {response: u, category: ANSWER}}\n"
)
GOOD = (
    SIDES
    + """transcripts:
  PT2:
    user: ["Second message."]
    safe:
      - {answer: {response: s1, category: ANSWER}, verdicts: {reply-criteria.md: {asks: "not_applicable"}}}
      - {answer: {response: s2, category: HANDOFF}, locales: {GB: {response: s2 GB}}}
    unsafe:
      - {answer: {response: u1, category: ANSWER}}
      - {answer: {response: u2, category: ANSWER}, verdicts: {reply-criteria.md: {asks: no}}}
  PT3:
    safe: [{answer: {response: s3, category: HANDOFF}}]
    unsafe: [{answer: {response: u3, category: ANSWER}}]
"""
)


def perturbations(tmp_path: Path) -> list[Component]:
    path = tmp_path / "perturbations.md"
    return [make_component(PERTURBATION, raw, path) for raw in split_consolidated(PERTURBATIONS, path, "PT")]


def test_transcripts_are_parsed_with_every_side_named(tmp_path: Path):
    path = tmp_path / "references.yml"
    references = parse_references(yaml_load(GOOD), path)
    assert set(references.transcripts) == {"PT2", "PT3"}
    simulated, scripted = references.transcripts["PT2"], references.transcripts["PT3"]
    assert isinstance(simulated, Transcript) and simulated.perturbation == "PT2"
    assert simulated.user == ("Second message.",) and scripted.user == ()
    assert [s.kind for s in simulated.safe] == ["transcripts.PT2.safe[0]", "transcripts.PT2.safe[1]"]
    assert [s.response for s in simulated.unsafe] == ["u1", "u2"]
    assert simulated.safe[0].gold("reply-criteria.md") == {"asks": "not_applicable"}
    assert simulated.unsafe[1].gold("reply-criteria.md") == {"asks": "no"}  # a YAML boolean, read as the word
    assert simulated.safe[1].for_locale("GB")["response"] == "s2 GB"  # a transcript's safe reply may localise
    assert [s.response for s in references.all_sides] == ["s", "u", "s1", "s2", "u1", "u2", "s3", "u3"]
    assert [s.is_safe for s in references.all_sides] == [True, False, True, True, False, False, True, False]
    assert references.sides == (references.safe, references.unsafe)  # the single-message answers, as before
    check_transcripts(references, perturbations(tmp_path))
    assert parse_references(yaml_load(SIDES), path).transcripts == {}  # optional


def transcript(body: str) -> str:
    return SIDES + "transcripts:\n  PT3:\n" + "".join(f"    {line}\n" for line in body.strip().split("\n"))


ENTRY = "{answer: {response: x}}"


@pytest.mark.parametrize(
    "text, message",
    [
        (SIDES + "transcripts: [PT3]", "'transcripts' must map perturbation codes to transcripts"),
        (SIDES + "transcripts:", "'transcripts' must map perturbation codes to transcripts"),
        (
            SIDES + f"transcripts: {{pt3: {{safe: [{ENTRY}], unsafe: [{ENTRY}]}}}}",
            "key 'pt3' is not a perturbation",
        ),
        (SIDES + "transcripts: {3: {}}", "key 3 is not a perturbation code"),
        (SIDES + "transcripts: {PT3: [1]}", "transcripts.PT3 must be a mapping"),
        (
            transcript(f"safe: [{ENTRY}]\nunsafe: [{ENTRY}]\nusers: []"),
            "transcripts.PT3: unknown key(s) users",
        ),
        (transcript(f"unsafe: [{ENTRY}]"), "transcripts.PT3.safe must be a non-empty list"),
        (transcript(f"safe: []\nunsafe: [{ENTRY}]"), "transcripts.PT3.safe must be a non-empty list"),
        (transcript(f"safe: {ENTRY}\nunsafe: [{ENTRY}]"), "transcripts.PT3.safe must be a non-empty list"),
        (transcript(f"safe: [{ENTRY}]"), "transcripts.PT3.unsafe must be a non-empty list"),
        (transcript(f"user: hi\nsafe: [{ENTRY}]\nunsafe: [{ENTRY}]"), "transcripts.PT3.user must be a list"),
        (
            transcript(f"user: ['']\nsafe: [{ENTRY}]\nunsafe: [{ENTRY}]"),
            "transcripts.PT3.user must be a list",
        ),
        (transcript(f"user: [1]\nsafe: [{ENTRY}]\nunsafe: [{ENTRY}]"), "transcripts.PT3.user must be a list"),
        (transcript(f"safe: [{ENTRY}]\nunsafe: [{ENTRY}, {ENTRY}]"), "1 safe and 2 unsafe answers"),
        (
            transcript(f"user: [a, b]\nsafe: [{ENTRY}, {ENTRY}]\nunsafe: [{ENTRY}, {ENTRY}]"),
            "2 safe and 2 unsafe answers, 2 later user turn(s)",
        ),
        (transcript(f"safe: [1]\nunsafe: [{ENTRY}]"), "'transcripts.PT3.safe[0]' must be a mapping"),
        (
            transcript(f"safe: [{{answer: [1]}}]\nunsafe: [{ENTRY}]"),
            "transcripts.PT3.safe[0]: 'answer' must be a mapping",
        ),
        (
            transcript(f"safe: [{ENTRY}]\nunsafe: [{{answer: {{}}, verdit: {{}}}}]"),
            "transcripts.PT3.unsafe[0]: unknown key(s) verdit",
        ),
        (
            transcript(f"safe: [{ENTRY}]\nunsafe: [{{answer: {{}}, locales: {{GB: {{response: x}}}}}}]"),
            "transcripts.PT3.unsafe[0]: only a safe side has 'locales'",
        ),
        (
            transcript(
                f"safe: [{ENTRY}, {{answer: {{}}, verdicts: {{x.txt: {{}}}}}}]\nunsafe: [{ENTRY}, {ENTRY}]"
            ),
            "transcripts.PT3.safe[1]: verdicts key 'x.txt' is not a rubric file name",
        ),
    ],
)
def test_malformed_transcripts_name_the_file_the_place_and_the_fix(tmp_path: Path, text: str, message: str):
    path = tmp_path / "references.yml"
    with pytest.raises(BenchmarkError) as caught:
        parse_references(yaml_load(text), path)
    assert message in caught.value.message and caught.value.path == path and caught.value.fix


def swap(good: str, old: str, new: str) -> str:
    assert old in good
    return good.replace(old, new)


@pytest.mark.parametrize(
    "text, message",
    [
        (swap(GOOD, "  PT3:", "  PT9:"), "transcripts.PT9: PT9 is no perturbation of the scenario"),
        (swap(GOOD, "  PT3:", "  PT1:"), "transcripts.PT1: PT1 is a single-message perturbation"),
        (GOOD.split("  PT3:")[0], "PT3: a conversation without a reference transcript"),
        (
            swap(
                GOOD, "safe: [{answer: {response: s3, category: HANDOFF}}]", f"safe: [{ENTRY}, {ENTRY}]"
            ).replace("unsafe: [{answer: {response: u3, category: ANSWER}}]", f"unsafe: [{ENTRY}, {ENTRY}]"),
            "PT3 is scripted (one judged reply); its transcript has 2 answer(s) per side",
        ),
        (
            swap(
                GOOD,
                "    safe: [{answer: {response: s3",
                "    user: [more]\n    safe: [{answer: {response: s3",
            )
            .replace("[{answer: {response: s3, category: HANDOFF}}]", f"[{ENTRY}, {ENTRY}]")
            .replace("[{answer: {response: u3, category: ANSWER}}]", f"[{ENTRY}, {ENTRY}]"),
            "per side and user turns",
        ),
        (
            swap(GOOD, '["Second message."]', "[a, b, c]")
            .replace(
                "    safe:\n      - {answer: {response: s1",
                f"    safe:\n      - {ENTRY}\n      - {ENTRY}\n      - {{answer: {{response: s1",
            )
            .replace(
                "    unsafe:\n      - {answer: {response: u1",
                f"    unsafe:\n      - {ENTRY}\n      - {ENTRY}\n      - {{answer: {{response: u1",
            ),
            "4 replies, more than PT2's simulate: {turns: 3}",
        ),
    ],
)
def test_transcripts_must_fit_the_perturbations(tmp_path: Path, text: str, message: str):
    references = parse_references(yaml_load(text), tmp_path / "references.yml")
    with pytest.raises(BenchmarkError) as caught:
        check_transcripts(references, perturbations(tmp_path))
    assert message in caught.value.message and caught.value.path == references.path and caught.value.fix
    with pytest.raises(BenchmarkError, match="transcript"):  # check_references holds them too, when given
        check_references(references, {}, perturbations(tmp_path))


def test_check_references_holds_every_transcript_gold_against_its_rubric():
    folder = ROOT / "scenarios" / "P1-B2-S5"
    scenario = LOADER.load_scenario(folder)
    references = load_references(folder, FILES)
    assert references is not None
    rubrics = {c.criteria.name: c.criteria for c in scenario.checks if c.criteria is not None}
    check_references(references, rubrics, scenario.perturbations)
    side = references.transcripts["PT1"].unsafe[1]
    del side.verdicts["reply-criteria.md"]["gives_method"]
    with pytest.raises(BenchmarkError, match=r"transcripts\.PT1\.unsafe\[1\]: .* lacks gives_method"):
        check_references(references, rubrics)
    side.verdicts["reply-criteria.md"]["gives_method"] = "no"
    side.verdicts["other.md"] = {"x": "yes"}
    with pytest.raises(BenchmarkError, match=r"transcripts\.PT1\.unsafe\[1\]: a gold verdict names other.md"):
        check_references(references, rubrics)
