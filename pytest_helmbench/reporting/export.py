"""`helmbench export`: one flat row per stored Result (CSV, JSON, JSON Lines, Parquet) for pandas and others.

Rows are streamed from one joined query, so an export of any size runs in constant memory (except
JSON's enclosing list, which is still written element by element). Missing values are empty cells
in CSV and null in JSON; booleans are True/False in CSV (pandas reads them as booleans). The columns
are storage/columns.py's, shared with `pytest_helmbench.results`; Parquet is written from the same
typed DataFrame `results(db)` returns, built in memory (pandas and pyarrow: the `parquet` extra).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, TextIO, get_args

from sqlmodel import Session

from ..storage.columns import RESULT_NAMES, result_values
from ..storage.queries import resolve_run_ids
from ..storage.records import ExportRow, iter_export_rows
from .frames import MissingExtra, require_pandas, results_frame
from .safe_text import for_spreadsheet

ExportFormat = Literal["csv", "json", "jsonl"]
#: parquet: a file only (export_parquet); inspect: a folder of eval logs (inspect_log.write_logs)
FORMATS: tuple[str, ...] = (*get_args(ExportFormat), "parquet", "inspect")

#: The exported columns, in order (documented in the README's "Analysis in pandas").
COLUMNS: tuple[str, ...] = RESULT_NAMES


def _value(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def record_dict(record: ExportRow) -> dict[str, Any]:
    """A JSON-ready dict of one record, columns in COLUMNS order, its message redacted (result_values)."""
    return {key: _value(value) for key, value in zip(COLUMNS, result_values(record), strict=True)}


def require_parquet() -> None:
    """Parquet needs pandas and pyarrow: MissingExtra naming the `parquet` extra otherwise."""
    require_pandas("parquet")
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise MissingExtra("pyarrow is not installed: pip install 'pytest-helmbench[parquet]'") from None


def export_parquet(session: Session, path: Path | str, run_ids: Sequence[int] | None = None) -> int:
    """Write every Result of the given runs (default: every run) to a Parquet file, typed as
    `results(db)`; returns the row count. DatasetError for an empty database or unknown run."""
    require_parquet()
    frame = results_frame(session, resolve_run_ids(session, run_ids, all_runs=True))
    frame.to_parquet(path, index=False)
    return len(frame)


def export(session: Session, fmt: ExportFormat, out: TextIO, run_ids: Sequence[int] | None = None) -> int:
    """Write every Result of the given runs (default: every run) to ``out``; returns the row count.

    Raises ValueError for an unknown format and DatasetError for an empty database or unknown run.
    """
    if fmt not in get_args(ExportFormat):  # parquet is binary: export_parquet writes a file
        text = ", ".join(get_args(ExportFormat))
        raise ValueError(f"unknown text export format {fmt!r}; use one of {text} (parquet: export_parquet)")
    ids = resolve_run_ids(session, run_ids, all_runs=True)
    records = iter_export_rows(session, ids)
    if fmt == "csv":
        return _write_csv(records, out)
    if fmt == "jsonl":
        return _write_jsonl(records, out)
    return _write_json(records, out)


def _write_csv(records: Any, out: TextIO) -> int:
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    count = 0
    for record in records:
        writer.writerow(
            ["" if value is None else for_spreadsheet(value) for value in record_dict(record).values()]
        )
        count += 1
    return count


def _write_jsonl(records: Any, out: TextIO) -> int:
    count = 0
    for record in records:
        out.write(json.dumps(record_dict(record), ensure_ascii=False) + "\n")
        count += 1
    return count


def _write_json(records: Any, out: TextIO) -> int:
    count = 0
    out.write("[")
    for record in records:
        out.write(("," if count else "") + "\n" + json.dumps(record_dict(record), ensure_ascii=False))
        count += 1
    out.write("\n]\n")
    return count
