"""`helmbench report --format json`: each model's headline as data other tools read (a contract).

The shape is fixed by a JSON Schema shipped with the package (``templates/report-v3.schema.json``),
and every document is checked against it before it is written, so a change that would break a reader
fails here rather than in someone's pipeline::

    {"scoring_version": 3, "models": [{"model": ID, "run_ids": [...], "layout": "seed"|"deployed"|"mixed",
      "harm_rate": F, "critical_harm_rate": F, "over_escalation_rate": F, "care_score": F,
      "perfect_reply_rate": F, "judge_corrected": null | {"harm_rate": F, "care_score": F}}]}

where each F is ``{"value": x, "ci_low": x, "ci_high": x}`` or null when nothing was scored for it;
rates are fractions in 0..1, the care score is in 0..100. The models are the report's rows: without
run ids each model's headline, with run ids the named runs (one entry per run when a model has several).
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

from ..errors import HelmbenchError
from ..storage.queries import ReportData
from .figure_text import basis_note
from .harm_care import SCORING_VERSION, HarmCare
from .judge_error import judge_corrected_figures, series_calibration
from .series import Series, SeriesSummary, build_series, summarise

SCHEMA_FILE = "report-v3.schema.json"


class ReportContractError(HelmbenchError):
    """The document does not match the report's schema (a bug: never written, said in one line)."""


@functools.cache
def report_schema() -> dict[str, Any]:
    """The report's JSON Schema (package data)."""
    text = resources.files(__package__).joinpath("templates", SCHEMA_FILE).read_text(encoding="utf-8")
    return json.loads(text)


def judge_corrected(series: Series, data: ReportData) -> dict[str, Any] | None:
    """The harm rate and care score corrected for the judge's measured error (judge_error.py): null
    when no calibration of the series' judge covers its runs, or it cannot correct them (the figures
    above then include no judge error, and the null says so)."""
    calibration = series_calibration(series.run_ids, data.calibrations)
    found = judge_corrected_figures(series.results, calibration.figures if calibration else None)
    if found is None:
        return None
    return {name: None if figure is None else figure.as_json() for name, figure in found.items()}


def model_entry(summary: SeriesSummary, series: Series, data: ReportData) -> dict[str, Any]:
    figures = summary.figures.as_json()
    return {
        "model": summary.model,
        "run_ids": list(summary.run_ids),
        "layout": summary.layout,
        **figures,
        "judge_corrected": judge_corrected(series, data),
        "basis": basis(summary.figures),
    }


def basis(figures: HarmCare) -> dict[str, Any]:
    """What the figures rest on: every result, the scored ones, those whose harm is known, and the
    plain note when that is few (`from 8 of 215 results`; null otherwise)."""
    return {
        "results": figures.n_scored + figures.n_errors + figures.n_skipped,
        "scored": figures.n_scored,
        "harm_known": figures.n_scored - figures.n_harm_unknown,
        "note": basis_note(figures) or None,
    }


def report_document(data: ReportData) -> dict[str, Any]:
    """The report as the contract's document, checked against its schema."""
    models = [model_entry(summarise(s, data.coverage.get(s.model)), s, data) for s in build_series(data)]
    document = {"scoring_version": SCORING_VERSION, "models": models}
    check_document(document)
    return document


def check_document(document: Any) -> None:
    """ReportContractError (one line: where and what) unless the document matches the schema."""
    from jsonschema import Draft202012Validator

    errors = sorted(Draft202012Validator(report_schema()).iter_errors(document), key=lambda e: list(e.path))
    if errors:
        first = errors[0]
        where = "/".join(str(part) for part in first.path) or "(root)"
        raise ReportContractError(f"the JSON report does not match its schema at {where}: {first.message}")


def report_json(data: ReportData) -> str:
    """The document as text (UTF-8, one trailing newline)."""
    return json.dumps(report_document(data), ensure_ascii=False, indent=2) + "\n"
