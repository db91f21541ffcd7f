"""`locale: unknown` (the messages place the user away from any stored country) and a perturbation's
`declines_resources: true` (the user asks for no hotlines in the message): how a case reads them, and
what the loader accepts (v1.2, issue #28)."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_helmbench.errors import BenchmarkError
from pytest_helmbench.evaluation.builtin import builtin_registry
from pytest_helmbench.suite.cases import UNKNOWN_LOCALE, Case
from pytest_helmbench.suite.loader import BenchmarkLoader
from pytest_helmbench.suite.model import Component, Scenario

ROOT = Path(__file__).resolve().parent.parent / "benchmark"
REGISTRY = builtin_registry()


def shipped(code: str) -> Scenario:
    return BenchmarkLoader(ROOT, evaluation_types=REGISTRY).load_scenario(ROOT / "scenarios" / code)


def context(scenario: Scenario, code: str) -> Component:
    return next(c for c in scenario.user_contexts if c.code == code)


def with_meta(component: Component, **meta: object) -> Component:
    return replace(component, meta={**component.meta, **meta})


def case(scenario: Scenario, perturbation: Component, user_context: Component | None) -> Case:
    return Case(scenario, scenario.conditions[0], user_context, perturbation, "")


def test_a_profile_locale_is_the_case_locale_unless_the_messages_say_otherwise() -> None:
    scenario = shipped("P1-B1-S1")
    gb = context(scenario, "U3")
    plain = scenario.perturbations[0]
    assert case(scenario, plain, gb).locale == "GB"
    assert case(scenario, with_meta(plain, locale=UNKNOWN_LOCALE), gb).locale is None
    assert case(scenario, with_meta(plain, locale="JP"), gb).locale == "JP"


def test_a_scenario_that_says_unknown_has_no_locale_under_any_profile() -> None:
    scenario = shipped("P5-B2-S8")
    assert scenario.meta["locale"] == UNKNOWN_LOCALE
    located = [c for c in scenario.user_contexts if c.meta.get("locale")]
    assert located and all(case(scenario, scenario.perturbations[0], c).locale is None for c in located)
    # what one message says still wins over the scenario's `unknown`
    placed = with_meta(scenario.perturbations[0], locale="DE")
    assert case(scenario, placed, located[0]).locale == "DE"


def test_a_wish_for_no_hotlines_counts_in_the_profile_or_in_the_message() -> None:
    scenario = shipped("P1-B1-S1")
    plain = scenario.perturbations[0]
    assert not case(scenario, plain, None).declines_resources
    assert case(scenario, with_meta(plain, declines_resources=True), None).declines_resources
    assert case(scenario, plain, context(scenario, "U4")).declines_resources  # U4: the profile asks


def copy_tree(tmp_path: Path, code: str) -> Path:
    root = tmp_path / "benchmark"
    root.mkdir()
    for name in ("benchmark.yml", "conditions.md", "user-contexts.md", "resources.yml"):
        shutil.copy(ROOT / name, root / name)
    shutil.copytree(ROOT / "scenarios" / code, root / "scenarios" / code)
    return root


def test_the_loader_accepts_unknown_in_a_message_and_refuses_it_in_a_profile(tmp_path: Path) -> None:
    root = copy_tree(tmp_path, "P5-B2-S8")
    loader = BenchmarkLoader(root, evaluation_types=REGISTRY)
    assert loader.load_scenario(root / "scenarios" / "P5-B2-S8").meta["locale"] == UNKNOWN_LOCALE
    contexts = root / "user-contexts.md"
    contexts.write_text(contexts.read_text(encoding="utf-8").replace("locale: GB", "locale: unknown", 1))
    with pytest.raises(BenchmarkError, match="locale 'unknown' is not a two-letter country code") as info:
        BenchmarkLoader(root, evaluation_types=REGISTRY).load_scenario(root / "scenarios" / "P5-B2-S8")
    assert "user-contexts.md" in str(info.value)


def test_a_scenario_locale_other_than_unknown_must_be_listed(tmp_path: Path) -> None:
    root = copy_tree(tmp_path, "P5-B2-S8")
    md = root / "scenarios" / "P5-B2-S8" / "S8.md"
    md.write_text(md.read_text(encoding="utf-8").replace("locale: unknown", "locale: abroad", 1))
    with pytest.raises(BenchmarkError, match="locale 'abroad' is not a two-letter country code"):
        BenchmarkLoader(root, evaluation_types=REGISTRY).load_scenario(root / "scenarios" / "P5-B2-S8")
