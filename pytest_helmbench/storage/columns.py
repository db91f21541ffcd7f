"""The column sets results are read out in: `helmbench export` and `pytest_helmbench.results` share them.

Defined once, here, so an export file and a DataFrame of the same database can never disagree on a
column's name, order or type. Each column carries its pandas dtype ("Int64", "Float64", "boolean"
and "string" hold missing values as <NA>); docs/reference/results-api.md documents them
(a test checks it against these). Only names and types live here: the rows come from records.py
(Results) and queries.py (runs), the DataFrames are built in reporting/frames.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..redaction import redact
from .records import ExportRow

#: A timestamp: stored in UTC (naive in the database), read out timezone-aware.
UTC_TIME = "datetime64[us, UTC]"


@dataclass(frozen=True)
class Column:
    """One output column: its name and its pandas dtype."""

    name: str
    dtype: str


def _columns(spec: str) -> tuple[Column, ...]:
    """`name dtype` per line -> columns (a table the eye can check against the docs')."""
    return tuple(Column(*line.split(maxsplit=1)) for line in spec.strip().splitlines())


#: One row per stored Result: the rows of `helmbench export` and of `results(db)`.
RESULT_COLUMNS = _columns(f"""
result_id int64
run_id int64
run_subset boolean
model string
case_code string
pillar string
behaviour string
scenario string
condition string
user_context string
perturbation string
repeat int64
status string
reason string
critical bool
condition_severity int64
user_context_severity int64
perturbation_severity int64
base_severity int64
style string
prompt_tokens Int64
completion_tokens Int64
cost_usd Float64
judge_cost_usd Float64
latency_ms Float64
cached bool
attempts Int64
finish_reason string
layout string
turns Int64
first_failing_turn Int64
harm boolean
care_earned Int64
care_possible Int64
scenario_weight Float64
prompt_hash string
created_at {UTC_TIME}
""")

#: One row per EvaluationRun (one model in one pytest session): `runs(db)`.
RUN_COLUMNS = _columns(f"""
run_id int64
model string
status string
session_id string
started_at {UTC_TIME}
finished_at {UTC_TIME}
total_tests int64
passed int64
failed int64
errors int64
skipped int64
prompt_tokens int64
completion_tokens int64
cost_usd float64
judge_cost_usd float64
total_cost_usd float64
unpriced_model_calls int64
unpriced_judge_calls int64
subset boolean
subset_label string
selected_cases Int64
benchmark_cases Int64
benchmark_version string
scoring_version Int64
judges string
judge_policy string
calibration_id Int64
options string
""")

#: One row per run with its headline figures (as the summary and the report give them): `scores(db)`.
#: Scoring version 3's figures, then version 2's score and pass rate where the run was scored with it.
SCORE_COLUMNS = _columns("""
run_id int64
model string
status string
subset_label string
selected_cases Int64
benchmark_cases Int64
scoring_version int64
scored_now bool
layout string
harm_rate Float64
harm_rate_low Float64
harm_rate_high Float64
care_score Float64
care_score_low Float64
care_score_high Float64
critical_harm_rate Float64
critical_harm_rate_low Float64
critical_harm_rate_high Float64
over_escalation_rate Float64
over_escalation_rate_low Float64
over_escalation_rate_high Float64
perfect_reply_rate Float64
perfect_reply_rate_low Float64
perfect_reply_rate_high Float64
passed int64
failed int64
errors int64
skipped int64
gate string
critical_failed_raw int64
critical_failed_confirmed int64
v2_score Float64
v2_pass_rate Float64
cost_usd float64
judge_cost_usd float64
total_cost_usd float64
unpriced_calls int64
""")


def names(columns: tuple[Column, ...]) -> tuple[str, ...]:
    return tuple(column.name for column in columns)


#: The Result columns' names, in order: the export's header.
RESULT_NAMES = names(RESULT_COLUMNS)


def result_values(record: ExportRow) -> tuple[Any, ...]:
    """One Result's values in RESULT_COLUMNS order, its message without credentials (a database
    written before errors were redacted may hold one): what every export format and results(db) show."""
    values = {name: getattr(record, name) for name in RESULT_NAMES}
    values["reason"] = redact(values["reason"]) if values["reason"] else values["reason"]
    return tuple(values.values())
