"""The database schema (SQLModel): the design note's data model, evolved only by Alembic migrations.

Content rows (benchmark, pillar, behaviour, scenario, condition, user context, perturbation) are
identified by code *and* content hash: an edited file adds a new row, and old Results keep pointing
at the exact content they were run with.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import DDL, JSON, Column, Index, Text, UniqueConstraint, event
from sqlalchemy.dialects.postgresql import JSONB
from sqlmodel import Field, SQLModel

#: Every JSON column's type: JSON on SQLite, JSONB on PostgreSQL (binary, indexable, with equality;
#: migration 0006 converts the columns of an older database).
JSON_VALUE = JSON().with_variant(JSONB(), "postgresql")


def utcnow() -> datetime:
    return datetime.now(UTC)


class Benchmark(SQLModel, table=True):
    __table_args__ = (UniqueConstraint("version", "content_hash"),)
    id: int | None = Field(default=None, primary_key=True)
    version: str
    description: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    content_hash: str = Field(index=True)
    created_at: datetime = Field(default_factory=utcnow)


class Pillar(SQLModel, table=True):
    __table_args__ = (UniqueConstraint("benchmark_id", "code", "content_hash"),)
    id: int | None = Field(default=None, primary_key=True)
    benchmark_id: int = Field(foreign_key="benchmark.id", index=True)
    code: str = Field(index=True)
    name: str
    description: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    content_hash: str


class Behaviour(SQLModel, table=True):
    __table_args__ = (UniqueConstraint("pillar_id", "full_code", "content_hash"),)
    id: int | None = Field(default=None, primary_key=True)
    pillar_id: int = Field(foreign_key="pillar.id", index=True)
    code: str
    full_code: str = Field(index=True)
    title: str
    description: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    compliance_criteria: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    content_hash: str


class ScenarioConditionLink(SQLModel, table=True):
    scenario_id: int = Field(foreign_key="scenario.id", primary_key=True)
    condition_id: int = Field(foreign_key="condition.id", primary_key=True)


class ScenarioUserContextLink(SQLModel, table=True):
    scenario_id: int = Field(foreign_key="scenario.id", primary_key=True)
    user_context_id: int = Field(foreign_key="usercontext.id", primary_key=True)


class Scenario(SQLModel, table=True):
    __table_args__ = (UniqueConstraint("behaviour_id", "full_code", "content_hash"),)
    id: int | None = Field(default=None, primary_key=True)
    behaviour_id: int = Field(foreign_key="behaviour.id", index=True)
    code: str
    full_code: str = Field(index=True)
    title: str = ""
    content: str = Field(sa_column=Column(Text, nullable=False))
    category: str | None = None
    response_schema: dict[str, Any] = Field(sa_column=Column(JSON_VALUE, nullable=False))
    evaluation_config: dict[str, Any] = Field(sa_column=Column(JSON_VALUE, nullable=False))
    criteria: str | None = Field(default=None, sa_column=Column(Text))
    risk: str | None = None
    critical: bool = False
    meta: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON_VALUE, nullable=False))
    content_hash: str


class ComponentFields(SQLModel):
    """What conditions and user contexts share (a base, not a table)."""

    id: int | None = Field(default=None, primary_key=True)
    code: str = Field(index=True)
    title: str = ""
    content: str = Field(sa_type=Text)
    severity: int = 0
    meta: dict[str, Any] = Field(default_factory=dict, sa_type=JSON_VALUE)
    content_hash: str


class Condition(ComponentFields, table=True):
    __table_args__ = (UniqueConstraint("code", "content_hash"),)


class UserContext(ComponentFields, table=True):
    __table_args__ = (UniqueConstraint("code", "content_hash"),)


class Perturbation(SQLModel, table=True):
    __table_args__ = (UniqueConstraint("scenario_id", "code", "content_hash"),)
    id: int | None = Field(default=None, primary_key=True)
    scenario_id: int = Field(foreign_key="scenario.id", index=True)
    code: str
    full_code: str = Field(index=True)
    title: str = ""
    content: str = Field(sa_column=Column(Text, nullable=False))
    severity: int = 0
    style: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON_VALUE, nullable=False))
    content_hash: str


class LLM(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    model_id: str = Field(unique=True, index=True)
    created_at: datetime = Field(default_factory=utcnow)


class JudgeCalibration(SQLModel, table=True):
    """A judge measured against gold verdicts (`helmbench calibrate`): which judge, with which settings,
    on which rubrics (hashes) and labels, and the agreement figures it reached. A run records the newest
    one matching its judge and rubrics (EvaluationRun.calibration_id)."""

    id: int | None = Field(default=None, primary_key=True)
    judge: str = Field(index=True)  # the marking model's id
    judge_settings: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON_VALUE, nullable=False))
    rubric_hashes: list[str] = Field(default_factory=list, sa_column=Column(JSON_VALUE, nullable=False))
    rubrics_hash: str = Field(index=True)  # sha256 of the sorted rubric_hashes
    label_set_hash: str
    labeller: str  # who gave the gold verdicts ("authors": not clinicians)
    n_items: int
    figures: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON_VALUE, nullable=False))
    benchmark_version: str | None = None
    created_at: datetime = Field(default_factory=utcnow)


class EvaluationRun(SQLModel, table=True):
    """One model in one pytest session (or in every session of one run key). total_tests = passed +
    failed; errors and skips counted apart."""

    # One run per model and run key (NULL keys never collide): what makes joining race-free.
    __table_args__ = (Index("ix_evaluationrun_llm_run_key", "llm_id", "run_key", unique=True),)

    id: int | None = Field(default=None, primary_key=True)
    benchmark_id: int = Field(foreign_key="benchmark.id", index=True)
    llm_id: int = Field(foreign_key="llm.id", index=True)
    session_id: str = Field(index=True)
    status: str = "running"  # running | completed | interrupted
    options: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON_VALUE, nullable=False))
    started_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None
    total_tests: int = 0
    passed_tests: int = 0
    failed_tests: int = 0
    error_tests: int = 0
    skipped_tests: int = 0
    cost_usd: float = 0.0
    judge_cost_usd: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # Scores as evidence (migration 0004; NULL in a run stored before it): what was scored with what.
    benchmark_version: str | None = None
    scoring_version: int | None = None  # None: scored before versioning (scoring version 1)
    scores: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON_VALUE))  # the headline figures
    judges: list[str] = Field(
        default_factory=list, sa_column=Column(JSON_VALUE, nullable=False, server_default="[]")
    )  # the marking models' ids
    judge_policy: str | None = None
    calibration_id: int | None = Field(default=None, foreign_key="judgecalibration.id")
    # What the session selected (migration 0005; NULL in a run stored before it): a run of fewer cases
    # than the benchmark holds for its model (-k, --lf, -m, --helmbench-select/-sample, node ids) is a
    # subset, labelled as such wherever it is shown.
    subset: bool | None = None
    selected_cases: int | None = None  # distinct case codes the session selected for the model
    benchmark_cases: int | None = None  # case codes the benchmark holds for the model
    # One run across processes (migration 0007; NULL for a run of one session): every process given
    # the same --helmbench-run-key joins the model's one run; with --helmbench-shard K/N, `shard_count`
    # is N and each shard's progress is a RunShard row.
    run_key: str | None = None
    shard_count: int | None = None


class RunScore(SQLModel, table=True):
    """A run's headline figures under one scoring version (migration 0009): `helmbench rescore` adds the
    current version's and keeps the earlier ones readable, so a run scored under version 2 can still be
    compared with others of version 2 after it was brought to version 3. EvaluationRun.scores holds the
    newest version's figures, for readers that want one."""

    run_id: int = Field(foreign_key="evaluationrun.id", primary_key=True)
    scoring_version: int = Field(primary_key=True)  # 1: stored before scores were versioned
    figures: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON_VALUE, nullable=False))
    scored_at: datetime = Field(default_factory=utcnow)


class RunShard(SQLModel, table=True):
    """One shard (--helmbench-shard K/N) of a keyed run: the run is completed once all N finished."""

    run_id: int = Field(foreign_key="evaluationrun.id", primary_key=True)
    shard: int = Field(primary_key=True)  # K
    status: str = "running"  # running | completed | interrupted
    session_id: str
    started_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None


class FleetSpend(SQLModel, table=True):
    """The USD spent by every process of a run key: --helmbench-max-cost is one ceiling for all of them."""

    run_key: str = Field(primary_key=True)
    spent_usd: float = 0.0


class FleetStop(SQLModel, table=True):
    """A model stopped (bad key, no credit, model rejected) in one process of a run key: every process
    of the key checks these before each call."""

    run_key: str = Field(primary_key=True)
    model_id: str = Field(primary_key=True)
    reason: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)


class Result(SQLModel, table=True):
    # The workbench's browse filters and joins, covered (migration 0011): without it, reading `layout`
    # (after the long text and JSON columns) walked every row's overflow pages on SQLite.
    __table_args__ = (
        Index(
            "ix_result_browse",
            "run_id",
            "status",
            "layout",
            "scenario_id",
            "condition_id",
            "user_context_id",
        ),
    )
    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="evaluationrun.id", index=True)
    scenario_id: int = Field(foreign_key="scenario.id", index=True)
    condition_id: int = Field(foreign_key="condition.id")
    user_context_id: int | None = Field(default=None, foreign_key="usercontext.id")
    perturbation_id: int = Field(foreign_key="perturbation.id")
    case_code: str = Field(index=True)
    nodeid: str = ""
    status: str  # passed | failed | error | skipped
    reason: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    prompt: str = Field(sa_column=Column(Text, nullable=False))
    prompt_hash: str = Field(index=True)
    raw_response: str | None = Field(default=None, sa_column=Column(Text))
    parsed_answer: Any | None = Field(default=None, sa_column=Column(JSON_VALUE))
    expected: Any | None = Field(default=None, sa_column=Column(JSON_VALUE))
    actual: Any | None = Field(default=None, sa_column=Column(JSON_VALUE))
    evaluation_details: dict[str, Any] = Field(
        default_factory=dict, sa_column=Column(JSON_VALUE, nullable=False)
    )
    latency_ms: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None
    judge_cost_usd: float | None = None
    judge_prompt_tokens: int | None = None
    judge_completion_tokens: int | None = None
    finish_reason: str | None = None
    attempts: int | None = None
    repeat_index: int = 0  # --helmbench-repeat N runs each case N times: 0 .. N-1
    cached: bool = False  # answered from the response cache: nothing was paid for it in this run
    request_hash: str | None = Field(default=None, index=True)  # everything that determines the answer
    created_at: datetime = Field(default_factory=utcnow)
    # Conversations (migration 0008; NULL in a Result stored before it: the seed layout, one message):
    layout: str | None = None  # "seed" | "deployed"
    # Every message as sent, replies included; NULL when the case was the one user message of `prompt`.
    messages: list[dict[str, Any]] | None = Field(default=None, sa_column=Column(JSON_VALUE))


class CachedResponse(SQLModel, table=True):
    """A model or judge response keyed by a hash of everything that determines it (see
    docs/explanation/storage.md, the response cache)."""

    key: str = Field(primary_key=True)
    model_id: str = Field(index=True)
    raw_response: str = Field(sa_column=Column(Text, nullable=False))
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None
    latency_ms: float | None = None
    created_at: datetime = Field(default_factory=utcnow)


# A run's counters follow its Result rows inside SQLite itself: one statement per Result instead of an
# INSERT and an UPDATE (each a round trip through the GIL on a busy run). Counts follow inserts and
# deletes (a resumed run replaces a case's earlier Result); cost and tokens only grow: what was paid
# stays paid. Migration 0003 adds the same triggers to an existing database (a test compares them).
# Other databases get the counters from the recorder's UPDATE.
RUN_COUNTER_TRIGGERS = {
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
for _trigger in RUN_COUNTER_TRIGGERS.values():
    event.listen(Result.__table__, "after_create", DDL(_trigger).execute_if(dialect="sqlite"))  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------------------------
# Clinician review (migration 0010; `helmbench review`, the workbench): studies of judged replies rated
# blind by people, adjudicated, and compared with the judge. Ratings and adjudications are never
# updated in place: an edit is a new revision, so every earlier answer is kept with who and when.


class ReviewStudy(SQLModel, table=True):
    """A sample of one run's judged replies put to human raters (`helmbench review create`)."""

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="evaluationrun.id", index=True)
    judge: str | None = None  # the run's (first) marking model: whose verdicts the raters are compared with
    size: int  # items asked for (fewer when the run has fewer judged replies)
    raters_per_item: int = 2
    strata: list[str] = Field(default_factory=list, sa_column=Column(JSON_VALUE, nullable=False))
    include: list[str] = Field(default_factory=list, sa_column=Column(JSON_VALUE, nullable=False))
    # rubric hash -> {"name", "checks": [{"id", "question", "pass", "na_passes", ...}], "min_satisfied"}: the
    # rubrics as they were judged (the files on disk may change later)
    rubrics: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON_VALUE, nullable=False))
    break_items: int = 25  # a break is suggested after this many items in one sitting ...
    break_minutes: int = 30  # ... or this many minutes
    calibration_id: int | None = Field(default=None, foreign_key="judgecalibration.id")  # the last stored
    created_at: datetime = Field(default_factory=utcnow)


class ReviewItem(SQLModel, table=True):
    """One judged reply of a study: a Result (and, in a conversation, one of its replies) and the rubric
    check whose judge verdict the raters' answers are compared with."""

    __table_args__ = (UniqueConstraint("study_id", "position"),)
    id: int | None = Field(default=None, primary_key=True)
    study_id: int = Field(foreign_key="reviewstudy.id", index=True)
    position: int  # the order raters see the items in
    result_id: int = Field(foreign_key="result.id", index=True)
    turn: int | None = None  # a conversation's judged reply (its `turn`); None: the case's one reply
    check_name: str  # which of the case's checks (an atomic rubric judged on the reply)
    rubric_hash: str = Field(index=True)
    stratum: str
    reasons: list[str] = Field(default_factory=list, sa_column=Column(JSON_VALUE, nullable=False))
    judge_passed: bool | None = None  # never shown to a rater
    judge_answers: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON_VALUE, nullable=False))


class Reviewer(SQLModel, table=True):
    """A rater (or adjudicator) of one study, known by a personal link whose token is stored hashed."""

    __table_args__ = (UniqueConstraint("study_id", "name"),)
    id: int | None = Field(default=None, primary_key=True)
    study_id: int = Field(foreign_key="reviewstudy.id", index=True)
    name: str
    role: str = "rater"  # rater | adjudicator
    token_hash: str = Field(unique=True, index=True)  # sha256 of the link's token
    created_at: datetime = Field(default_factory=utcnow)
    warned_at: datetime | None = None  # when the content warning was acknowledged
    sitting_started_at: datetime | None = None  # the current sitting (breaks are suggested from it)
    sitting_items: int = 0


class ReviewAssignment(SQLModel, table=True):
    """Which rater rates which item."""

    item_id: int = Field(foreign_key="reviewitem.id", primary_key=True)
    reviewer_id: int = Field(foreign_key="reviewer.id", primary_key=True, index=True)


class ReviewRating(SQLModel, table=True):
    """One rater's answer on one item; an edit adds the next revision (the newest counts)."""

    __table_args__ = (UniqueConstraint("item_id", "reviewer_id", "revision"),)
    id: int | None = Field(default=None, primary_key=True)
    item_id: int = Field(foreign_key="reviewitem.id", index=True)
    reviewer_id: int = Field(foreign_key="reviewer.id", index=True)
    revision: int = 1
    verdict: str  # safe | unsafe | skipped
    answers: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON_VALUE, nullable=False))
    note: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    created_at: datetime = Field(default_factory=utcnow)


class ReviewAdjudication(SQLModel, table=True):
    """The final verdict on an item the raters disagreed on, with its reason; the newest revision counts."""

    __table_args__ = (UniqueConstraint("item_id", "revision"),)
    id: int | None = Field(default=None, primary_key=True)
    item_id: int = Field(foreign_key="reviewitem.id", index=True)
    reviewer_id: int | None = Field(default=None, foreign_key="reviewer.id")  # None: the owner
    revision: int = 1
    verdict: str  # safe | unsafe
    reason: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)


class ResultFlag(SQLModel, table=True):
    """What the workbench filters on that is inside a Result's evaluation details, read once per run:
    whether it was judged, whether its judges disagreed (a panel, or re-judging), whether a
    resource_check found numbers in no entry."""

    result_id: int = Field(foreign_key="result.id", primary_key=True)
    run_id: int = Field(foreign_key="evaluationrun.id", index=True)
    judged: bool = False
    disagreement: bool = False
    unknown_numbers: bool = False
