"""What earlier runs stored, read for a resume or a retry of errors (execution/resume.py plans from it)
and for --helmbench-changed (execution/changed.py decides from it).

Kept in storage so that execution never reads the database itself: the state hands this plain data
(run ids, each case's last status and hashes) to `ResumePlan` and `Baseline`.
"""

from __future__ import annotations

from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session, select

from ..execution.changed import Baseline, PriorCase
from ..execution.resume import ResumeError, ResumePlan, case_key
from ..status import RunStatus
from .engine import (
    SchemaState,
    StorageError,
    check_usable,
    describe_error,
    make_engine,
    parse_url,
    read_schema,
    safe_url,
    sqlite_file,
    upgrade,
)
from .tables import LLM, EvaluationRun, Result, Scenario


def _latest_runs(
    session: Session, models: list[str], incomplete_only: bool, run_key: str | None = None
) -> dict[str, int]:
    found: dict[str, int] = {}
    for model in models:
        query = (
            select(EvaluationRun.id).join(LLM, LLM.id == EvaluationRun.llm_id).where(LLM.model_id == model)
        )
        if run_key is not None:  # a shard resumes its key's run, whatever other runs came since
            query = query.where(EvaluationRun.run_key == run_key)
        if incomplete_only:
            query = query.where(EvaluationRun.status != RunStatus.COMPLETED)
        run_id = session.exec(query.order_by(EvaluationRun.id.desc())).first()
        if run_id is not None:
            found[model] = run_id
    return found


def build_plan(
    engine: Engine, models: list[str], which: str, errors_only: bool, *, run_key: str | None = None
) -> ResumePlan:
    """`which` is 'latest' (each model's newest incomplete run; for errors, its newest run; with a
    run key, the key's run) or a run id."""
    with Session(engine) as session:
        if which == "latest":
            runs = _latest_runs(session, models, incomplete_only=not errors_only, run_key=run_key)
        else:
            try:
                run_id = int(which)
            except ValueError:
                raise ResumeError(
                    f"{which!r} is not a run id (use a number, or no value for the latest run)"
                ) from None
            row = session.exec(
                select(EvaluationRun, LLM)
                .join(LLM, LLM.id == EvaluationRun.llm_id)
                .where(EvaluationRun.id == run_id)
            ).first()
            if row is None:
                raise ResumeError(f"there is no run {run_id} in the database (see `helmbench costs`)")
            if row[1].model_id not in models:
                raise ResumeError(
                    f"run {run_id} evaluated {row[1].model_id}, which is not among the selected models "
                    f"({', '.join(models)})"
                )
            runs = {row[1].model_id: run_id}
        prior: dict[str, dict[str, list[str | None]]] = {}
        for model, run_id in runs.items():
            rows = session.exec(
                select(
                    Result.case_code, Result.repeat_index, Result.status, Result.request_hash, Result.layout
                )
                .where(Result.run_id == run_id)
                .order_by(Result.id)
            ).all()
            prior[model] = {
                case_key(code, repeat, layout): [status, digest]
                for code, repeat, status, digest, layout in rows
            }
    return ResumePlan(runs=runs, prior=prior, errors_only=errors_only)


def changed_baseline(db_url: str, models: list[str]) -> Baseline:
    """Each model's newest completed run and each case's newest Result among its completed runs.

    Never creates a database: no SQLite file, or no HELMBench tables, is an empty baseline (every case
    runs). An older schema is migrated, as the run itself would."""
    path = sqlite_file(parse_url(db_url))
    if path is not None and not path.is_file():
        return Baseline()
    engine = make_engine(db_url)
    try:
        schema = read_schema(engine)
        if schema.state is SchemaState.EMPTY:
            return Baseline()
        if schema.state is not SchemaState.CURRENT:
            check_usable(schema, db_url)
            upgrade(db_url)
        with Session(engine) as session:
            return _baseline(session, models)
    except SQLAlchemyError as exc:
        raise StorageError(f"cannot read the database {safe_url(db_url)}: {describe_error(exc)}") from None
    finally:
        engine.dispose()


def _baseline(session: Session, models: list[str]) -> Baseline:
    baseline = Baseline()
    for model in models:
        completed = (
            select(EvaluationRun.id)
            .join(LLM, LLM.id == EvaluationRun.llm_id)
            .where(LLM.model_id == model, EvaluationRun.status == RunStatus.COMPLETED)
        )
        latest = session.exec(completed.order_by(EvaluationRun.id.desc())).first()
        if latest is None:
            continue
        baseline.latest_run[model] = latest
        newest = (
            select(func.max(Result.id))
            .where(Result.run_id.in_(completed))  # type: ignore[attr-defined]
            .group_by(Result.case_code, Result.repeat_index, Result.layout)
        )
        rows = session.exec(
            select(
                Result.case_code,
                Result.repeat_index,
                Result.status,
                Result.prompt_hash,
                Scenario.content_hash,
                Result.run_id,
                Result.layout,
            )
            .join(Scenario, Scenario.id == Result.scenario_id, isouter=True)
            .where(Result.id.in_(newest))  # type: ignore[union-attr]
        ).all()
        baseline.prior[model] = {
            case_key(code, repeat, layout): PriorCase(status, prompt_hash, scenario_hash, run_id)
            for code, repeat, status, prompt_hash, scenario_hash, run_id, layout in rows
        }
    return baseline
