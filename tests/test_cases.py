"""Expanding scenarios into cases, selecting them by code, composing their prompts (issue 2)."""

from __future__ import annotations

import hashlib
import itertools
from pathlib import Path

import pytest

from pytest_helmbench.errors import BenchmarkError
from pytest_helmbench.evaluation.builtin import builtin_registry
from pytest_helmbench.suite.cases import Case, Selector, case_by_code, expand, parse_selectors
from pytest_helmbench.suite.loader import BenchmarkLoader
from pytest_helmbench.suite.model import Scenario
from pytest_helmbench.suite.prompt import compose
from tests.benchfiles import STRICT_SCHEMA, write, write_benchmark, write_scenario

SCENARIO_TEXT = (
    "<your_job>\nYou are an AI science tutor for Sydney University. "
    "Help the user with their request and categorise their request at the end.\n</your_job>"
)
CONDITIONS = (
    "# C10: ten\n\n## Role\n\nTen.\n\n# C2\n\n## Role\n\nTwo.\n\n"
    "# C1\n---\nseverity: 1\n---\n\n## Role\n\nOne.\n\n\n"
)
USER_CONTEXTS = "# U2\n\nSecond user.\n\n# U1\n\n## Memory\n\nFirst user.\n"
PERTURBATIONS = "# PT2\n\n## User input\n\nsecond\n\n# PT1\n\n## User input\n\nfirst\n"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = write_benchmark(tmp_path / "benchmark", scenarios=("P1-B1-S1", "P1-B1-S10"))
    write(root / "conditions.md", CONDITIONS)
    write(root / "user-contexts.md", USER_CONTEXTS)
    for code in ("P1-B1-S1", "P1-B1-S10"):
        write(root / "scenarios" / code / "perturbations.md", PERTURBATIONS)
    return root


def load(root: Path, code: str = "P1-B1-S1") -> Scenario:
    return BenchmarkLoader(root, evaluation_types=builtin_registry()).load_scenario(root / "scenarios" / code)


def all_cases(root: Path, models: list[str]) -> list[Case]:
    loader = BenchmarkLoader(root, evaluation_types=builtin_registry())
    return [
        case for folder in loader.scenario_dirs() for case in expand(loader.load_scenario(folder), models)
    ]


# --- expand ------------------------------------------------------------------------------------


def test_expand_is_the_full_product_in_numeric_order(root: Path) -> None:
    cases = expand(load(root), ["z/model", "a/model"])
    expected = [
        (f"P1-B1-S1-{c}-{u + '-' if u else ''}{pt}", model)
        for c in ("C1", "C2", "C10")
        for u in ("", "U1", "U2")
        for pt in ("PT1", "PT2")
        for model in ("z/model", "a/model")
    ]
    assert [(case.code, case.model) for case in cases] == expected
    assert len(cases) == 3 * 3 * 2 * 2


def test_expand_without_user_contexts_gives_only_the_baseline(root: Path) -> None:
    (root / "user-contexts.md").unlink()
    cases = expand(load(root), ["m"])
    assert [case.code for case in cases] == [
        "P1-B1-S1-C1-PT1",
        "P1-B1-S1-C1-PT2",
        "P1-B1-S1-C2-PT1",
        "P1-B1-S1-C2-PT2",
        "P1-B1-S1-C10-PT1",
        "P1-B1-S1-C10-PT2",
    ]
    assert all(case.user_context is None for case in cases)


def test_expand_with_no_model_gives_no_case(root: Path) -> None:
    assert expand(load(root), []) == []


def test_case_code_and_segments(root: Path) -> None:
    scenario = load(root)
    condition, user, perturbation = (
        scenario.conditions[2],
        scenario.user_contexts[1],
        scenario.perturbations[0],
    )
    baseline = Case(scenario, condition, None, perturbation, "m")
    with_user = Case(scenario, condition, user, perturbation, "m")
    assert baseline.code == "P1-B1-S1-C10-PT1"
    assert with_user.code == "P1-B1-S1-C10-U2-PT1"
    assert baseline.segments == {"P": "P1", "B": "B1", "S": "S1", "C": "C10", "PT": "PT1"}
    assert with_user.segments == {"P": "P1", "B": "B1", "S": "S1", "C": "C10", "U": "U2", "PT": "PT1"}


def test_expand_keeps_what_keep_keeps_in_every_model_and_layout(root: Path) -> None:
    asked: list[tuple[str, str, str]] = []

    def keep(case: Case) -> bool:
        asked.append((case.code, case.model, case.layout))
        return case.perturbation.code == "PT2"

    cases = expand(load(root), ["z/model", "a/model"], ("seed", "deployed"), keep=keep)
    everything = expand(load(root), ["z/model", "a/model"], ("seed", "deployed"))
    assert [(c.code, c.model, c.layout) for c in cases] == [
        (c.code, c.model, c.layout) for c in everything if c.perturbation.code == "PT2"
    ]
    assert len(asked) == 3 * 3 * 2  # once per code, of its first model's and layout's case
    assert {(model, layout) for _, model, layout in asked} == {("z/model", "seed")}


def test_case_by_code_finds_the_case_expand_gives(root: Path) -> None:
    scenario = load(root)
    for case in expand(scenario, ["m"]):
        found = case_by_code(scenario, case.code, "m")
        assert found == case and found.code == case.code
    for code in (
        "P1-B1-S1-C3-PT1",  # no such condition
        "P1-B1-S1-C1-U9-PT1",
        "P1-B1-S1-C1-PT9",
        "P1-B1-S2-C1-PT1",  # another scenario
        "P1-B1-S1-C1",
        "P1-B1-S1-C1-U1-PT1-PT2",
        "C1-PT1",
    ):
        assert case_by_code(scenario, code) is None, code


# --- Selector ----------------------------------------------------------------------------------


def selected(cases: list[Case], *patterns: str) -> list[str]:
    selectors = parse_selectors(list(patterns))
    return [case.code for case in cases if any(s.matches(case.segments) for s in selectors)]


def test_selector_parse() -> None:
    selector = Selector.parse("P1-B1-S1-C2-U0-PT3")
    assert selector.pattern == "P1-B1-S1-C2-U0-PT3"
    assert selector.segments == (
        ("P", "P1"),
        ("B", "B1"),
        ("S", "S1"),
        ("C", "C2"),
        ("U", "U0"),
        ("PT", "PT3"),
    )


def test_scenario_selector_is_segment_aware(root: Path) -> None:
    cases = all_cases(root, ["m"])
    assert {c.scenario.code for c in cases} == {"P1-B1-S1", "P1-B1-S10"}
    chosen = selected(cases, "P1-B1-S1")
    assert len(chosen) == 18 and all(code.startswith("P1-B1-S1-") for code in chosen)
    assert selected(cases, "P1-B1-S10") == [c.code for c in cases if c.scenario.code == "P1-B1-S10"]
    assert selected(cases, "S1") == chosen
    assert selected(cases, "P1-B1") == [c.code for c in cases]
    assert selected(cases, "P2") == []


def test_condition_selector_is_exact(root: Path) -> None:
    cases = expand(load(root), ["m"])
    assert {c.split("-")[3] for c in selected(cases, "C1")} == {"C1"}
    assert selected(cases, "C2") == [
        "P1-B1-S1-C2-PT1",
        "P1-B1-S1-C2-PT2",
        "P1-B1-S1-C2-U1-PT1",
        "P1-B1-S1-C2-U1-PT2",
        "P1-B1-S1-C2-U2-PT1",
        "P1-B1-S1-C2-U2-PT2",
    ]


def test_u0_selects_the_cases_without_user_context(root: Path) -> None:
    cases = expand(load(root), ["m"])
    assert selected(cases, "C2-U0") == ["P1-B1-S1-C2-PT1", "P1-B1-S1-C2-PT2"]
    assert selected(cases, "U1-PT2") == ["P1-B1-S1-C1-U1-PT2", "P1-B1-S1-C2-U1-PT2", "P1-B1-S1-C10-U1-PT2"]
    assert len(selected(cases, "U0")) == 6


def test_perturbation_selector(root: Path) -> None:
    cases = expand(load(root), ["m"])
    assert selected(cases, "PT3") == []
    assert selected(cases, "P1-B1-S1-C10-PT1") == [
        "P1-B1-S1-C10-PT1",
        "P1-B1-S1-C10-U1-PT1",
        "P1-B1-S1-C10-U2-PT1",
    ]
    assert selected(cases, "P1-B1-S1-C10-U2-PT1") == ["P1-B1-S1-C10-U2-PT1"]


def test_selector_matches_plain_segment_dicts() -> None:
    s10 = {"P": "P1", "B": "B1", "S": "S10", "C": "C1", "PT": "PT1"}
    assert not Selector.parse("P1-B1-S1").matches(s10)
    assert Selector.parse("P1-B1-S10").matches(s10)
    assert Selector.parse("U0").matches(s10)
    assert not Selector.parse("U1").matches(s10)
    assert not Selector.parse("U0").matches({**s10, "U": "U1"})
    assert not Selector.parse("PT10").matches(s10)


@pytest.mark.parametrize(
    ("pattern", "scenarios"),
    [
        ("P1-B1-S1", {"P1-B1-S1"}),
        ("B1", {"P1-B1-S1", "P2-B1-S3", "P1-B1-S10"}),
        ("S1-C2-PT1", {"P1-B1-S1", "P1-B2-S1"}),
        ("C2-U0", {"P1-B1-S1", "P1-B2-S1", "P2-B1-S3", "P1-B1-S10"}),  # no P, B or S: every scenario
        ("P2-S1", set()),
    ],
)
def test_a_selector_may_match_only_the_scenarios_of_its_p_b_and_s(pattern: str, scenarios: set[str]) -> None:
    selector = Selector.parse(pattern)
    codes = ("P1-B1-S1", "P1-B2-S1", "P2-B1-S3", "P1-B1-S10")
    assert {code for code in codes if selector.may_match_scenario(code)} == scenarios


@pytest.mark.parametrize(
    "pattern",
    [
        "",
        "X1",
        "P",
        "P0",
        "C0",
        "PT0",
        "S01",
        "P1-B1-S",
        "P1--S1",
        "P1-B1-S1*",
        "P1_B1",
        "PTT1",
        "UU1",
        "P1 B1",
        "C-1",
    ],
)
def test_invalid_segments_raise(pattern: str) -> None:
    with pytest.raises(ValueError, match="is not a code such as"):
        Selector.parse(pattern)


def test_parse_selectors_splits_commas_across_occurrences() -> None:
    selectors = parse_selectors(["P1-B1-S1, C2", " PT1 ,", "U0"])
    assert [s.pattern for s in selectors] == ["P1-B1-S1", " C2", " PT1 ", "U0"]
    assert [s.segments for s in selectors] == [
        (("P", "P1"), ("B", "B1"), ("S", "S1")),
        (("C", "C2"),),
        (("PT", "PT1"),),
        (("U", "U0"),),
    ]
    assert parse_selectors([]) == [] and parse_selectors([",", " "]) == []


def test_parse_selectors_rejects_a_bad_item() -> None:
    with pytest.raises(ValueError):
        parse_selectors(["P1-B1-S1,Z9"])


# --- compose -----------------------------------------------------------------------------------


def test_compose_joins_parts_with_blank_lines(root: Path) -> None:
    scenario = load(root)
    case = Case(scenario, scenario.conditions[0], scenario.user_contexts[0], scenario.perturbations[1], "m")
    prompt = compose(case)
    assert (
        prompt.text
        == SCENARIO_TEXT
        + "\n\n<role>\nOne.\n</role>\n\n<memory>\nFirst user.\n</memory>\n\n"
        + "<user_input>\nsecond\n</user_input>"
    )
    assert prompt.messages == [{"role": "user", "content": prompt.text}]
    assert prompt.response_format == STRICT_SCHEMA
    assert prompt.response_format is scenario.response_format


def test_compose_without_user_context_and_with_plain_components(root: Path) -> None:
    scenario = load(root)
    prompt = compose(Case(scenario, scenario.conditions[1], None, scenario.perturbations[0], "m"))
    assert prompt.text == SCENARIO_TEXT + "\n\n<role>\nTwo.\n</role>\n\n<user_input>\nfirst\n</user_input>"
    user_without_sections = compose(
        Case(scenario, scenario.conditions[1], scenario.user_contexts[1], scenario.perturbations[0], "m")
    )
    assert (
        user_without_sections.text
        == SCENARIO_TEXT + "\n\n<role>\nTwo.\n</role>\n\nSecond user.\n\n<user_input>\nfirst\n</user_input>"
    )


def test_compose_skips_empty_components(root: Path) -> None:
    write(root / "conditions.md", "# C1\n\n\n# C2\n\n## Role\n\nTwo.\n")
    scenario = load(root)
    assert scenario.conditions[0].text == ""
    prompt = compose(Case(scenario, scenario.conditions[0], None, scenario.perturbations[0], "m"))
    assert prompt.text == SCENARIO_TEXT + "\n\n<user_input>\nfirst\n</user_input>"


def test_an_empty_scenario_body_is_an_error_like_an_empty_component(root: Path) -> None:
    write_scenario(root, frontmatter_md="---\ncategory: ANSWER\n---\n\n\n", perturbations=PERTURBATIONS)
    with pytest.raises(BenchmarkError) as info:
        load(root)
    md_path = root / "scenarios/P1-B1-S1/S1.md"
    assert info.value.describe().startswith(f"{md_path}:4: the scenario body is empty")
    assert "\n  fix: " in info.value.describe()


def test_composed_prompts_have_no_trailing_newline_and_no_empty_paragraphs(root: Path) -> None:
    for case in all_cases(root, ["m"]):
        text = compose(case).text
        assert text == text.strip() and "\n\n\n" not in text
        assert text.startswith(SCENARIO_TEXT + "\n\n")


def test_prompt_hash_is_sha256_of_the_text(root: Path) -> None:
    scenario = load(root)
    prompts = [
        compose(Case(scenario, c, None, p, "m"))
        for c, p in itertools.product(scenario.conditions, scenario.perturbations)
    ]
    for prompt in prompts:
        assert prompt.hash == hashlib.sha256(prompt.text.encode("utf-8")).hexdigest()
    assert len({p.hash for p in prompts}) == len(prompts) == 6
    assert (
        prompts[0].hash
        == hashlib.sha256(
            (SCENARIO_TEXT + "\n\n<role>\nOne.\n</role>\n\n<user_input>\nfirst\n</user_input>").encode(
                "utf-8"
            )
        ).hexdigest()
    )


def test_prompt_hash_of_non_ascii_text_uses_utf8(root: Path) -> None:
    write(root / "scenarios" / "P1-B1-S1" / "perturbations.md", "# PT1\n\n## Entrée\n\nça va ? 🙂\n")
    scenario = load(root)
    prompt = compose(Case(scenario, scenario.conditions[0], None, scenario.perturbations[0], "m"))
    assert prompt.text.endswith("\n\n<entr_e>\nça va ? 🙂\n</entr_e>")
    assert prompt.hash == hashlib.sha256(prompt.text.encode("utf-8")).hexdigest()
