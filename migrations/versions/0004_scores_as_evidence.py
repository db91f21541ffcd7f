"""scores as evidence: judge calibrations, and what each run was scored with

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24 08:00:00

Adds the `judgecalibration` table and, on `evaluationrun`, the benchmark and scoring versions, the
stored headline scores, the marking models (`judges`, [] for an older run), the panel policy and the
calibration the run was judged under. Every new run column is NULL (or []) in a run stored before this
revision: it was scored with scoring version 1 and a single, uncalibrated judge.

SQLite: the calibration foreign key is added inline (ALTER TABLE ... ADD COLUMN ... REFERENCES), the
form `CREATE TABLE` gives it, so no table is copied on the way up. On the way down the column cannot be
dropped in place (SQLite refuses to drop a column a foreign key uses): the table is copied without it,
with the run counter triggers of 0003 dropped meanwhile (they name `evaluationrun`, which SQLite then
refuses to rename into place) and put back after.
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# PostgreSQL's own name for the constraint CREATE TABLE makes, so a migrated database and one built
# from the models are alike.
CALIBRATION_FK = "evaluationrun_calibration_id_fkey"


def _is_sqlite() -> bool:
    return op.get_bind().dialect.name == "sqlite"


def upgrade() -> None:
    op.create_table(
        "judgecalibration",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("judge", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("judge_settings", sa.JSON(), nullable=False),
        sa.Column("rubric_hashes", sa.JSON(), nullable=False),
        sa.Column("rubrics_hash", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("label_set_hash", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("labeller", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("n_items", sa.Integer(), nullable=False),
        sa.Column("figures", sa.JSON(), nullable=False),
        sa.Column("benchmark_version", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("judgecalibration", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_judgecalibration_judge"), ["judge"], unique=False)
        batch_op.create_index(batch_op.f("ix_judgecalibration_rubrics_hash"), ["rubrics_hash"], unique=False)

    with op.batch_alter_table("evaluationrun", schema=None) as batch_op:
        batch_op.add_column(sa.Column("benchmark_version", sqlmodel.sql.sqltypes.AutoString(), nullable=True))
        batch_op.add_column(sa.Column("scoring_version", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("scores", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("judges", sa.JSON(), nullable=False, server_default="[]"))
        batch_op.add_column(sa.Column("judge_policy", sqlmodel.sql.sqltypes.AutoString(), nullable=True))
    if _is_sqlite():
        op.execute(
            "ALTER TABLE evaluationrun ADD COLUMN calibration_id INTEGER REFERENCES judgecalibration (id)"
        )
    else:
        op.add_column("evaluationrun", sa.Column("calibration_id", sa.Integer(), nullable=True))
        op.create_foreign_key(CALIBRATION_FK, "evaluationrun", "judgecalibration", ["calibration_id"], ["id"])


def _sqlite_triggers() -> dict[str, str]:
    """The triggers on `result` (0003's run counters), by name, with their SQL."""
    rows = op.get_bind().exec_driver_sql(
        "select name, sql from sqlite_master where type = 'trigger' and tbl_name = 'result'"
    )
    return {name: sql for name, sql in rows}


def downgrade() -> None:
    triggers = _sqlite_triggers() if _is_sqlite() else {}
    for name in triggers:
        op.execute(f"DROP TRIGGER {name}")
    if not _is_sqlite():
        op.drop_constraint(CALIBRATION_FK, "evaluationrun", type_="foreignkey")
    with op.batch_alter_table("evaluationrun", schema=None) as batch_op:
        batch_op.drop_column("calibration_id")
        batch_op.drop_column("judge_policy")
        batch_op.drop_column("judges")
        batch_op.drop_column("scores")
        batch_op.drop_column("scoring_version")
        batch_op.drop_column("benchmark_version")
    for sql in triggers.values():
        op.execute(sql)

    with op.batch_alter_table("judgecalibration", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_judgecalibration_rubrics_hash"))
        batch_op.drop_index(batch_op.f("ix_judgecalibration_judge"))

    op.drop_table("judgecalibration")
