"""What earlier runs stored, read for a resume or a retry of errors (execution/resume.py plans from it).

Kept in storage so that execution never reads the database itself: the state hands this plain data
(run ids, each case's last status and request hash) to `ResumePlan`.
"""

from __future__ import annotations

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from ..execution.resume import ResumeError, ResumePlan, case_key
from ..status import RunStatus
from .tables import LLM, EvaluationRun, Result


def _latest_runs(session: Session, models: list[str], incomplete_only: bool) -> dict[str, int]:
    found: dict[str, int] = {}
    for model in models:
        query = (
            select(EvaluationRun.id).join(LLM, LLM.id == EvaluationRun.llm_id).where(LLM.model_id == model)
        )
        if incomplete_only:
            query = query.where(EvaluationRun.status != RunStatus.COMPLETED)
        run_id = session.exec(query.order_by(EvaluationRun.id.desc())).first()
        if run_id is not None:
            found[model] = run_id
    return found


def build_plan(engine: Engine, models: list[str], which: str, errors_only: bool) -> ResumePlan:
    """`which` is 'latest' (each model's newest incomplete run; for errors, its newest run) or a run id."""
    with Session(engine) as session:
        if which == "latest":
            runs = _latest_runs(session, models, incomplete_only=not errors_only)
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
                select(Result.case_code, Result.repeat_index, Result.status, Result.request_hash)
                .where(Result.run_id == run_id)
                .order_by(Result.id)
            ).all()
            prior[model] = {case_key(code, repeat): [status, digest] for code, repeat, status, digest in rows}
    return ResumePlan(runs=runs, prior=prior, errors_only=errors_only)
