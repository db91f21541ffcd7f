"""JSON columns as JSONB on PostgreSQL

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 09:00:00

PostgreSQL's `json` keeps the text as written: it has no equality, no index and is reparsed on every
read. `jsonb` is stored parsed, compares with `=`, and can be indexed, which a shared team database
queried by analysts needs. Each JSON column is converted in place (`USING col::jsonb`: every stored
value is valid JSON, so every row is kept); `evaluationrun.judges` loses its `'[]'` default for the
conversion and gets it back as jsonb. SQLite has one JSON type (text): nothing to do there.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Every JSON column of the schema at 0005, by table (frozen here: later revisions must not change it).
JSON_COLUMNS = {
    "scenario": ("response_schema", "evaluation_config", "meta"),
    "condition": ("meta",),
    "usercontext": ("meta",),
    "perturbation": ("meta",),
    "judgecalibration": ("judge_settings", "rubric_hashes", "figures"),
    "evaluationrun": ("options", "scores", "judges"),
    "result": ("parsed_answer", "expected", "actual", "evaluation_details"),
}
# Columns with a server default, which must be dropped while the type changes.
DEFAULTS = {("evaluationrun", "judges"): "'[]'"}


def _convert(kind: str) -> None:
    """ALTER every JSON column to `kind` (json or jsonb), one statement per table, on PostgreSQL only."""
    if op.get_bind().dialect.name != "postgresql":
        return
    for table, columns in JSON_COLUMNS.items():
        defaults = [column for column in columns if (table, column) in DEFAULTS]
        for column in defaults:
            op.execute(f"ALTER TABLE {table} ALTER COLUMN {column} DROP DEFAULT")
        changes = ", ".join(f"ALTER COLUMN {column} TYPE {kind} USING {column}::{kind}" for column in columns)
        op.execute(f"ALTER TABLE {table} {changes}")
        for column in defaults:
            op.execute(
                f"ALTER TABLE {table} ALTER COLUMN {column} SET DEFAULT {DEFAULTS[(table, column)]}::{kind}"
            )


def upgrade() -> None:
    _convert("jsonb")


def downgrade() -> None:
    _convert("json")
