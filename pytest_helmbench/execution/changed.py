"""--helmbench-changed: run only the cases whose composed prompt, schema or evaluation changed.

The way a benchmark author iterates (pytest-testmon and pytest-picked cannot see `.md` files): each
case is compared with its newest Result among its model's *completed* runs (storage/prior_runs.py
reads them into a `Baseline`, plain JSON that every xdist process loads, so all deselect the same
cases). A case is unchanged when that Result passed or failed with the same prompt hash (the composed
prompt) and the same scenario content hash (the scenario's text and frontmatter, its response schema,
its evaluation and every rubric it is judged by). A case never evaluated (no Result, or an error or
skip) counts as changed. Model settings are not compared: a run with other options is a full run.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path

from ..status import Status
from .resume import case_key

EVALUATED = (Status.PASSED, Status.FAILED)


class Change(StrEnum):
    """What --helmbench-changed makes of one selected case."""

    UNCHANGED = "unchanged"  # evaluated before with the same prompt, schema and evaluation: deselected
    CHANGED = "changed"  # evaluated before, but its prompt, schema or evaluation differs now: run
    NEW = "new"  # never evaluated (no Result, or only an error or a skip): run


@dataclass(frozen=True)
class PriorCase:
    """A case's newest Result among its model's completed runs."""

    status: str
    prompt_hash: str
    scenario_hash: str | None
    run_id: int


@dataclass
class Baseline:
    """Per model: its newest completed run, and each case's newest Result among its completed runs."""

    latest_run: dict[str, int] = field(default_factory=dict)  # model -> newest completed run id
    prior: dict[str, dict[str, PriorCase]] = field(default_factory=dict)  # model -> case key -> Result

    def decide(self, case: CaseContent) -> tuple[Change, int | None]:
        """The case's Change, and the run whose Result it was compared with (None when never run)."""
        found = self.prior.get(case.model, {}).get(case_key(case.code, case.repeat, case.layout))
        if found is None or found.status not in EVALUATED:
            return Change.NEW, None
        same = found.prompt_hash == case.prompt_hash and found.scenario_hash == case.scenario_hash
        return (Change.UNCHANGED if same else Change.CHANGED), found.run_id

    def save(self, path: Path) -> None:
        prior = {m: {k: asdict(p) for k, p in cases.items()} for m, cases in self.prior.items()}
        path.write_text(json.dumps({"latest_run": self.latest_run, "prior": prior}), encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> Baseline:
        data = json.loads(path.read_text(encoding="utf-8"))
        prior = {m: {k: PriorCase(**p) for k, p in cases.items()} for m, cases in data["prior"].items()}
        return cls(latest_run={m: int(r) for m, r in data["latest_run"].items()}, prior=prior)


@dataclass(frozen=True)
class CaseContent:
    """What the decision needs to know of one selected case."""

    model: str
    code: str
    repeat: int
    prompt_hash: str
    scenario_hash: str
    layout: str = "seed"


@dataclass
class ModelCounts:
    """How one model's selected cases were decided, and which runs the unchanged ones matched."""

    unchanged: int = 0
    changed: int = 0
    new: int = 0
    runs: list[int] = field(default_factory=list)  # runs holding the unchanged cases' Results, sorted

    @property
    def to_run(self) -> int:
        return self.changed + self.new

    def add(self, change: Change, run_id: int | None) -> None:
        setattr(self, str(change), getattr(self, str(change)) + 1)
        if change is Change.UNCHANGED and run_id is not None and run_id not in self.runs:
            self.runs = sorted([*self.runs, run_id])


@dataclass
class Selection:
    """Which cases stay selected (in the order given) and the counts the summary line reports."""

    keep: list[bool]
    counts: dict[str, ModelCounts]

    def to_json(self) -> str:
        return json.dumps({m: asdict(c) for m, c in self.counts.items()})

    @staticmethod
    def counts_from_json(text: str) -> dict[str, ModelCounts]:
        return {m: ModelCounts(**c) for m, c in json.loads(text).items()}


def select_changed(baseline: Baseline, cases: Iterable[CaseContent]) -> Selection:
    """Decide every selected case: only changed and new ones stay selected."""
    keep: list[bool] = []
    counts: dict[str, ModelCounts] = {}
    for case in cases:
        change, run_id = baseline.decide(case)
        counts.setdefault(case.model, ModelCounts()).add(change, run_id)
        keep.append(change is not Change.UNCHANGED)
    return Selection(keep, counts)


def _run_list(runs: list[int]) -> str:
    shown = ", ".join(str(r) for r in runs[:5])
    return shown + (f" and {len(runs) - 5} more" if len(runs) > 5 else "")


def changed_lines(latest_run: dict[str, int], counts: dict[str, ModelCounts]) -> list[str]:
    """One line per model: how many cases were unchanged (deselected), how many run, against which run."""
    lines = []
    for model, c in sorted(counts.items()):
        latest = latest_run.get(model)
        if latest is None:
            lines.append(
                f"--helmbench-changed {model}: no completed run to compare with: "
                f"all {c.to_run} selected case(s) run"
            )
            continue
        older = [r for r in c.runs if r != latest]
        against = f"completed run {latest}" + (
            f" (and, for cases it lacks, completed run(s) {_run_list(older)})" if older else ""
        )
        lines.append(
            f"--helmbench-changed {model}: {c.unchanged} unchanged case(s) deselected, {c.to_run} run "
            f"({c.changed} changed, {c.new} never evaluated) — compared with {against}"
        )
    return lines
