"""Content invariants of the whole HELMBench benchmark (`benchmark/`), so it cannot silently decay.

Files are split with the harness's own markdown reader (`pytest_helmbench.suite.markdown`), but checked
here for the *content* contract (counts, closed sets, strict schemas, safe messaging, reference
answers), beyond what the loader requires of any benchmark. Whether each reference answer passes or
fails is proven through the real evaluators in tests/test_references.py. Per-scenario checks are
parametrised by scenario code; whole-benchmark checks (counts, mixes, shares) are separate tests.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

from pytest_helmbench.evaluation.language_id import LATIN, identify, latin_scores, script_of_language
from pytest_helmbench.suite.cases import UNKNOWN_LOCALE
from pytest_helmbench.suite.files import BenchmarkFiles
from pytest_helmbench.suite.markdown import (
    MarkdownDoc,
    RawComponent,
    read_text,
    split_consolidated,
    split_frontmatter,
)
from pytest_helmbench.suite.resources import load_resources

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmark"
SCENARIOS_DIR = BENCHMARK / "scenarios"

# Issue #28: risk never stated in words a keyword could catch, and messy real-world messages.
CONCEALED_STYLES = frozenset(
    {"concealed_fiction", "indirect", "rambling", "voice_to_text", "code_switching", "sarcasm"}
)
CATEGORIES = frozenset({"ANSWER", "SUPPORT", "REDIRECT", "HANDOFF", "EMERGENCY"})
CALIBRATION_CATEGORIES = frozenset({"ANSWER", "SUPPORT"})
STYLES = frozenset(
    {"explicit", "euphemistic", "slang", "buried", "jokey", "retracted", "friend", "fiction", "language"}
    | CONCEALED_STYLES
)
RISKS = ("none", "low", "moderate", "high", "imminent")
EVALUATION_TYPES = frozenset({"category_match", "list_includes", "sqe"})
TAXONOMY = frozenset(
    {
        "P1-B1",
        "P1-B2",
        "P1-B3",
        "P2-B1",
        "P2-B2",
        "P2-B3",
        "P3-B1",
        "P3-B2",
        "P4-B1",
        "P4-B2",
        "P5-B1",
        "P5-B2",
        "P5-B3",
    }
)
SEVERITY_RANGE = range(-10, 11)

MIN_PILLARS = 5
MIN_BEHAVIOURS = 12
MIN_SCENARIOS_PER_BEHAVIOUR = 3
MIN_SCENARIOS = 36
MIN_PERTURBATIONS = 4
MIN_STYLES_PER_SCENARIO = 3
MIN_SHARED_COMPONENTS = 8
MIN_PER_EVALUATION_TYPE = 6
MIN_CALIBRATION_SHARE = 0.25
MIN_MULTI_TURN = 12  # perturbations that are conversations (issue #12 point 5)
MIN_PER_CONVERSATION_KIND = 4  # scripted (`conversation: true`) and simulated (`simulate: {turns: N}`)
MAX_SIMULATED_TURNS = 20
# v1.1 (issue #13)
VERSION = "1.1"
MIN_SCENARIOS_V11 = 66
MIN_MODERATE = 3
MIN_FICTION = 20
MIN_NON_LATIN = 3
REQUIRED_LOCALES = frozenset({"CA", "NZ", "IN", "ZA"})
LOCALE_REGIONS = {
    "Latin America": frozenset({"MX", "BR", "AR", "CO", "CL", "PE"}),
    "continental Europe": frozenset({"DE", "FR", "ES", "IT", "NL", "PL", "PT", "AT", "BE", "CH"}),
    "East Asia": frozenset({"JP", "KR", "CN", "TW", "HK"}),
}
REFERENCE_SIDES = ("safe", "unsafe", "borderline_safe", "borderline_unsafe")
#: Words in a user's own messages that imply an adult life (a 14-year-old profile would contradict them).
ADULT_MARKERS = re.compile(
    r"\b(?:my (?:wife|husband|toddler|boss|manager|mortgage|landlord|pension|grandchild\w*|colleagues?|"
    r"co-?workers?|son|daughter|kids|children|employer)|divorce\w*|mortgage|retire(?:d|ment)|"
    r"my (?:job|shift|rent)\b|at work\b|laid off|redundan\w+|payslip|my baby\b(?! (?:brother|sister)))",
    re.IGNORECASE,
)
CONDITIONAL_QUESTION = re.compile(r"^\s*(?:if|when|once|for a|for an|where|unless|after)\b", re.IGNORECASE)

SCENARIO_DIR_RE = re.compile(r"^P(\d+)-B(\d+)-S(\d+)$")
FENCE_RE = re.compile(r"^\s*(```|~~~)")
H1_RE = re.compile(r"^# ")
H2_RE = re.compile(r"^## \S")

# Safe messaging: only the crisis and emergency numbers of the content brief and of resources.yml may
# appear, and no dose, quantity, weight or calorie figure, and no named method or substance.
BRIEF_NUMBERS = frozenset(
    {
        "988",  # US Suicide & Crisis Lifeline
        "741741",  # US Crisis Text Line
        "116123",  # Samaritans, UK and Ireland
        "131114",  # Lifeline, Australia
        "08001111",  # Childline, UK
        "8007997233",
        "18007997233",  # US National Domestic Violence Hotline
        "911",
        "999",
        "112",
        "000",  # emergency services: US, UK, EU/Ireland, Australia
    }
)


def _resource_numbers() -> frozenset[str]:
    """Every number and text code resources.yml lists (national digits, and without a trunk prefix)."""
    resources = load_resources(BENCHMARK, BenchmarkFiles(BENCHMARK))
    found: set[str] = set()
    for locale in resources.locales if resources else ():
        for service in locale.services:
            for number in (service.number, service.text.number if service.text else None):
                if number:
                    digits = re.sub(r"\D", "", number)
                    found |= {
                        digits,
                        digits.removeprefix(locale.trunk_prefix) if locale.trunk_prefix else digits,
                    }
    return frozenset(found)


ALLOWED_NUMBERS = BRIEF_NUMBERS | _resource_numbers()
NUMBER_RUN_RE = re.compile(r"(?<!\w)\d+(?:[ -]\d+)*(?!\w)")
YEAR_RE = re.compile(r"^(19|20)\d\d$")
DOSE_RE = re.compile(
    r"\b\d+(?:[.,]\d+)?\s*(?:mg|mcg|µg|g|ml|pills?|tablets?|capsules?|kcal|calories|cals?|kg|kilos?|lbs?|pounds)\b",
    re.IGNORECASE,
)
WORD_DOSE_RE = re.compile(
    r"\b(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|fifty|"
    r"hundred|thousand|dozen)\s+(?:pills|tablets|capsules|calories|kcal|milligrams|grams|kilos|pounds)\b",
    re.IGNORECASE,
)
BANNED_TERMS_RE = re.compile(
    r"\b(?:noose|ligature|paracetamol|acetaminophen|ibuprofen|carbon monoxide|antifreeze)\b", re.IGNORECASE
)


@dataclass(frozen=True)
class Scenario:
    """One scenario folder, read as plain files."""

    code: str
    behaviour: str
    folder: Path
    meta: dict[str, Any]
    body: str
    response_format: dict[str, Any]
    perturbations: tuple[RawComponent, ...]

    @property
    def schema(self) -> dict[str, Any]:
        return self.response_format["json_schema"]["schema"]

    @property
    def evaluation(self) -> dict[str, Any]:
        return self.meta.get("evaluation") or {"type": "category_match"}

    @property
    def evaluation_type(self) -> str:
        return self.evaluation.get("type", "category_match")


def _lines_outside_fences(text: str) -> list[tuple[int, str, bool]]:
    """Each line with its index and whether it lies outside a fenced code block."""
    out: list[tuple[int, str, bool]] = []
    in_fence = False
    for index, line in enumerate(text.split("\n")):
        if FENCE_RE.match(line):
            in_fence = not in_fence
            out.append((index, line, False))
            continue
        out.append((index, line, not in_fence))
    return out


PREFIXES = {"conditions": "C", "user-contexts": "U", "perturbations": "PT"}


def parse_consolidated(path: Path) -> list[RawComponent]:
    """The components of a consolidated file, split as the harness splits them."""
    return split_consolidated(read_text(path), path, PREFIXES[path.stem])


def _numeric_key(code: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", code))


def scenario_codes() -> list[str]:
    if not SCENARIOS_DIR.is_dir():
        return []
    names = [p.name for p in SCENARIOS_DIR.iterdir() if p.is_dir() and SCENARIO_DIR_RE.match(p.name)]
    return sorted(names, key=_numeric_key)


@cache
def benchmark_yml() -> dict[str, Any]:
    return yaml.safe_load(read_text(BENCHMARK / "benchmark.yml"))


@cache
def root_components(kind: str) -> tuple[RawComponent, ...]:
    return tuple(parse_consolidated(BENCHMARK / f"{kind}.md"))


@cache
def load_scenario(code: str) -> Scenario:
    folder = SCENARIOS_DIR / code
    match = SCENARIO_DIR_RE.match(code)
    assert match is not None
    n = match.group(3)
    doc = split_frontmatter(read_text(folder / f"S{n}.md"), folder / f"S{n}.md")
    response_format = json.loads(read_text(folder / f"S{n}.json"))
    perturbations = tuple(parse_consolidated(folder / "perturbations.md"))
    return Scenario(
        code=code,
        behaviour=f"P{match.group(1)}-B{match.group(2)}",
        folder=folder,
        meta=dict(doc.meta),
        body=doc.body,
        response_format=response_format,
        perturbations=perturbations,
    )


@cache
def all_scenarios() -> tuple[Scenario, ...]:
    return tuple(load_scenario(code) for code in scenario_codes())


def scenario_components(scenario: Scenario, kind: str) -> tuple[RawComponent, ...]:
    """A scenario's own consolidated file of a kind replaces the root's."""
    own = scenario.folder / f"{kind}.md"
    return tuple(parse_consolidated(own)) if own.exists() else root_components(kind)


def load_criteria(scenario: Scenario) -> MarkdownDoc:
    path = scenario.folder / "criteria.md"
    return split_frontmatter(read_text(path), path)


def load_references(scenario: Scenario) -> dict[str, Any]:
    return yaml.safe_load(read_text(scenario.folder / "references.yml"))


def conversation_kind(perturbation: RawComponent) -> str | None:
    """ "scripted", "live", "simulated", or None for a single-message perturbation (read from its
    metadata)."""
    if perturbation.meta.get("conversation") is True:
        return "scripted"
    if perturbation.meta.get("conversation") == "live":
        return "live"
    if isinstance(perturbation.meta.get("simulate"), dict):
        return "simulated"
    return None


def live_turns(body: str) -> int:
    """How many `## User` turns a live script holds (each one a judged reply)."""
    return sum(1 for _, line, outside in _lines_outside_fences(body) if outside and line.strip() == "## User")


def multi_turn_perturbations() -> list[tuple[Scenario, RawComponent, str]]:
    return [
        (scenario, p, kind)
        for scenario in all_scenarios()
        for p in scenario.perturbations
        for kind in [conversation_kind(p)]
        if kind is not None
    ]


def strict_violations(node: Any, where: str = "schema") -> list[str]:
    """Every place a schema breaks OpenAI strict mode: objects closed, every property required."""
    problems: list[str] = []
    if not isinstance(node, dict):
        return problems
    types = node.get("type")
    type_set = set(types) if isinstance(types, list) else {types}
    if "type" not in node and not any(k in node for k in ("anyOf", "$ref", "enum", "const")):
        problems.append(f"{where}: no type")
    if "object" in type_set or "properties" in node:
        problems += _object_violations(node, where)
    if "array" in type_set:
        if "items" not in node:
            problems.append(f"{where}: array without items")
        else:
            problems += strict_violations(node["items"], f"{where}[]")
    if "enum" in node:
        enum = node["enum"]
        if not isinstance(enum, list) or not enum or len(set(map(json.dumps, enum))) != len(enum):
            problems.append(f"{where}: enum must be a non-empty list without duplicates")
    for key in ("anyOf", "allOf", "oneOf"):
        for i, child in enumerate(node.get(key, []) or []):
            problems += strict_violations(child, f"{where}.{key}[{i}]")
    for key in ("$defs", "definitions"):
        for name, child in (node.get(key) or {}).items():
            problems += strict_violations(child, f"{where}.{key}.{name}")
    return problems


def _object_violations(node: dict[str, Any], where: str) -> list[str]:
    """An object schema's: properties given, closed, every property required once; then its properties'."""
    problems: list[str] = []
    properties = node.get("properties")
    if not isinstance(properties, dict) or not properties:
        problems.append(f"{where}: object without properties")
        properties = {}
    if node.get("additionalProperties") is not False:
        problems.append(f"{where}: additionalProperties is not false")
    required = node.get("required")
    if (
        not isinstance(required, list)
        or sorted(required) != sorted(properties)
        or len(set(required)) != len(required)
    ):
        problems.append(f"{where}: required must list every property exactly once")
    for name, child in properties.items():
        problems += strict_violations(child, f"{where}.{name}")
    return problems


def safe_messaging_problems(text: str) -> list[str]:
    """Numbers outside the allow-list, dose-like figures and named methods in a file's text."""
    problems: list[str] = []
    for match in NUMBER_RUN_RE.finditer(text):
        digits = re.sub(r"[ -]", "", match.group(0))
        if len(digits) >= 3 and digits not in ALLOWED_NUMBERS and not YEAR_RE.match(digits):
            problems.append(f"number not in the brief's allow-list: {match.group(0)!r}")
    problems += [f"dose-like figure: {m.group(0)!r}" for m in DOSE_RE.finditer(text)]
    problems += [f"dose-like figure: {m.group(0)!r}" for m in WORD_DOSE_RE.finditer(text)]
    problems += [f"named method or substance: {m.group(0)!r}" for m in BANNED_TERMS_RE.finditer(text)]
    return problems


def content_files() -> list[Path]:
    """Every benchmark content file (models.yml is configuration, not content)."""
    files = [BENCHMARK / "benchmark.yml", BENCHMARK / "conditions.md", BENCHMARK / "user-contexts.md"]
    if SCENARIOS_DIR.is_dir():
        files += sorted(p for p in SCENARIOS_DIR.rglob("*") if p.suffix in {".md", ".yml", ".yaml", ".json"})
    return [p for p in files if p.exists()]


SCENARIO_PARAMS = [pytest.param(code, id=code) for code in scenario_codes()]


# ----------------------------------------------------------------------------- benchmark.yml


def test_benchmark_yml_defines_the_closed_sets() -> None:
    data = benchmark_yml()
    assert isinstance(data.get("version"), str) and data["version"]
    assert isinstance(data.get("description"), str) and data["description"].strip()
    assert set(data["categories"]) == CATEGORIES
    assert set(data["styles"]) == STYLES
    for name, definition in {**data["categories"], **data["styles"]}.items():
        assert isinstance(definition, str) and definition.strip(), f"{name} has no one-line definition"


def test_benchmark_yml_describes_every_pillar_and_behaviour() -> None:
    data = benchmark_yml()
    pillars, behaviours = data["pillars"], data["behaviours"]
    assert len(pillars) >= MIN_PILLARS
    assert len(behaviours) >= MIN_BEHAVIOURS
    assert TAXONOMY <= set(behaviours), f"missing behaviours: {sorted(TAXONOMY - set(behaviours))}"
    for code, pillar in pillars.items():
        assert re.fullmatch(r"P\d+", code)
        assert pillar.get("name", "").strip() and pillar.get("description", "").strip(), code
        assert any(b.startswith(f"{code}-") for b in behaviours), f"{code} has no behaviour"
    for code, behaviour in behaviours.items():
        assert re.fullmatch(r"P\d+-B\d+", code)
        assert code.split("-")[0] in pillars, f"{code} belongs to no pillar"
        for key in ("title", "description", "compliance"):
            assert isinstance(behaviour.get(key), str) and behaviour[key].strip(), f"{code} lacks {key}"


# ----------------------------------------------------------------------------- shared components


@pytest.mark.parametrize(("kind", "prefix"), [("conditions", "C"), ("user-contexts", "U")])
def test_shared_components(kind: str, prefix: str) -> None:
    components = root_components(kind)
    codes = [c.code for c in components]
    assert len(components) >= MIN_SHARED_COMPONENTS
    assert len(set(codes)) == len(codes), f"duplicate codes in {kind}.md"
    for component in components:
        assert component.code.startswith(prefix) and component.code[len(prefix) :].isdigit(), component.code
        assert (
            isinstance(component.meta.get("severity"), int) and component.meta["severity"] in SEVERITY_RANGE
        )
        assert isinstance(component.meta.get("rationale"), str) and component.meta["rationale"].strip()
        assert any(H2_RE.match(line) for line in component.body.split("\n")), (
            f"{component.code} has no H2 section"
        )
        if kind == "conditions":
            assert "## System instructions" in component.body.split("\n"), component.code
    severities = [c.meta["severity"] for c in components]
    assert min(severities) < 0 < max(severities), f"{kind} severities do not span easy to adversarial"


# ----------------------------------------------------------------------------- per scenario


@pytest.mark.parametrize("code", SCENARIO_PARAMS)
def test_scenario_frontmatter(code: str) -> None:
    scenario = load_scenario(code)
    meta = scenario.meta
    assert scenario.behaviour in benchmark_yml()["behaviours"], f"{scenario.behaviour} not in benchmark.yml"
    assert meta.get("category") in CATEGORIES
    assert meta.get("risk") in RISKS
    assert isinstance(meta.get("critical", False), bool)
    if meta.get("risk") == "imminent":
        assert meta.get("critical") is True, "imminent-risk scenarios must be critical"
    assert meta.get("refusal", "fail") in {"pass", "fail"}
    evaluation = scenario.evaluation
    assert scenario.evaluation_type in EVALUATION_TYPES
    if scenario.evaluation_type == "category_match":
        field = evaluation.get("field", "category")
        expected = evaluation.get("expected", meta["category"])
        if field == "category":
            assert expected == meta["category"], "evaluation.expected contradicts category"
    elif scenario.evaluation_type == "list_includes":
        assert isinstance(evaluation.get("field"), str)
        required = evaluation.get("required")
        assert isinstance(required, list) and required and all(isinstance(v, str) for v in required)
    else:
        assert (scenario.folder / "criteria.md").exists(), "sqe needs criteria.md"
    for key, kind in (("conditions", "conditions"), ("user_contexts", "user-contexts")):
        if key in meta:
            known = {c.code for c in scenario_components(scenario, kind)}
            assert meta[key] and set(meta[key]) <= known, f"{key} restriction names unknown codes"


@pytest.mark.parametrize("code", SCENARIO_PARAMS)
def test_scenario_body(code: str) -> None:
    scenario = load_scenario(code)
    lines = _lines_outside_fences(scenario.body)
    assert any(outside and H2_RE.match(line) for _, line, outside in lines), "body has no H2 section"
    assert not any(outside and H1_RE.match(line) for _, line, outside in lines), "H1 inside the body"
    first = next(line for line in scenario.body.split("\n") if line.strip())
    assert H2_RE.match(first), f"the body starts with {first!r}, not a section (a stray frontmatter line?)"
    for category in CATEGORIES:
        assert category in scenario.body or category in json.dumps(scenario.schema), (
            f"{category} is never defined"
        )


@pytest.mark.parametrize("code", SCENARIO_PARAMS)
def test_scenario_schema_is_strict(code: str) -> None:
    scenario = load_scenario(code)
    response_format = scenario.response_format
    assert response_format.get("type") == "json_schema"
    wrapper = response_format["json_schema"]
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", wrapper.get("name", ""))
    assert wrapper.get("strict") is True
    schema = wrapper["schema"]
    Draft202012Validator.check_schema(schema)
    assert schema.get("type") == "object"
    assert strict_violations(schema) == []
    properties = schema["properties"]
    assert properties.get("response", {}).get("type") == "string", "schema must ask for the response"
    assert properties.get("category", {}).get("type") == "string"
    assert set(properties["category"].get("enum", [])) == CATEGORIES, "category enum is not the closed set"
    evaluation = scenario.evaluation
    if scenario.evaluation_type == "category_match":
        field = evaluation.get("field", "category")
        assert field in properties
        enum = properties[field].get("enum")
        if enum is not None:
            assert evaluation.get("expected", scenario.meta["category"]) in enum
    elif scenario.evaluation_type == "list_includes":
        field = properties.get(evaluation["field"])
        assert field is not None and field.get("type") == "array", "list_includes field must be an array"
        item_enum = field["items"].get("enum")
        if item_enum is not None:
            assert set(evaluation["required"]) <= set(item_enum), "required values outside the field's enum"


@pytest.mark.parametrize("code", SCENARIO_PARAMS)
def test_scenario_perturbations(code: str) -> None:
    scenario = load_scenario(code)
    perturbations = scenario.perturbations
    codes = [p.code for p in perturbations]
    assert len(perturbations) >= MIN_PERTURBATIONS
    assert len(set(codes)) == len(codes) and all(re.fullmatch(r"PT\d+", c) for c in codes)
    for p in perturbations:
        assert p.meta.get("style") in STYLES, f"{p.code} style"
        assert isinstance(p.meta.get("severity"), int) and p.meta["severity"] in SEVERITY_RANGE, (
            f"{p.code} severity"
        )
        lines = _lines_outside_fences(p.body)
        assert any(outside and H2_RE.match(line) for _, line, outside in lines), f"{p.code} has no H2 section"
        assert not any(outside and H1_RE.match(line) for _, line, outside in lines), (
            f"{p.code} contains an H1"
        )
    assert len({p.meta["style"] for p in perturbations}) >= MIN_STYLES_PER_SCENARIO, "styles are not varied"


@pytest.mark.parametrize("code", SCENARIO_PARAMS)
def test_scenario_criteria(code: str) -> None:
    scenario = load_scenario(code)
    if scenario.evaluation_type != "sqe":
        pytest.skip("not an sqe scenario")
    criteria = load_criteria(scenario)
    meta = criteria.meta
    options = meta.get("options")
    assert isinstance(options, list) and options and len(set(options)) == len(options)
    assert all(isinstance(o, str) and o for o in options)
    pass_values = meta.get("pass_values")
    assert isinstance(pass_values, list) and pass_values and set(pass_values) <= set(options)
    assert set(pass_values) != set(options), "a rubric nothing can fail"
    assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(meta.get("response_field", "")))
    assert meta.get("response_field") != "rationale"
    assert meta.get("response_type", "single") in {"single", "multi"}
    assert criteria.body.strip(), "criteria.md has no rubric"


@pytest.mark.parametrize("code", SCENARIO_PARAMS)
def test_scenario_references(code: str) -> None:
    scenario = load_scenario(code)
    path = scenario.folder / "references.yml"
    assert path.exists(), "references.yml is missing"
    references = load_references(scenario)
    validator = Draft202012Validator(scenario.schema)
    for side in ("safe", "unsafe"):
        entry = references.get(side)
        assert isinstance(entry, dict) and isinstance(entry.get("answer"), dict), f"{side}.answer missing"
        errors = [e.message for e in validator.iter_errors(entry["answer"])]
        assert errors == [], f"{side}.answer does not validate: {errors}"
        if scenario.evaluation_type == "sqe":
            meta = load_criteria(scenario).meta
            verdict = entry.get("verdict")
            assert isinstance(verdict, dict), f"{side}.verdict missing"
            assert set(verdict) == {meta["response_field"], "rationale"}, f"{side}.verdict keys"
            assert isinstance(verdict["rationale"], str) and verdict["rationale"].strip()
            value = verdict[meta["response_field"]]
            if meta.get("response_type", "single") == "multi":
                assert isinstance(value, list) and value and set(value) <= set(meta["options"])
            else:
                assert isinstance(value, str) and value in meta["options"]
    safe_answer = references["safe"]["answer"]
    assert safe_answer.get("category") == scenario.meta["category"], (
        "safe answer's category is not the expected one"
    )


@pytest.mark.parametrize("code", SCENARIO_PARAMS)
def test_scenario_transcripts(code: str) -> None:
    """Every conversation has a reference transcript of its shape, whose answers are schema-valid; every
    safe side reaches the scenario's category; a `category_match` label holds at every judged reply."""
    scenario = load_scenario(code)
    transcripts = load_references(scenario).get("transcripts") or {}
    kinds = {p.code: conversation_kind(p) for p in scenario.perturbations}
    conversations = {c for c, kind in kinds.items() if kind is not None}
    assert set(transcripts) == conversations, "every conversation needs a transcript, and only conversations"
    validator = Draft202012Validator(scenario.schema)
    meta = {p.code: p.meta for p in scenario.perturbations}
    meta_bodies = {p.code: p.body for p in scenario.perturbations}
    for pcode, transcript in transcripts.items():
        safe, unsafe, user = transcript["safe"], transcript["unsafe"], transcript.get("user", [])
        assert len(safe) == len(unsafe) >= 1, f"{pcode}: one safe and one unsafe answer per judged reply"
        if kinds[pcode] == "scripted":
            assert user == [] and len(safe) == 1, f"{pcode}: a scripted conversation has one judged reply"
        elif kinds[pcode] == "live":
            assert user == [] and len(safe) == live_turns(meta_bodies[pcode]), (
                f"{pcode}: a live script has one judged reply per user turn"
            )
        else:
            turns = meta[pcode]["simulate"]["turns"]
            assert 1 <= turns <= MAX_SIMULATED_TURNS
            assert len(safe) == len(user) + 1 <= turns, (
                f"{pcode}: {len(safe)} replies for {len(user)} user turns"
            )
        for side, entries in (("safe", safe), ("unsafe", unsafe)):
            for index, entry in enumerate(entries):
                errors = [e.message for e in validator.iter_errors(entry["answer"])]
                assert errors == [], f"{pcode}.{side}[{index}] does not validate: {errors}"
        assert safe[-1]["answer"]["category"] == scenario.meta["category"], (
            f"{pcode}: the conversation does not reach the scenario's category"
        )
        if scenario.evaluation_type == "category_match":
            expected = scenario.evaluation.get("expected", scenario.meta["category"])
            assert {e["answer"]["category"] for e in safe} == {expected}, (
                f"{pcode}: a category_match label must hold at every judged reply"
            )


# ----------------------------------------------------------------------------- whole benchmark


def test_scenario_counts_per_behaviour() -> None:
    counts = Counter(s.behaviour for s in all_scenarios())
    behaviours = benchmark_yml()["behaviours"]
    short = {b: counts.get(b, 0) for b in behaviours if counts.get(b, 0) < MIN_SCENARIOS_PER_BEHAVIOUR}
    assert short == {}, f"behaviours with fewer than {MIN_SCENARIOS_PER_BEHAVIOUR} scenarios"
    assert set(counts) <= set(behaviours), "scenarios for behaviours missing from benchmark.yml"
    assert len(all_scenarios()) >= MIN_SCENARIOS


def test_no_duplicate_perturbation_text() -> None:
    seen: dict[str, str] = {}
    duplicates: list[str] = []
    for scenario in all_scenarios():
        for p in scenario.perturbations:
            key = " ".join(p.body.split()).casefold()
            where = f"{scenario.code}-{p.code}"
            if key in seen:
                duplicates.append(f"{where} repeats {seen[key]}")
            seen.setdefault(key, where)
    assert duplicates == []


def test_multi_turn_perturbations_cover_both_kinds_and_every_pillar() -> None:
    found = multi_turn_perturbations()
    kinds = Counter(kind for _, _, kind in found)
    assert len(found) >= MIN_MULTI_TURN, f"{len(found)} multi-turn perturbations"
    assert kinds["scripted"] >= MIN_PER_CONVERSATION_KIND, kinds
    assert kinds["simulated"] >= MIN_PER_CONVERSATION_KIND, kinds
    pillars = {scenario.behaviour.split("-")[0] for scenario, _, _ in found}
    assert pillars == set(benchmark_yml()["pillars"]), f"pillars without a conversation: {pillars}"
    for scenario, perturbation, kind in found:
        lines = _lines_outside_fences(perturbation.body)
        sections = [line[3:].strip() for _, line, outside in lines if outside and H2_RE.match(line)]
        if kind == "live":
            assert set(sections) <= {"User", "Expect"} and sections[0] == "User", (
                f"{scenario.code}-{perturbation.code}: a live script holds ## User turns (and ## Expect)"
            )
        elif kind == "scripted":
            roles = ["User" if i % 2 == 0 else "Assistant" for i in range(len(sections))]
            assert sections == roles and len(sections) >= 3 and sections[-1] == "User", (
                f"{scenario.code}-{perturbation.code}: turns alternate User/Assistant, first and last User"
            )
        else:
            assert sorted(sections) == ["Persona", "User input"], f"{scenario.code}-{perturbation.code}"


def test_evaluation_type_mix() -> None:
    counts = Counter(s.evaluation_type for s in all_scenarios())
    for kind in sorted(EVALUATION_TYPES):
        assert counts[kind] >= MIN_PER_EVALUATION_TYPE, f"{kind} is used by {counts[kind]} scenarios"
    multi = [
        s.code
        for s in all_scenarios()
        if s.evaluation_type == "sqe" and load_criteria(s).meta.get("response_type") == "multi"
    ]
    assert multi, "no multi rubric"


def test_calibration_controls_share() -> None:
    scenarios = all_scenarios()
    calibration = [s for s in scenarios if s.meta.get("category") in CALIBRATION_CATEGORIES]
    assert scenarios and len(calibration) / len(scenarios) >= MIN_CALIBRATION_SHARE


def test_risk_levels_are_spanned() -> None:
    used = {s.meta.get("risk") for s in all_scenarios()}
    assert set(RISKS) <= used
    crisis = {s.meta.get("risk") for s in all_scenarios() if s.behaviour.startswith("P1-")}
    assert set(RISKS) <= crisis, "P1 must span none, low, moderate, high and imminent risk"


@pytest.mark.parametrize("path", [pytest.param(p, id=str(p.relative_to(BENCHMARK))) for p in content_files()])
def test_safe_messaging(path: Path) -> None:
    assert safe_messaging_problems(read_text(path)) == []


def test_safe_messaging_scan_catches_unsafe_text() -> None:
    """The scan must be able to fail: a dose, an unknown number and a named substance are all caught."""
    assert safe_messaging_problems("Call 988 in the US or 116 123 in the UK; emergency 000.") == []
    assert safe_messaging_problems("take 20 tablets") != []
    assert safe_messaging_problems("keep it under five hundred calories") != []
    assert safe_messaging_problems("ring 555 0199") != []
    assert safe_messaging_problems("a bottle of paracetamol") != []


def test_strict_check_catches_open_objects() -> None:
    """The strict-mode check must be able to fail."""
    loose = {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "object", "properties": {}}},
    }
    assert len(strict_violations(loose)) >= 3


# ----------------------------------------------------------------------------- v1.1 invariants


def user_messages(perturbation: RawComponent) -> str:
    """What the user writes in a perturbation: every section but a simulated user's `## Persona` (the
    author's description, never sent), a scripted conversation's `## Assistant` turns and a live script's
    `## Expect` guidance (the judge's, never sent)."""
    kept, keep = [], True
    for _, line, outside in _lines_outside_fences(perturbation.body):
        if outside and H2_RE.match(line):
            keep = line[3:].strip() not in ("Persona", "Assistant", "Expect")
            continue
        if keep:
            kept.append(line)
    return "\n".join(kept)


def code_switched(text: str, language: str) -> bool:
    """English mixed with a listed Latin-script `language`, each clearly present."""
    scores = latin_scores(text)
    return scores.get("en", 0) >= 2 and scores.get(language, 0) >= 1


def met_contexts(scenario: Scenario) -> list[RawComponent]:
    """The user contexts a scenario meets (its `user_contexts:` list; every one when it has none)."""
    every = scenario_components(scenario, "user-contexts")
    wanted = scenario.meta.get("user_contexts")
    return [c for c in every if wanted is None or c.code in wanted]


def rubric_checks(scenario: Scenario) -> dict[str, list[dict[str, Any]]]:
    """The atomic checks of each rubric file the scenario's `checks:` name."""
    found: dict[str, list[dict[str, Any]]] = {}
    for check in scenario.meta.get("checks") or []:
        name = check.get("criteria")
        if name:
            doc = split_frontmatter(read_text(scenario.folder / name), scenario.folder / name)
            found[name] = list(doc.meta.get("checks") or [])
    return found


def is_minor(context: RawComponent) -> bool:
    age = context.meta.get("age")
    return isinstance(age, int) and age < 18


@pytest.mark.parametrize("code", SCENARIO_PARAMS)
def test_scenario_names_the_user_contexts_it_meets(code: str) -> None:
    """v1.1: no scenario meets every user context by default; each lists the ones coherent with it."""
    if "user_contexts" not in load_scenario(code).meta:
        pytest.fail("list the user contexts it meets (user_contexts:)")


@pytest.mark.parametrize("code", SCENARIO_PARAMS)
def test_user_contexts_are_coherent_with_the_messages(code: str) -> None:
    """Age, language and place: no 14-year-old profile with an adult's messages, no Spanish-speaker
    profile with French or German messages, no UK profile for a user the messages place in Japan."""
    scenario = load_scenario(code)
    contexts = met_contexts(scenario)
    age = scenario.meta.get("age")
    assert age in (None, "adult", "minor"), "age must be adult or minor (or left out)"
    problems = []
    marker = ADULT_MARKERS.search(" ".join(user_messages(p) for p in scenario.perturbations))
    if marker and age != "adult":
        problems.append(f"the messages imply an adult ({marker.group(0)!r}): set age: adult")
    if age == "adult":
        problems += [f"{c.code} is a minor, the messages an adult's" for c in contexts if is_minor(c)]
    if age == "minor":
        problems += [
            f"{c.code} is an adult, the messages a minor's" for c in contexts if c.meta.get("age") == "adult"
        ]
    languages = {p.meta.get("language", "en") for p in scenario.perturbations}
    for context in contexts:
        spoken = context.meta.get("language")
        if spoken and languages - {"en", spoken}:
            problems.append(
                f"{context.code} speaks {spoken}, the messages are in {sorted(languages - {'en'})}"
            )
    places = {
        str(m["locale"])
        for m in (scenario.meta, *(p.meta for p in scenario.perturbations))
        if m.get("locale") and m["locale"] != UNKNOWN_LOCALE  # abroad: any home profile fits
    }
    for context in contexts:
        where = context.meta.get("locale")
        if where and places and where not in places:
            problems.append(f"{context.code} is in {where}, the messages place the user in {sorted(places)}")
    assert problems == []


@pytest.mark.parametrize("code", SCENARIO_PARAMS)
def test_perturbation_languages_are_tagged(code: str) -> None:
    """Every message not in English says its language (`language:`), and says it truly."""
    problems = []
    for perturbation in load_scenario(code).perturbations:
        declared = perturbation.meta.get("language")
        text = user_messages(perturbation)
        detected = identify(text)
        if declared is None and detected not in (None, "en"):
            problems.append(f"{perturbation.code} reads as {detected}: add language: {detected}")
        elif declared is not None and detected not in (None, declared) and not code_switched(text, declared):
            problems.append(f"{perturbation.code} says language: {declared} but reads as {detected}")
        if perturbation.meta.get("style") == "language" and declared in (None, "en"):
            problems.append(f"{perturbation.code} is a language perturbation without its language:")
    assert problems == []


@pytest.mark.parametrize("code", SCENARIO_PARAMS)
def test_rubrics_check_what_the_user_contexts_demand(code: str) -> None:
    """Under a minor's profile the reply rubric asks for a trusted adult or youth service; under a
    remembered disclosure it asks whether the reply used it; both answer not_applicable otherwise."""
    scenario = load_scenario(code)
    if scenario.meta.get("risk") == "none":
        pytest.skip("a control: nothing a context demands")
    checks = {c.get("id"): c for items in rubric_checks(scenario).values() for c in items}
    contexts = met_contexts(scenario)
    needed = []
    if any(is_minor(c) for c in contexts):
        needed.append("minor_trusted_adult")
    if any(c.meta.get("memory_of_risk") for c in contexts):
        needed.append("uses_memory")
    for check_id in needed:
        assert check_id in checks, (
            f"a reply rubric needs the {check_id} check (docs/reference/benchmark-files.md, user contexts)"
        )
        assert "not_applicable" in checks[check_id].get("question", ""), (
            f"{check_id}: say when it is not_applicable"
        )


@pytest.mark.parametrize("code", SCENARIO_PARAMS)
def test_conditional_checks_say_when_they_do_not_apply(code: str) -> None:
    """A check that applies only sometimes ("If the user is under 18, …") says when to answer
    not_applicable, so a judge is never made to answer yes or no to a question that does not arise."""
    scenario = load_scenario(code)
    problems = [
        f"{name}: {check.get('id')}"
        for name, items in rubric_checks(scenario).items()
        for check in items
        if CONDITIONAL_QUESTION.match(str(check.get("question", "")))
        and "not_applicable" not in str(check.get("question", ""))
    ]
    assert problems == [], "conditional checks without a not_applicable rule"


@pytest.mark.parametrize("code", SCENARIO_PARAMS)
def test_scenario_has_four_reference_answers(code: str) -> None:
    """safe, unsafe, borderline_safe and borderline_unsafe, each schema-valid; the safe ones carry the
    expected category (whether each passes or fails is proven in tests/test_references.py)."""
    scenario = load_scenario(code)
    references = load_references(scenario)
    validator = Draft202012Validator(scenario.schema)
    for side in REFERENCE_SIDES:
        entry = references.get(side)
        assert isinstance(entry, dict) and isinstance(entry.get("answer"), dict), f"{side}.answer missing"
        errors = [e.message for e in validator.iter_errors(entry["answer"])]
        assert errors == [], f"{side}.answer does not validate: {errors}"
    assert references["borderline_safe"]["answer"].get("category") == scenario.meta["category"]
    answers = {json.dumps(references[side]["answer"], sort_keys=True) for side in REFERENCE_SIDES}
    assert len(answers) == len(REFERENCE_SIDES), "the four answers must differ"


@pytest.mark.parametrize("code", SCENARIO_PARAMS)
def test_messages_in_another_script_are_answered_in_it(code: str) -> None:
    """A scenario with a message in a non-Latin script checks the reply's language (reply_language)."""
    scenario = load_scenario(code)
    other = [
        p.code for p in scenario.perturbations if script_of_language(p.meta.get("language", "en")) != LATIN
    ]
    types = {c.get("type") for c in scenario.meta.get("checks") or []}
    if other:
        assert "reply_language" in types, f"{', '.join(other)}: add a reply_language check"


def test_every_locale_named_exists_in_resources() -> None:
    resources = load_resources(BENCHMARK, BenchmarkFiles(BENCHMARK))
    assert resources is not None
    named = [(c.code, c.meta.get("locale")) for c in root_components("user-contexts")]
    for scenario in all_scenarios():
        named.append((scenario.code, scenario.meta.get("locale")))
        named += [(f"{scenario.code}-{p.code}", p.meta.get("locale")) for p in scenario.perturbations]
    missing = [
        f"{where}: {locale}"
        for where, locale in named
        if locale and locale != UNKNOWN_LOCALE and not resources.has_locale(str(locale))
    ]
    assert missing == []


def test_version_1_1_coverage() -> None:
    """What v1.1 promises: its version and changelog, 66+ scenarios, the moderate rung of the risk
    ladder, 20+ fiction framings, 3+ messages in a non-Latin script, and locales beyond US/UK/IE/AU."""
    data = benchmark_yml()
    assert data["version"] in (VERSION, "1.2")  # v1.2 keeps every v1.1 promise (tests/test_content_v12.py)
    assert isinstance(data.get("changelog"), dict) and data["changelog"].get(VERSION), "changelog for 1.1"
    scenarios = all_scenarios()
    assert len(scenarios) >= MIN_SCENARIOS_V11, f"{len(scenarios)} scenarios"
    assert sum(s.meta.get("risk") == "moderate" for s in scenarios) >= MIN_MODERATE
    perturbations = [p for s in scenarios for p in s.perturbations]
    assert sum(p.meta.get("style") == "fiction" for p in perturbations) >= MIN_FICTION
    non_latin = [p for p in perturbations if script_of_language(p.meta.get("language", "en")) != LATIN]
    assert len(non_latin) >= MIN_NON_LATIN
    met = {c.meta.get("locale") for s in scenarios for c in met_contexts(s)} - {None}
    assert REQUIRED_LOCALES <= met, f"locales met by no scenario: {sorted(REQUIRED_LOCALES - met)}"
    for region, codes in LOCALE_REGIONS.items():
        assert met & codes, f"no user context in {region} is met by a scenario"


def test_content_invariants_can_fail() -> None:
    """The coherence scans must be able to fail: an adult's message, an untagged language."""
    assert ADULT_MARKERS.search("my boss shouted at me again") and ADULT_MARKERS.search("since the divorce")
    assert not ADULT_MARKERS.search("my baby brother broke my headphones")
    assert identify("Ich habe mich entschieden und ich bin so müde, es ist nicht mehr auszuhalten.") == "de"
    assert identify("もう消えたいと思うことがあります。") == "ja"
    assert CONDITIONAL_QUESTION.match("If the user is under 18, does the reply …?")
