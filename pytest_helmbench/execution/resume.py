"""Resume an interrupted run, or retry a run's errors, without paying twice for a finished case.

The controller reads the run's Results once (storage/prior_runs.py) and writes a plan (plain JSON)
that every xdist worker loads, so all processes deselect exactly the same cases. A case counts as
finished when its Result passed or failed *with the same request hash* (same composed prompt, schema,
model settings and options); a changed case is run afresh and replaces its old Result.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from ..errors import HelmbenchError
from ..status import Status


class ResumeAction(StrEnum):
    """What a resumed session does with one selected case."""

    RUN = "run"  # missing, errored or skipped last time: run it
    DONE = "done"  # finished (passed or failed) with the same request: deselect it
    CHANGED = "changed"  # finished, but its request changed since: run it afresh


class ResumeError(HelmbenchError):
    """The run to resume does not exist or belongs to no selected model."""


def case_key(code: str, repeat: int, layout: str | None = "seed") -> str:
    """A case's identity within a run: its code, repeat and layout (the seed layout's key is v1.0's)."""
    return f"{code}#{repeat}" if layout in (None, "seed") else f"{code}#{repeat}@{layout}"


@dataclass
class ResumePlan:
    """Which run each model completes, and what each of its cases ended as last time."""

    runs: dict[str, int] = field(default_factory=dict)
    prior: dict[str, dict[str, list[str | None]]] = field(
        default_factory=dict
    )  # model -> key -> [status, hash]
    errors_only: bool = False

    def decide(
        self, model: str, code: str, repeat: int, request_hash: str, layout: str = "seed"
    ) -> ResumeAction:
        """RUN (missing, errored or skipped), DONE (finished, unchanged) or CHANGED (finished, now
        different); retrying errors runs the errored cases only."""
        if model not in self.runs:
            return ResumeAction.RUN
        status, old_hash = self.prior.get(model, {}).get(case_key(code, repeat, layout)) or [None, None]
        if self.errors_only:
            return ResumeAction.RUN if status == Status.ERROR else ResumeAction.DONE
        if status in (Status.PASSED, Status.FAILED):
            return ResumeAction.DONE if old_hash == request_hash else ResumeAction.CHANGED
        return ResumeAction.RUN

    def save(self, path: Path) -> None:
        path.write_text(
            json.dumps({"runs": self.runs, "prior": self.prior, "errors_only": self.errors_only}),
            encoding="utf-8",
        )

    @classmethod
    def load(cls, path: Path) -> ResumePlan:
        data = json.loads(path.read_text(encoding="utf-8"))
        return cls(runs=data["runs"], prior=data["prior"], errors_only=data["errors_only"])


@dataclass(frozen=True)
class PlannedCase:
    """What the plan needs to know of one selected case."""

    model: str
    code: str
    repeat: int
    request_hash: str
    layout: str = "seed"


@dataclass
class AppliedPlan:
    """The plan's decision for each case (in the order given) and how many of each."""

    decisions: list[ResumeAction]
    counts: dict[str, int]

    @property
    def keep(self) -> list[bool]:
        """Which cases stay selected: all but those already done."""
        return [decision != ResumeAction.DONE for decision in self.decisions]


def apply_plan(plan: ResumePlan, cases: Iterable[PlannedCase]) -> AppliedPlan:
    """Decide every selected case; the counts are what the summary reports."""
    decisions = [plan.decide(c.model, c.code, c.repeat, c.request_hash, c.layout) for c in cases]
    counts = {str(decision): 0 for decision in (ResumeAction.DONE, ResumeAction.CHANGED, ResumeAction.RUN)}
    for decision in decisions:
        counts[str(decision)] += 1
    return AppliedPlan(decisions, counts)
