"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-21 06:06:32.957068
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "benchmark",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("version", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("content_hash", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("version", "content_hash"),
    )
    with op.batch_alter_table("benchmark", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_benchmark_content_hash"), ["content_hash"], unique=False)

    op.create_table(
        "condition",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("code", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("title", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("severity", sa.Integer(), nullable=False),
        sa.Column("meta", sa.JSON(), nullable=False),
        sa.Column("content_hash", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("code", "content_hash"),
    )
    with op.batch_alter_table("condition", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_condition_code"), ["code"], unique=False)

    op.create_table(
        "llm",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("model_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("llm", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_llm_model_id"), ["model_id"], unique=True)

    op.create_table(
        "usercontext",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("code", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("title", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("severity", sa.Integer(), nullable=False),
        sa.Column("meta", sa.JSON(), nullable=False),
        sa.Column("content_hash", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("code", "content_hash"),
    )
    with op.batch_alter_table("usercontext", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_usercontext_code"), ["code"], unique=False)

    op.create_table(
        "evaluationrun",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("benchmark_id", sa.Integer(), nullable=False),
        sa.Column("llm_id", sa.Integer(), nullable=False),
        sa.Column("session_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("status", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("options", sa.JSON(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("total_tests", sa.Integer(), nullable=False),
        sa.Column("passed_tests", sa.Integer(), nullable=False),
        sa.Column("failed_tests", sa.Integer(), nullable=False),
        sa.Column("error_tests", sa.Integer(), nullable=False),
        sa.Column("skipped_tests", sa.Integer(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=False),
        sa.Column("judge_cost_usd", sa.Float(), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["benchmark_id"],
            ["benchmark.id"],
        ),
        sa.ForeignKeyConstraint(
            ["llm_id"],
            ["llm.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("evaluationrun", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_evaluationrun_benchmark_id"), ["benchmark_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_evaluationrun_llm_id"), ["llm_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_evaluationrun_session_id"), ["session_id"], unique=False)

    op.create_table(
        "pillar",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("benchmark_id", sa.Integer(), nullable=False),
        sa.Column("code", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("name", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("content_hash", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.ForeignKeyConstraint(
            ["benchmark_id"],
            ["benchmark.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("benchmark_id", "code", "content_hash"),
    )
    with op.batch_alter_table("pillar", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_pillar_benchmark_id"), ["benchmark_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_pillar_code"), ["code"], unique=False)

    op.create_table(
        "behaviour",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("pillar_id", sa.Integer(), nullable=False),
        sa.Column("code", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("full_code", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("title", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("compliance_criteria", sa.Text(), nullable=False),
        sa.Column("content_hash", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.ForeignKeyConstraint(
            ["pillar_id"],
            ["pillar.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("pillar_id", "full_code", "content_hash"),
    )
    with op.batch_alter_table("behaviour", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_behaviour_full_code"), ["full_code"], unique=False)
        batch_op.create_index(batch_op.f("ix_behaviour_pillar_id"), ["pillar_id"], unique=False)

    op.create_table(
        "scenario",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("behaviour_id", sa.Integer(), nullable=False),
        sa.Column("code", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("full_code", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("title", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("category", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("response_schema", sa.JSON(), nullable=False),
        sa.Column("evaluation_config", sa.JSON(), nullable=False),
        sa.Column("criteria", sa.Text(), nullable=True),
        sa.Column("risk", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("critical", sa.Boolean(), nullable=False),
        sa.Column("meta", sa.JSON(), nullable=False),
        sa.Column("content_hash", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.ForeignKeyConstraint(
            ["behaviour_id"],
            ["behaviour.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("behaviour_id", "full_code", "content_hash"),
    )
    with op.batch_alter_table("scenario", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_scenario_behaviour_id"), ["behaviour_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_scenario_full_code"), ["full_code"], unique=False)

    op.create_table(
        "perturbation",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("scenario_id", sa.Integer(), nullable=False),
        sa.Column("code", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("full_code", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("title", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("severity", sa.Integer(), nullable=False),
        sa.Column("style", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("meta", sa.JSON(), nullable=False),
        sa.Column("content_hash", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.ForeignKeyConstraint(
            ["scenario_id"],
            ["scenario.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("scenario_id", "code", "content_hash"),
    )
    with op.batch_alter_table("perturbation", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_perturbation_full_code"), ["full_code"], unique=False)
        batch_op.create_index(batch_op.f("ix_perturbation_scenario_id"), ["scenario_id"], unique=False)

    op.create_table(
        "scenarioconditionlink",
        sa.Column("scenario_id", sa.Integer(), nullable=False),
        sa.Column("condition_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["condition_id"],
            ["condition.id"],
        ),
        sa.ForeignKeyConstraint(
            ["scenario_id"],
            ["scenario.id"],
        ),
        sa.PrimaryKeyConstraint("scenario_id", "condition_id"),
    )
    op.create_table(
        "scenariousercontextlink",
        sa.Column("scenario_id", sa.Integer(), nullable=False),
        sa.Column("user_context_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["scenario_id"],
            ["scenario.id"],
        ),
        sa.ForeignKeyConstraint(
            ["user_context_id"],
            ["usercontext.id"],
        ),
        sa.PrimaryKeyConstraint("scenario_id", "user_context_id"),
    )
    op.create_table(
        "result",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("scenario_id", sa.Integer(), nullable=False),
        sa.Column("condition_id", sa.Integer(), nullable=False),
        sa.Column("user_context_id", sa.Integer(), nullable=True),
        sa.Column("perturbation_id", sa.Integer(), nullable=False),
        sa.Column("case_code", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("nodeid", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("status", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("prompt_hash", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("raw_response", sa.Text(), nullable=True),
        sa.Column("parsed_answer", sa.JSON(), nullable=True),
        sa.Column("expected", sa.JSON(), nullable=True),
        sa.Column("actual", sa.JSON(), nullable=True),
        sa.Column("evaluation_details", sa.JSON(), nullable=False),
        sa.Column("latency_ms", sa.Float(), nullable=True),
        sa.Column("prompt_tokens", sa.Integer(), nullable=True),
        sa.Column("completion_tokens", sa.Integer(), nullable=True),
        sa.Column("cost_usd", sa.Float(), nullable=True),
        sa.Column("judge_cost_usd", sa.Float(), nullable=True),
        sa.Column("judge_prompt_tokens", sa.Integer(), nullable=True),
        sa.Column("judge_completion_tokens", sa.Integer(), nullable=True),
        sa.Column("finish_reason", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["condition_id"],
            ["condition.id"],
        ),
        sa.ForeignKeyConstraint(
            ["perturbation_id"],
            ["perturbation.id"],
        ),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["evaluationrun.id"],
        ),
        sa.ForeignKeyConstraint(
            ["scenario_id"],
            ["scenario.id"],
        ),
        sa.ForeignKeyConstraint(
            ["user_context_id"],
            ["usercontext.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("result", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_result_case_code"), ["case_code"], unique=False)
        batch_op.create_index(batch_op.f("ix_result_prompt_hash"), ["prompt_hash"], unique=False)
        batch_op.create_index(batch_op.f("ix_result_run_id"), ["run_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_result_scenario_id"), ["scenario_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("result", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_result_scenario_id"))
        batch_op.drop_index(batch_op.f("ix_result_run_id"))
        batch_op.drop_index(batch_op.f("ix_result_prompt_hash"))
        batch_op.drop_index(batch_op.f("ix_result_case_code"))

    op.drop_table("result")
    op.drop_table("scenariousercontextlink")
    op.drop_table("scenarioconditionlink")
    with op.batch_alter_table("perturbation", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_perturbation_scenario_id"))
        batch_op.drop_index(batch_op.f("ix_perturbation_full_code"))

    op.drop_table("perturbation")
    with op.batch_alter_table("scenario", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_scenario_full_code"))
        batch_op.drop_index(batch_op.f("ix_scenario_behaviour_id"))

    op.drop_table("scenario")
    with op.batch_alter_table("behaviour", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_behaviour_pillar_id"))
        batch_op.drop_index(batch_op.f("ix_behaviour_full_code"))

    op.drop_table("behaviour")
    with op.batch_alter_table("pillar", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_pillar_code"))
        batch_op.drop_index(batch_op.f("ix_pillar_benchmark_id"))

    op.drop_table("pillar")
    with op.batch_alter_table("evaluationrun", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_evaluationrun_session_id"))
        batch_op.drop_index(batch_op.f("ix_evaluationrun_llm_id"))
        batch_op.drop_index(batch_op.f("ix_evaluationrun_benchmark_id"))

    op.drop_table("evaluationrun")
    with op.batch_alter_table("usercontext", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_usercontext_code"))

    op.drop_table("usercontext")
    with op.batch_alter_table("llm", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_llm_model_id"))

    op.drop_table("llm")
    with op.batch_alter_table("condition", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_condition_code"))

    op.drop_table("condition")
    with op.batch_alter_table("benchmark", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_benchmark_content_hash"))

    op.drop_table("benchmark")
