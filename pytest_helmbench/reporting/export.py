"""`helmbench export`: one flat row per stored Result, as CSV, JSON or JSON Lines, for pandas and other tools.

Rows are streamed from one joined query, so an export of any size runs in constant memory (except
JSON's enclosing list, which is still written element by element). Missing values are empty cells
in CSV and null in JSON; booleans are True/False in CSV (pandas reads them as booleans).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime
from typing import Any, Literal, TextIO, get_args

from sqlmodel import Session

from ..redaction import redact
from ..storage.queries import resolve_run_ids
from ..storage.records import ResultRecord, iter_result_records

ExportFormat = Literal["csv", "json", "jsonl"]
FORMATS: tuple[str, ...] = get_args(ExportFormat)

#: The exported columns, in order (documented in the README).
COLUMNS: tuple[str, ...] = tuple(ResultRecord.__dataclass_fields__)


def _value(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def record_dict(record: ResultRecord) -> dict[str, Any]:
    """A JSON-ready dict of one record, columns in COLUMNS order; its message without credentials (a
    database written before errors were redacted may hold one)."""
    row = {key: _value(value) for key, value in asdict(record).items()}
    row["reason"] = redact(row["reason"]) if row.get("reason") else row.get("reason")
    return row


def export(session: Session, fmt: ExportFormat, out: TextIO, run_ids: Sequence[int] | None = None) -> int:
    """Write every Result of the given runs (default: every run) to ``out``; returns the row count.

    Raises ValueError for an unknown format and DatasetError for an empty database or unknown run.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; use one of {', '.join(FORMATS)}")
    ids = resolve_run_ids(session, run_ids, all_runs=True)
    records = iter_result_records(session, ids)
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
        writer.writerow(["" if value is None else value for value in record_dict(record).values()])
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
