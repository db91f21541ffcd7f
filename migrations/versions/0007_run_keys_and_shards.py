"""run keys and shards: one run across processes, with limits shared by all of them

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02 09:00:00

Adds, on `evaluationrun`, `run_key` (--helmbench-run-key: every process given the key joins the
model's one run) and `shard_count` (--helmbench-shard K/N: N), with a unique index on (llm_id,
run_key) so two processes creating the run at once end with one; and the tables `runshard` (each
shard's progress: the run is completed once every shard finished), `fleetspend` (the USD spent by
every process of a key: one --helmbench-max-cost ceiling) and `fleetstop` (a model stopped in one
process of a key is stopped in all). Both new columns are NULL in a run stored before. On the way
down SQLite copies `evaluationrun` without them, with 0003's counter triggers dropped meanwhile and
put back after (as 0005).
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RUN_KEY_INDEX = "ix_evaluationrun_llm_run_key"


def upgrade() -> None:
    with op.batch_alter_table("evaluationrun", schema=None) as batch_op:
        batch_op.add_column(sa.Column("run_key", sqlmodel.sql.sqltypes.AutoString(), nullable=True))
        batch_op.add_column(sa.Column("shard_count", sa.Integer(), nullable=True))
    op.create_index(RUN_KEY_INDEX, "evaluationrun", ["llm_id", "run_key"], unique=True)
    op.create_table(
        "runshard",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("shard", sa.Integer(), nullable=False),
        sa.Column("status", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("session_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["evaluationrun.id"]),
        sa.PrimaryKeyConstraint("run_id", "shard"),
    )
    op.create_table(
        "fleetspend",
        sa.Column("run_key", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("spent_usd", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("run_key"),
    )
    op.create_table(
        "fleetstop",
        sa.Column("run_key", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("model_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("run_key", "model_id"),
    )


def _sqlite_triggers() -> dict[str, str]:
    """The triggers on `result` (0003's run counters), by name, with their SQL."""
    if op.get_bind().dialect.name != "sqlite":
        return {}
    rows = op.get_bind().exec_driver_sql(
        "select name, sql from sqlite_master where type = 'trigger' and tbl_name = 'result'"
    )
    return {name: sql for name, sql in rows}


def downgrade() -> None:
    op.drop_table("fleetstop")
    op.drop_table("fleetspend")
    op.drop_table("runshard")
    op.drop_index(RUN_KEY_INDEX, table_name="evaluationrun")
    triggers = _sqlite_triggers()
    for name in triggers:
        op.execute(f"DROP TRIGGER {name}")
    with op.batch_alter_table("evaluationrun", schema=None) as batch_op:
        batch_op.drop_column("shard_count")
        batch_op.drop_column("run_key")
    for sql in triggers.values():
        op.execute(sql)
