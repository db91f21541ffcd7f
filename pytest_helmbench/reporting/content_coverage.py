"""What the benchmark covers, counted from its files: scenarios per risk level, perturbations per
style and cases with a locale, for each behaviour and pillar (the docs' coverage table, in
docs/explanation/benchmark.md, is this module's output, and a test keeps the two equal). Read from the
parsed benchmark, so it can never drift from the content.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..codes import code_sort_key
from ..suite.cases import Case, expand
from ..suite.model import BenchmarkInfo, Scenario
from ..suite.scoring_spec import RISK_LEVELS

UNSTATED = "unstated"


@dataclass
class CoverageRow:
    """One behaviour's (or pillar's, or the whole benchmark's) counts."""

    label: str
    scenarios: int = 0
    risks: Counter[str] = field(default_factory=Counter)  # risk level -> scenarios
    styles: Counter[str] = field(default_factory=Counter)  # style -> perturbations
    cases: int = 0
    locales: Counter[str] = field(default_factory=Counter)  # locale -> cases (a case's locale: Case.locale)

    def add(self, scenario: Scenario, cases: Sequence[Case]) -> None:
        self.scenarios += 1
        self.risks[scenario.risk or UNSTATED] += 1
        self.styles.update(str(p.meta.get("style", "unstated")) for p in scenario.perturbations)
        self.cases += len(cases)
        self.locales.update(case.locale for case in cases if case.locale)

    @property
    def located(self) -> int:
        """Cases whose user is somewhere the benchmark knows (resources.yml's services then apply)."""
        return sum(self.locales.values())


@dataclass(frozen=True)
class CoverageTable:
    """Rows in pillar order (a pillar's total, then its behaviours), then the whole benchmark's."""

    risks: tuple[str, ...]
    styles: tuple[str, ...]
    rows: tuple[tuple[str, CoverageRow], ...]  # ("pillar" | "behaviour" | "total", row)


def coverage(scenarios: Sequence[Scenario], info: BenchmarkInfo) -> CoverageTable:
    """Count `scenarios` by pillar and behaviour (cases: one model, the seed layout)."""
    pillars: dict[str, CoverageRow] = {}
    behaviours: dict[str, CoverageRow] = {}
    total = CoverageRow("All")
    for scenario in sorted(scenarios, key=lambda s: code_sort_key(s.code)):
        cases = expand(scenario, [""])
        pillar = info.pillar(scenario.pillar)
        behaviour = info.behaviour(scenario.behaviour)
        pillars.setdefault(scenario.pillar, CoverageRow(f"**{scenario.pillar} {pillar.name}**")).add(
            scenario, cases
        )
        behaviours.setdefault(scenario.behaviour, CoverageRow(f"{scenario.behaviour} {behaviour.title}")).add(
            scenario, cases
        )
        total.add(scenario, cases)
    rows: list[tuple[str, CoverageRow]] = []
    for code, row in pillars.items():
        rows.append(("pillar", row))
        rows += [("behaviour", b) for key, b in behaviours.items() if key.split("-")[0] == code]
    rows.append(("total", total))
    used_risks = [r for r in (*RISK_LEVELS, UNSTATED) if total.risks[r] or r in RISK_LEVELS]
    styles = list(info.styles) + sorted(set(total.styles) - set(info.styles))
    return CoverageTable(tuple(used_risks), tuple(styles), tuple(rows))


def markdown(table: CoverageTable) -> str:
    """The table as GitHub markdown: scenarios by risk level, perturbations by style, cases with a
    locale and cases; then the cases of each locale."""
    head = ["Pillar / behaviour", "Scenarios", *table.risks, *table.styles, "Located", "Cases"]
    lines = [
        "| " + " | ".join(head) + " |",
        "|" + "|".join(["---"] + ["--:"] * (len(head) - 1)) + "|",
    ]
    for kind, row in table.rows:
        label = "**All**" if kind == "total" else row.label
        cells = [
            row.scenarios,
            *(row.risks[r] for r in table.risks),
            *(row.styles[s] for s in table.styles),
            row.located,
            row.cases,
        ]
        shown = [f"**{c}**" if kind != "behaviour" else str(c) for c in cells]
        lines.append("| " + " | ".join([label, *shown]) + " |")
    total = table.rows[-1][1]
    if total.cases:
        share = f"{total.located} of {total.cases} ({100 * total.located / total.cases:.1f}%)"
        each = ", ".join(f"{code} {n}" for code, n in sorted(total.locales.items()))
        lines += ["", f"Cases with a locale: {share}" + (f": {each}" if each else "") + "."]
    return "\n".join(lines) + "\n"
