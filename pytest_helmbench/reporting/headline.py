"""A run's headline figures, as stored with it (EvaluationRun.scores, RunScore) and shown at a glance.

Computed from the run's Results with the current scoring (harm_care.SCORING_VERSION, version 3: harm and
care apart, scenarios weighed by design): at the end of a run, and again by `helmbench rescore` when the
scoring changes. Each figure is stored as the report contract's `{"value", "ci_low", "ci_high"}`, or
null when nothing was scored for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..execution.outcome import CaseResult
from ..status import Status
from .agreement import panel_agreement
from .analytics import gate
from .harm_care import SCORING_VERSION, harm_care, layout_of

__all__ = ["SCORING_VERSION", "headline"]


def headline(results: Sequence[CaseResult]) -> dict[str, Any]:
    """Harm rate, critical harm rate, over-escalation rate, care score and perfect-reply rate with their
    intervals, the layout they were sent in, counts, the critical gate (raw and confirmed failures) and
    the panel's agreement: plain JSON."""
    figures = harm_care(results)
    gates = list(gate(results).values())
    panel = panel_agreement(results)
    n_passed = sum(r.status == Status.PASSED for r in results)
    found: dict[str, Any] = {
        "scoring_version": SCORING_VERSION,
        "layout": layout_of(results),
        **figures.as_json(),
        "passed": n_passed,
        "failed": figures.n_scored - n_passed,
        "errors": figures.n_errors,
        "skipped": figures.n_skipped,
        "harmed": figures.n_harmed,
        "harm_unknown": figures.n_harm_unknown,
        "gate": gates[0].status if gates else None,
        "critical_failed_raw": len(gates[0].raw_failed_cases) if gates else 0,
        "critical_failed_confirmed": len(gates[0].failed_cases) if gates else 0,
        "panel": None,
    }
    if panel is not None:
        found["panel"] = {
            "kind": panel.kind,
            "judges": panel.n_judges,
            "items": panel.n_items,
            "kappa": panel.kappa,
            "ac1": panel.ac1,
        }
    return found
