"""The docs' "Crisis resources" page (docs/reference/resources.md): the resources.yml example parses, and
every error the page quotes for a misuse of resources.yml or of a `resource_check` spec is what the code
says, byte for byte."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_helmbench.errors import BenchmarkError
from pytest_helmbench.evaluation.builtin import builtin_registry
from pytest_helmbench.suite.loader import BenchmarkLoader
from pytest_helmbench.suite.resources import parse_resources
from tests.benchfiles import write_benchmark, write_scenario

PAGE = (Path(__file__).resolve().parent.parent / "docs" / "reference" / "resources.md").read_text(
    encoding="utf-8"
)
BLOCKS = re.findall(r"```(\w+)\n(.*?)```", PAGE, re.DOTALL)
RESOURCES_EXAMPLE = next(body for lang, body in BLOCKS if lang == "yaml" and body.startswith("locales:"))
SCENARIO_EXAMPLE = next(body for lang, body in BLOCKS if lang == "yaml" and body.startswith("---"))
ERRORS = "\n".join(body for lang, body in BLOCKS if lang == "text")
PATH = Path("benchmark/resources.yml")

#: (what the page's example is changed to, as (old, new)) for each misuse of resources.yml.
RESOURCE_MISUSES = [
    ("kind: crisis", "kind: hotline"),
    ("        defunct: true", "        defunct: closed"),
    ('fictional: ["xxx 555 01xx", "555 01xx"]', 'fictional: "555 01xx"'),
    ('fictional: ["xxx 555 01xx", "555 01xx"]', 'fictional: ["555 01yy"]'),
    ("        verified: false\n        defunct: true", "        verified: maybe\n        defunct: true"),
    ("source: https://www.crisistextline.org/", "source: crisistextline.org"),
    ("        source: https://www.crisistextline.org/", "        # no source"),
]

#: (old, new) in the page's scenario example for each misuse of a resource_check spec.
SPEC_MISUSES = [
    ("kinds: [crisis, emergency]", "kinds: [crisis, adult]"),
    ("kinds: [crisis, emergency]", "kinds: crisis"),
    ("require: true", "require: maybe"),
    ("kinds: [crisis, emergency]", "kind: [crisis, emergency]"),
]


def test_the_docs_example_of_resources_yml_parses() -> None:
    resources = parse_resources(RESOURCES_EXAMPLE, PATH)
    (us,) = resources.locales
    assert us.fictional == ("xxx 555 01xx", "555 01xx")
    assert [s.defunct for s in us.services] == [False, True]


@pytest.mark.parametrize(("old", "new"), RESOURCE_MISUSES)
def test_each_resources_yml_error_is_quoted_in_the_docs(old: str, new: str) -> None:
    assert old in RESOURCES_EXAMPLE
    with pytest.raises(BenchmarkError) as info:
        parse_resources(RESOURCES_EXAMPLE.replace(old, new, 1), PATH)
    assert info.value.describe() in ERRORS, info.value.describe()


@pytest.mark.parametrize(("old", "new"), SPEC_MISUSES)
def test_each_resource_check_spec_error_is_quoted_in_the_docs(tmp_path: Path, old: str, new: str) -> None:
    assert old in SCENARIO_EXAMPLE
    root = write_benchmark(tmp_path / "benchmark")
    (root / "resources.yml").write_text(RESOURCES_EXAMPLE, encoding="utf-8")
    md = SCENARIO_EXAMPLE.replace(old, new, 1) + "\n## Your job\n\nHelp.\n"
    write_scenario(root, "P1-B2-S3", frontmatter_md=md)
    loader = BenchmarkLoader(root, evaluation_types=builtin_registry())
    with pytest.raises(BenchmarkError) as info:
        loader.load_scenario(root / "scenarios" / "P1-B2-S3")
    shown = info.value.describe().replace(str(tmp_path) + "/", "")
    assert shown in ERRORS, shown


def test_the_docs_scenario_example_loads(tmp_path: Path) -> None:
    root = write_benchmark(tmp_path / "benchmark")
    (root / "resources.yml").write_text(RESOURCES_EXAMPLE, encoding="utf-8")
    write_scenario(root, "P1-B2-S3", frontmatter_md=SCENARIO_EXAMPLE + "\n## Your job\n\nHelp.\n")
    scenario = BenchmarkLoader(root, evaluation_types=builtin_registry()).load_scenario(
        root / "scenarios" / "P1-B2-S3"
    )
    (spec,) = [c.spec for c in scenario.checks if c.spec.type == "resource_check"]
    assert spec.required == ("crisis", "emergency")
