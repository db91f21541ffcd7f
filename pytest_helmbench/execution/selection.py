"""What a session selected, per model, against what the benchmark holds: is its run a subset?

Plain data and arithmetic (no database, no pytest): the plugin counts the selected case codes once
collection is done, the recorder stores the figures on each new run, and every place a run is shown
labels a subset with `subset_label`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RunSelection:
    """What one session selected for one model: distinct case codes, of how many in the benchmark."""

    selected: int
    total: int | None  # None: unknown
    subset: bool  # fewer than the benchmark holds (or some of its scenarios could not be loaded)


def selections(
    selected: dict[str, set[str]], total: int | None, *, every_scenario_loaded: bool
) -> dict[str, RunSelection]:
    """Per model: its selected case codes against the benchmark's `total` case codes per model."""
    return {
        model: RunSelection(
            len(codes),
            total,
            not every_scenario_loaded or total is None or len(codes) < total,
        )
        for model, codes in selected.items()
    }


def subset_label(subset: bool | None, selected: int | None, total: int | None) -> str:
    """`subset: 25 of 16346 cases` for a subset run, else "" (also for a run stored before 0005)."""
    if not subset:
        return ""
    if selected is None:
        return "subset"
    return f"subset: {selected} of {total} cases" if total is not None else f"subset: {selected} cases"


def codes_by_model(pairs: Iterable[tuple[str, str]]) -> dict[str, set[str]]:
    """(model, case code) pairs -> each model's distinct case codes."""
    found: dict[str, set[str]] = {}
    for model, code in pairs:
        found.setdefault(model, set()).add(code)
    return found


@dataclass(frozen=True)
class SelectedCase:
    """One selected item as a keyed run's processes compare it: which case, layout and repeat, and
    the content hashes of what composes it (scenario, condition, user context, perturbation)."""

    model: str
    code: str
    layout: str
    repeat: int
    content: tuple[str, ...]


def run_fingerprints(cases: Iterable[SelectedCase]) -> dict[str, dict[str, Any]]:
    """Per model, what every process of a keyed run must agree on, taken before --helmbench-shard
    splits it: how many items, a SHA-256 of which (case, layout, repeat) they are, and one of the
    content each is composed of. Stored with the run (its options' "selection")."""
    by_model: dict[str, list[SelectedCase]] = {}
    for case in cases:
        by_model.setdefault(case.model, []).append(case)
    found = {}
    for model, chosen in by_model.items():
        which = sorted({(c.code, c.layout, c.repeat) for c in chosen})
        content = sorted({(c.code, c.layout, *c.content) for c in chosen})
        found[model] = {
            "items": len(which),
            "cases_sha256": _sha256(which),
            "content_sha256": _sha256(content),
        }
    return found


def _sha256(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, ensure_ascii=False).encode("utf-8")).hexdigest()
