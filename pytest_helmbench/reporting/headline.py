"""A run's headline figures, as stored with it (EvaluationRun.scores) and shown at a glance.

Computed from the run's Results with the current scoring (analytics.SCORING_VERSION): at the end of a
run, and again by `helmbench rescore` when the scoring changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..execution.outcome import CaseResult
from .agreement import panel_agreement
from .analytics import SCORING_VERSION, gate, score

__all__ = ["SCORING_VERSION", "headline"]


def headline(results: Sequence[CaseResult]) -> dict[str, Any]:
    """Score and pass rate with their intervals, counts, the critical gate (raw and confirmed failures)
    and the panel's agreement: plain JSON."""
    summary = score(results)
    gates = list(gate(results).values())
    panel = panel_agreement(results)
    found: dict[str, Any] = {
        "scoring_version": SCORING_VERSION,
        "score": summary.score,
        "score_low": summary.score_low,
        "score_high": summary.score_high,
        "pass_rate": summary.pass_rate,
        "pass_rate_low": summary.pass_rate_low,
        "pass_rate_high": summary.pass_rate_high,
        "passed": summary.n_passed,
        "failed": summary.n_failed,
        "errors": summary.n_errors,
        "skipped": summary.n_skipped,
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
            # each judge's own figure: the share of those checks it passed (how lenient it is)
            "pass_rates": {j.judge: j.pass_rate for j in panel.judges},
        }
    return found
