"""repeats cache and request hash

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21 06:12:33.885046
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "cachedresponse",
        sa.Column("key", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("model_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("raw_response", sa.Text(), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=True),
        sa.Column("completion_tokens", sa.Integer(), nullable=True),
        sa.Column("cost_usd", sa.Float(), nullable=True),
        sa.Column("latency_ms", sa.Float(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )
    with op.batch_alter_table("cachedresponse", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_cachedresponse_model_id"), ["model_id"], unique=False)

    with op.batch_alter_table("result", schema=None) as batch_op:
        batch_op.add_column(sa.Column("repeat_index", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("cached", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch_op.add_column(sa.Column("request_hash", sqlmodel.sql.sqltypes.AutoString(), nullable=True))
        batch_op.create_index(batch_op.f("ix_result_request_hash"), ["request_hash"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("result", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_result_request_hash"))
        batch_op.drop_column("request_hash")
        batch_op.drop_column("cached")
        batch_op.drop_column("repeat_index")

    with op.batch_alter_table("cachedresponse", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_cachedresponse_model_id"))

    op.drop_table("cachedresponse")
