"""run counters kept by SQLite triggers

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21 09:20:00

A run's counters follow its Result rows inside SQLite (one statement per Result instead of an INSERT
and an UPDATE). The SQL is frozen here as it was when this revision was written; the models carry the
live copy for new databases, and a test proves the two give the same schema.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TRIGGERS = {
    "result_counts_after_insert": """CREATE TRIGGER result_counts_after_insert AFTER INSERT ON result
BEGIN
    UPDATE evaluationrun SET
        passed_tests = passed_tests + (NEW.status = 'passed'),
        failed_tests = failed_tests + (NEW.status = 'failed'),
        error_tests = error_tests + (NEW.status = 'error'),
        skipped_tests = skipped_tests + (NEW.status = 'skipped'),
        total_tests = total_tests + (NEW.status IN ('passed', 'failed')),
        cost_usd = cost_usd + COALESCE(NEW.cost_usd, 0),
        judge_cost_usd = judge_cost_usd + COALESCE(NEW.judge_cost_usd, 0),
        prompt_tokens = prompt_tokens + COALESCE(NEW.prompt_tokens, 0),
        completion_tokens = completion_tokens + COALESCE(NEW.completion_tokens, 0)
    WHERE id = NEW.run_id;
END""",
    "result_counts_after_delete": """CREATE TRIGGER result_counts_after_delete AFTER DELETE ON result
BEGIN
    UPDATE evaluationrun SET
        passed_tests = passed_tests - (OLD.status = 'passed'),
        failed_tests = failed_tests - (OLD.status = 'failed'),
        error_tests = error_tests - (OLD.status = 'error'),
        skipped_tests = skipped_tests - (OLD.status = 'skipped'),
        total_tests = total_tests - (OLD.status IN ('passed', 'failed'))
    WHERE id = OLD.run_id;
END""",
}


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for sql in TRIGGERS.values():
            op.execute(sql)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for name in TRIGGERS:
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
