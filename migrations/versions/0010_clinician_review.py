"""clinician review: studies of judged replies rated blind by people, adjudicated, compared with the judge

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-10 09:00:00

The review workbench (`helmbench review`, `helmbench serve`) keeps its studies in the results database,
beside the runs they sample. Adds seven tables and touches no existing one (every Result and run is
kept as it was):

- `reviewstudy`: a sample of one run's judged replies, how many raters rate each item, the strata and
  over-sampled groups it was drawn with, the rubrics as they were judged (JSON), the break settings
  and the calibration its agreement was last stored as;
- `reviewitem`: one judged reply (a Result, and a conversation's turn) and the rubric check whose judge
  verdict the raters are compared with;
- `reviewer`: a study's raters and adjudicators, known by the sha256 of their link's token only;
- `reviewassignment`: which rater rates which item;
- `reviewrating` and `reviewadjudication`: every answer and every final verdict, an edit being a new
  revision (never an update), so the history is kept;
- `resultflag`: what the workbench filters on from a Result's evaluation details (judged, judges
  disagreeing, numbers in no entry), read once per run.

JSON columns are JSONB on PostgreSQL, as everywhere since 0006. On the way down the seven tables are
dropped (the runs and Results they point at stay).
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON_VALUE = sa.JSON().with_variant(JSONB(), "postgresql")
TEXT = sqlmodel.sql.sqltypes.AutoString


def _study() -> None:
    op.create_table(
        "reviewstudy",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("judge", TEXT(), nullable=True),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("raters_per_item", sa.Integer(), nullable=False),
        sa.Column("strata", JSON_VALUE, nullable=False),
        sa.Column("include", JSON_VALUE, nullable=False),
        sa.Column("rubrics", JSON_VALUE, nullable=False),
        sa.Column("break_items", sa.Integer(), nullable=False),
        sa.Column("break_minutes", sa.Integer(), nullable=False),
        sa.Column("calibration_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["calibration_id"], ["judgecalibration.id"]),
        sa.ForeignKeyConstraint(["run_id"], ["evaluationrun.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_reviewstudy_run_id", "reviewstudy", ["run_id"], unique=False)
    op.create_table(
        "reviewitem",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("result_id", sa.Integer(), nullable=False),
        sa.Column("turn", sa.Integer(), nullable=True),
        sa.Column("check_name", TEXT(), nullable=False),
        sa.Column("rubric_hash", TEXT(), nullable=False),
        sa.Column("stratum", TEXT(), nullable=False),
        sa.Column("reasons", JSON_VALUE, nullable=False),
        sa.Column("judge_passed", sa.Boolean(), nullable=True),
        sa.Column("judge_answers", JSON_VALUE, nullable=False),
        sa.ForeignKeyConstraint(["result_id"], ["result.id"]),
        sa.ForeignKeyConstraint(["study_id"], ["reviewstudy.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("study_id", "position"),
    )
    op.create_index("ix_reviewitem_result_id", "reviewitem", ["result_id"], unique=False)
    op.create_index("ix_reviewitem_rubric_hash", "reviewitem", ["rubric_hash"], unique=False)
    op.create_index("ix_reviewitem_study_id", "reviewitem", ["study_id"], unique=False)


def _reviewers() -> None:
    op.create_table(
        "reviewer",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("name", TEXT(), nullable=False),
        sa.Column("role", TEXT(), nullable=False),
        sa.Column("token_hash", TEXT(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("warned_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("sitting_started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("sitting_items", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["study_id"], ["reviewstudy.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("study_id", "name"),
    )
    op.create_index("ix_reviewer_study_id", "reviewer", ["study_id"], unique=False)
    op.create_index("ix_reviewer_token_hash", "reviewer", ["token_hash"], unique=True)
    op.create_table(
        "reviewassignment",
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("reviewer_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["item_id"], ["reviewitem.id"]),
        sa.ForeignKeyConstraint(["reviewer_id"], ["reviewer.id"]),
        sa.PrimaryKeyConstraint("item_id", "reviewer_id"),
    )
    op.create_index("ix_reviewassignment_reviewer_id", "reviewassignment", ["reviewer_id"], unique=False)


def _answers() -> None:
    op.create_table(
        "reviewrating",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("reviewer_id", sa.Integer(), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("verdict", TEXT(), nullable=False),
        sa.Column("answers", JSON_VALUE, nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["item_id"], ["reviewitem.id"]),
        sa.ForeignKeyConstraint(["reviewer_id"], ["reviewer.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("item_id", "reviewer_id", "revision"),
    )
    op.create_index("ix_reviewrating_item_id", "reviewrating", ["item_id"], unique=False)
    op.create_index("ix_reviewrating_reviewer_id", "reviewrating", ["reviewer_id"], unique=False)
    op.create_table(
        "reviewadjudication",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("reviewer_id", sa.Integer(), nullable=True),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("verdict", TEXT(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["item_id"], ["reviewitem.id"]),
        sa.ForeignKeyConstraint(["reviewer_id"], ["reviewer.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("item_id", "revision"),
    )
    op.create_index("ix_reviewadjudication_item_id", "reviewadjudication", ["item_id"], unique=False)
    op.create_table(
        "resultflag",
        sa.Column("result_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("judged", sa.Boolean(), nullable=False),
        sa.Column("disagreement", sa.Boolean(), nullable=False),
        sa.Column("unknown_numbers", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["result_id"], ["result.id"]),
        sa.ForeignKeyConstraint(["run_id"], ["evaluationrun.id"]),
        sa.PrimaryKeyConstraint("result_id"),
    )
    op.create_index("ix_resultflag_run_id", "resultflag", ["run_id"], unique=False)


def upgrade() -> None:
    _study()
    _reviewers()
    _answers()


TABLES = (
    "resultflag",
    "reviewadjudication",
    "reviewrating",
    "reviewassignment",
    "reviewer",
    "reviewitem",
    "reviewstudy",
)


def downgrade() -> None:
    for table in TABLES:  # dependants first
        op.drop_table(table)
