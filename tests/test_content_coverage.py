"""The coverage table (`helmbench coverage`, the docs' "Coverage" table): counted from the files, and
the copy in docs/explanation/benchmark.md is exactly the command's output for the shipped benchmark."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from pytest_helmbench.cli import app
from tests.benchfiles import write_benchmark, write_scenario

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
