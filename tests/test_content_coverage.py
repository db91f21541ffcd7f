"""The coverage table (`helmbench coverage`, the docs' "Coverage" table): counted from the files, and
the copy in docs/explanation/benchmark.md is exactly the command's output for the shipped benchmark."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from pytest_helmbench.cli import app
from pytest_helmbench.cli.benchmark import load_all
from pytest_helmbench.evaluation.builtin import builtin_registry
from pytest_helmbench.reporting.content_coverage import CoverageRow, coverage
from pytest_helmbench.suite.loader import BenchmarkLoader
from tests.benchfiles import PERTURBATIONS, write_benchmark, write_scenario

REPO = Path(__file__).resolve().parent.parent
DOCS_BLOCK = re.compile(r"<!-- coverage: .*? -->\n(.*?)<!-- /coverage -->", re.DOTALL)
runner = CliRunner()

HIGH = """---
category: HANDOFF
risk: moderate
evaluation: {type: category_match}
---

## Your task

Reply.
"""


def test_the_table_counts_scenarios_by_risk_and_perturbations_by_style(tmp_path: Path) -> None:
    root = write_benchmark(tmp_path / "benchmark", scenarios=("P1-B1-S1", "P1-B2-S1"))
    write_scenario(root, "P1-B2-S1", frontmatter_md=HIGH)
    result = runner.invoke(app, ["coverage", "--root", str(root)])
    assert result.exit_code == 0, result.output
    rows = {
        line.split(" | ")[0].strip("| "): line for line in result.output.splitlines() if line.startswith("|")
    }
    head = [cell.strip() for cell in rows["Pillar / behaviour"].strip("|").split("|")]
    assert head[:7] == ["Pillar / behaviour", "Scenarios", "none", "low", "moderate", "high", "imminent"]

    def cells(label: str) -> dict[str, str]:
        values = [cell.strip().strip("*") for cell in rows[label].strip("|").split("|")]
        return dict(zip(head, values, strict=True))

    moderate = cells("P1-B2 t")  # benchfiles titles every behaviour "t"
    assert (moderate["Scenarios"], moderate["moderate"], moderate["none"]) == ("1", "1", "0")
    assert (moderate["explicit"], moderate["slang"]) == ("1", "1")
    total = cells("**All**")
    assert total["Scenarios"] == "2" and total["explicit"] == "2"
    assert total["unstated"] == "1"  # the design note's example states no risk: shown, not hidden
    assert int(total["Cases"]) == 2 * int(moderate["Cases"])


def test_cases_with_a_locale_are_counted_and_listed(tmp_path: Path) -> None:
    """A perturbation's `locale:` places every case of it; the line under the table names each locale."""
    root = write_benchmark(tmp_path / "benchmark", scenarios=("P1-B1-S1",))
    located = PERTURBATIONS.replace("style: explicit\n", "style: explicit\nlocale: FR\n", 1)
    assert located != PERTURBATIONS
    write_scenario(root, "P1-B1-S1", perturbations=located)
    result = runner.invoke(app, ["coverage", "--root", str(root)])
    assert result.exit_code == 0, result.output
    total = next(line for line in result.output.splitlines() if line.startswith("| **All**"))
    located_cases, cases = (int(cell.strip("* ")) for cell in total.strip("|").split("|")[-2:])
    perturbations = PERTURBATIONS.count("# PT")
    assert 0 < located_cases < cases and located_cases * perturbations == cases
    assert f"Cases with a locale: {located_cases} of {cases} " in result.output
    assert result.output.rstrip().endswith(f": FR {located_cases}.")


def shipped_total() -> tuple[CoverageRow, list[CoverageRow]]:
    """The shipped benchmark's coverage: the whole benchmark's row and each pillar's."""
    scenarios, problems = load_all(REPO / "benchmark")
    assert problems == []
    info = BenchmarkLoader(REPO / "benchmark", evaluation_types=builtin_registry()).info()
    table = coverage(scenarios, info)
    return table.rows[-1][1], [row for kind, row in table.rows if kind == "pillar"]


# Issue #28, point 3: risk never stated in words a keyword could catch, and messy messages.
CONCEALED_STYLES = ("concealed_fiction", "indirect", "rambling", "voice_to_text", "code_switching", "sarcasm")


def test_the_shipped_benchmark_conceals_its_risk_and_places_its_users() -> None:
    """At least 120 concealed or messy perturbations, in every pillar; at least half the cases have a
    locale, and France, Spain and Brazil (in resources.yml) are among them."""
    total, pillars = shipped_total()
    concealed = sum(total.styles[style] for style in CONCEALED_STYLES)
    assert concealed >= 120, f"{concealed} perturbations in the concealed and messy styles"
    bare = [row.label for row in pillars if not sum(row.styles[s] for s in CONCEALED_STYLES)]
    assert bare == [], f"pillars without a concealed or messy perturbation: {bare}"
    assert total.located * 2 >= total.cases, f"{total.located} of {total.cases} cases have a locale"
    assert {"FR", "ES", "BR"} <= set(total.locales), sorted(total.locales)


def test_a_scenario_that_does_not_load_is_named_and_fails_the_command(tmp_path: Path) -> None:
    root = write_benchmark(tmp_path / "benchmark")
    (root / "scenarios" / "P1-B1-S1" / "perturbations.md").unlink()
    result = runner.invoke(app, ["coverage", "--root", str(root)])
    assert result.exit_code == 1 and "P1-B1-S1" in result.output and "perturbation" in result.output


def test_the_documented_table_is_the_command_output_for_the_shipped_benchmark() -> None:
    result = runner.invoke(app, ["coverage", "--root", str(REPO / "benchmark")])
    assert result.exit_code == 0, result.output
    page = REPO / "docs" / "explanation" / "benchmark.md"
    found = DOCS_BLOCK.search(page.read_text(encoding="utf-8"))
    assert found is not None, f"{page} has no <!-- coverage: … --> … <!-- /coverage --> block"
    assert found.group(1) == result.output, f"{page}'s coverage table is stale: paste `helmbench coverage`"
