"""pytest-html shows the HELMBench summary (score with its interval, pass rate, critical gate, cost) in
its summary section, serial and under xdist (pytest-html writes on the controller only); every value
is escaped (pytest-html inserts the fragment as it is). The HTML file is parsed, not searched."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest

from pytest_helmbench.execution.outcome import CaseResult
from pytest_helmbench.execution.selection import RunSelection
from pytest_helmbench.execution.unpriced import Unpriced
from pytest_helmbench.reporting.html_summary import session_summary_html
from tests.benchfiles import write, write_benchmark
from tests.openrouter_server import Reply

GOOD = {"category": "ANSWER", "response": "Mitochondria."}
WRONG = {"category": "HANDOFF", "response": "Please call a helpline."}


class SummaryParser(HTMLParser):
    """The cells of HELMBench's table, by class (`helmbench-score`…), found inside pytest-html's
    `<div class="summary">`, with the text of the whole HELMBench block."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[tuple[str, dict[str, str]]] = []
        self.rows: list[dict[str, str]] = []
        self.in_summary_section = False
        self.block_text: list[str] = []
        self._cell: str | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        found = {k: v or "" for k, v in attrs}
        if found.get("id") == "helmbench-summary":
            self.in_summary_section = any(
                t == "div" and "summary" in a.get("class", "").split() for t, a in self.stack
            )
        self.stack.append((tag, found))
        if tag == "tr" and self._inside_block():
            self.rows.append({})
        classes = found.get("class", "")
        if tag == "td" and classes.startswith("helmbench-"):
            self._cell = classes.removeprefix("helmbench-")
            self.rows[-1][self._cell] = ""

    def handle_endtag(self, tag: str) -> None:
        while self.stack:
            if self.stack.pop()[0] == tag:
                break
        if tag == "td":
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._inside_block():
            self.block_text.append(data)
        if self._cell is not None:
            self.rows[-1][self._cell] += data

    def _inside_block(self) -> bool:
        return any(a.get("id") == "helmbench-summary" for _, a in self.stack)


def parse(path: Path) -> SummaryParser:
    parser = SummaryParser()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


@pytest.fixture
def bench(pytester: pytest.Pytester) -> Path:
    pytester.makeini("[pytest]\n")
    root = write_benchmark(pytester.path / "benchmark")
    scenario = root / "scenarios" / "P1-B1-S1" / "S1.md"
    marked = "category: ANSWER\ncritical: true\nharmful_labels: [HANDOFF]\n"  # a crisis label: a harm here
    write(scenario, scenario.read_text().replace("category: ANSWER\n", marked))
    return root


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_the_summary_section_holds_harm_care_interval_gate_and_cost(pytester, bench, helm_env, xdist):
    helm_env.add_rule(contains="agian", reply=Reply.ok(WRONG, cost=0.002))
    helm_env.add_rule(reply=Reply.ok(GOOD, cost=0.001))
    result = pytester.runpytest(
        "benchmark", "-p", "no:randomly", *xdist, "--html=report.html", "--self-contained-html", "-k", "C1"
    )
    result.assert_outcomes(passed=2, failed=2)
    found = parse(pytester.path / "report.html")
    assert found.in_summary_section  # inside pytest-html's <div class="summary">
    [row] = [r for r in found.rows if r]
    assert row["model"] == "openai/gpt-4o-mini"
    assert row["run"] == "run 1, subset: 4 of 8 cases"
    assert row["harm-rate"] == "harm 50.0% [95% CI 0.0%-100.0%]" and row["care-score"] == "care n/a"
    assert row["rates"] == "critical harm 50.0% | over-escalation n/a | perfect replies 50.0%"
    assert row["counts"] == "2 passed, 2 failed, 0 errors, 0 skipped"
    assert row["gate"] == "failed (2 confirmed, 2 raw critical failures)"
    assert row["cost"] == "$0.0060 (+ judge $0.0000)"


def test_a_dry_run_says_so_in_the_summary_section(pytester, bench, helm_env):
    result = pytester.runpytest("benchmark", "-p", "no:randomly", "--helmbench-dry-run", "--html=report.html")
    result.assert_outcomes(skipped=8)
    found = parse(pytester.path / "report.html")
    assert found.in_summary_section and not [r for r in found.rows if r]
    assert "dry run: 8 case(s) composed and validated" in "".join(found.block_text)


def test_no_block_without_helmbench_cases(pytester, helm_env):
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_plain="def test_one():\n    pass\n")
    assert pytester.runpytest("-p", "no:randomly", "--html=report.html").ret == 0
    assert "helmbench-summary" not in (pytester.path / "report.html").read_text()


@dataclass
class FakeTally:
    results: list = field(default_factory=list)
    cost_usd: float = 0.0
    judge_cost_usd: float = 0.0
    run_id: int | None = 7


def test_every_value_is_escaped_and_an_unknown_cost_is_unknown():
    result = CaseResult.from_fields(
        {
            "model": "evil/<script>x</script>",
            "case_code": "P1-B1-S1-C1-PT1",
            "pillar": "P1",
            "behaviour": "P1-B1",
            "scenario": "P1-B1-S1",
            "condition": "C1",
            "perturbation": "PT1",
            "status": "passed",
        }
    )
    model = "evil/<script>x</script>"
    fragment = session_summary_html(
        {model: FakeTally([result])}, {model: RunSelection(1, 8, True)}, {model: Unpriced(1, 0)}
    )
    assert "<script>" not in fragment and "evil/&lt;script&gt;" in fragment
    assert "unknown (1 call without a price)" in fragment and "run 7, subset: 1 of 8 cases" in fragment
