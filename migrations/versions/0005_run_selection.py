"""run selection: whether a run is a subset of its benchmark, and how many cases it selected

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30 09:00:00

Adds, on `evaluationrun`, `subset` (the session selected fewer cases than the benchmark holds for the
model: -k, --lf, -m, --helmbench-select, --helmbench-sample, node ids, --deselect), `selected_cases`
and `benchmark_cases`. All three are NULL in a run stored before this revision (its selection is
unknown). Adding nullable columns copies no table; on the way down SQLite copies `evaluationrun`
without them, with the run counter triggers of 0003 dropped meanwhile and put back after (as 0004).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = ("subset", "selected_cases", "benchmark_cases")


def upgrade() -> None:
    with op.batch_alter_table("evaluationrun", schema=None) as batch_op:
        batch_op.add_column(sa.Column("subset", sa.Boolean(), nullable=True))
        batch_op.add_column(sa.Column("selected_cases", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("benchmark_cases", sa.Integer(), nullable=True))


def _sqlite_triggers() -> dict[str, str]:
    """The triggers on `result` (0003's run counters), by name, with their SQL."""
    if op.get_bind().dialect.name != "sqlite":
        return {}
    rows = op.get_bind().exec_driver_sql(
        "select name, sql from sqlite_master where type = 'trigger' and tbl_name = 'result'"
    )
    return {name: sql for name, sql in rows}


def downgrade() -> None:
    triggers = _sqlite_triggers()
    for name in triggers:
        op.execute(f"DROP TRIGGER {name}")
    with op.batch_alter_table("evaluationrun", schema=None) as batch_op:
        for name in reversed(COLUMNS):
            batch_op.drop_column(name)
    for sql in triggers.values():
        op.execute(sql)
