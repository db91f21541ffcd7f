"""scores by version: each run's headline figures under every scoring version it was scored with

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-08 09:00:00

Scoring version 3 (harm rate, care score, scenarios weighed by design) replaces the headline of
version 2 (a severity-weighted pass score). `helmbench rescore` brings a stored run to version 3; the
figures it was scored with before must stay readable, so runs scored under version 2 can still be
compared with one another. Adds the table `runscore` (run id, scoring version, the figures as JSON,
JSONB on PostgreSQL, and when they were stored), and copies into it every figure a run already
stored on `evaluationrun.scores`, under its `scoring_version` (1 when the run stored none: scored
before versioning). `evaluationrun` keeps its columns, and `result` is not touched: every Result is
kept as it was. On the way down the table is dropped (the run rows still hold their newest figures).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "runscore",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("scoring_version", sa.Integer(), nullable=False),
        sa.Column("figures", sa.JSON().with_variant(JSONB(), "postgresql"), nullable=False),
        sa.Column("scored_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["evaluationrun.id"]),
        sa.PrimaryKeyConstraint("run_id", "scoring_version"),
    )
    # Every stored figure set (a JSON object: never SQL NULL or JSON null), under the version it was
    # scored with; JSON to JSON, JSONB to JSONB.
    kind = "jsonb_typeof(scores)" if op.get_bind().dialect.name == "postgresql" else "json_type(scores)"
    op.execute(
        "INSERT INTO runscore (run_id, scoring_version, figures, scored_at) "
        "SELECT id, COALESCE(scoring_version, 1), scores, COALESCE(finished_at, started_at) "
        f"FROM evaluationrun WHERE scores IS NOT NULL AND {kind} = 'object'"
    )


def downgrade() -> None:
    op.drop_table("runscore")
