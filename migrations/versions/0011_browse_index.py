"""browse index: the workbench's case filters read from one index, not from every Result's row

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-12 09:00:00

`helmbench serve`'s browse page filters and pages the Results by run, status, layout, scenario,
condition and user context. On SQLite `layout` comes after a Result's long text and JSON columns
(prompt, reply, evaluation details), so reading it for every row walked each row's overflow pages:
counting 20,000 Results took a quarter of a second. Adds the index `ix_result_browse` on those six
columns, which answers the filters and the count without touching the rows. No row is changed; on the
way down the index is dropped.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = ["run_id", "status", "layout", "scenario_id", "condition_id", "user_context_id"]


def upgrade() -> None:
    op.create_index("ix_result_browse", "result", COLUMNS)


def downgrade() -> None:
    op.drop_index("ix_result_browse", table_name="result")
