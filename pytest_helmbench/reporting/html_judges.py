"""The report's "Judges" table: who judged each run, how, with what calibration, and how they agreed
(each panel judge's own pass rate beside the agreement); a warning when a judge comes from the
provider family of the model it judged."""

from __future__ import annotations

from html import escape

from ..config import family_warning
from ..storage.queries import CalibrationView, RunInfo
from .calibration_figures import calibration_line


def _panel(run: RunInfo) -> str:
    panel = (run.scores or {}).get("panel")
    if not panel:
        return "—"
    kind = "Cohen's" if panel.get("kind") == "cohen" else "Fleiss'"
    kappa = panel.get("kappa")
    value = "n/a" if kappa is None else f"{kappa:.2f}"
    rates = panel.get("pass_rates") or {}
    each = "; each passed: " + ", ".join(f"{j} {r:.1%}" for j, r in rates.items()) if rates else ""
    return f"{kind} κ {value} (AC1 {panel.get('ac1', 0):.2f}) over {panel.get('items')} checks{each}"


def family_warnings(runs: list[RunInfo]) -> str:
    """A paragraph per model judged by a judge of its own provider family (empty when none)."""
    found = dict.fromkeys(family_warning(run.model, run.judges) for run in runs)
    return "".join(f'<p class="note warning">{escape(text)}</p>' for text in found if text)


def judges_table(runs: list[RunInfo], calibrations: dict[int, CalibrationView]) -> str:
    """One row per run: its judges and policy, scoring and benchmark versions, calibration, agreement."""
    rows = []
    for run in runs:
        judges = ", ".join(run.judges) if run.judges else "none"
        if family_warning(run.model, run.judges):
            judges += " (warning: of the model's own provider family)"
        found = calibrations.get(run.id)
        if not run.judges:
            calibration = "no judged check"
        elif found is not None:
            calibration = calibration_line(found.judge, found.figures, found.labeller) + (
                f" (calibration {found.id}, {found.created_at:%Y-%m-%d})"
            )
        else:
            calibration = calibration_line(run.judges[0], None)
        scoring = f"v{run.scoring_version}" if run.scoring_version is not None else "v1 (unversioned)"
        rows.append(
            f'<tr><th scope="row">{run.id}</th><td>{escape(run.model)}</td><td>{escape(judges)}</td>'
            f"<td>{escape(run.judge_policy or '—')}</td><td>{escape(scoring)}</td>"
            f"<td>{escape(run.benchmark_version or '—')}</td><td>{escape(calibration)}</td>"
            f"<td>{escape(_panel(run))}</td></tr>"
        )
    head = "".join(
        f'<th scope="col">{h}</th>'
        for h in (
            "Run",
            "Model",
            "Judges",
            "Policy",
            "Scoring",
            "Benchmark",
            "Judge calibration",
            "Panel agreement",
        )
    )
    table = f'<table id="judges-table"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    return family_warnings(runs) + table
