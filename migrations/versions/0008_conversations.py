"""conversations: each Result's layout and its full message list

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03 09:00:00

Adds, on `result`, `layout` ("seed" or "deployed": how the case was sent, README "Layouts") and
`messages` (JSON, JSONB on PostgreSQL: every message of the case as sent, the model's replies
included, when there is more than the one user message of `prompt`). Both are NULL in a Result
stored before this revision: it was sent in the seed layout as one user message. Adding nullable
columns copies no table; on the way down SQLite copies `result` without them, with 0003's counter
triggers dropped meanwhile and put back after (as 0005).
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = ("layout", "messages")


def upgrade() -> None:
    with op.batch_alter_table("result", schema=None) as batch_op:
        batch_op.add_column(sa.Column("layout", sqlmodel.sql.sqltypes.AutoString(), nullable=True))
        batch_op.add_column(
            sa.Column("messages", sa.JSON().with_variant(JSONB(), "postgresql"), nullable=True)
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
    triggers = _sqlite_triggers()
    for name in triggers:
        op.execute(f"DROP TRIGGER {name}")
    with op.batch_alter_table("result", schema=None) as batch_op:
        for name in reversed(COLUMNS):
            batch_op.drop_column(name)
    for sql in triggers.values():
        op.execute(sql)
