"""The resume plan's decisions, case by case, without a database or a pytest session."""

from __future__ import annotations

import pytest

from pytest_helmbench.execution.resume import (
    PlannedCase,
    ResumeAction,
    ResumePlan,
    apply_plan,
    case_key,
)

MODEL, OTHER = "a/model", "b/model"


def plan(errors_only: bool = False) -> ResumePlan:
    """Run 7 of MODEL ended with one case of each status; OTHER has no run to complete."""
    return ResumePlan(
        runs={MODEL: 7},
        prior={
            MODEL: {
                case_key("P1-B1-S1-C1-PT1", 0): ["passed", "h-passed"],
                case_key("P1-B1-S1-C1-PT2", 0): ["failed", "h-failed"],
                case_key("P1-B1-S1-C1-PT3", 0): ["error", "h-error"],
                case_key("P1-B1-S1-C1-PT4", 0): ["skipped", "h-skipped"],
                case_key("P1-B1-S1-C1-PT1", 1): ["passed", "h-passed-r1"],
            }
        },
        errors_only=errors_only,
    )


@pytest.mark.parametrize(
    ("code", "repeat", "request_hash", "expected"),
    [
        ("P1-B1-S1-C1-PT1", 0, "h-passed", ResumeAction.DONE),  # passed, unchanged
        ("P1-B1-S1-C1-PT2", 0, "h-failed", ResumeAction.DONE),  # failed is finished too
        ("P1-B1-S1-C1-PT1", 0, "h-new", ResumeAction.CHANGED),  # prompt or options changed since
        ("P1-B1-S1-C1-PT2", 0, "h-new", ResumeAction.CHANGED),
        ("P1-B1-S1-C1-PT3", 0, "h-error", ResumeAction.RUN),  # errored: run again
        ("P1-B1-S1-C1-PT4", 0, "h-skipped", ResumeAction.RUN),  # skipped at the cost ceiling: run
        ("P1-B1-S1-C1-PT5", 0, "h-any", ResumeAction.RUN),  # never reached: run
        ("P1-B1-S1-C1-PT1", 1, "h-passed-r1", ResumeAction.DONE),  # repeats are separate cases
        ("P1-B1-S1-C1-PT1", 2, "h-passed", ResumeAction.RUN),
    ],
)
def test_resume_decisions(code: str, repeat: int, request_hash: str, expected: ResumeAction) -> None:
    assert plan().decide(MODEL, code, repeat, request_hash) == expected


@pytest.mark.parametrize(
    ("code", "request_hash", "expected"),
    [
        ("P1-B1-S1-C1-PT3", "h-error", ResumeAction.RUN),  # only the errored case runs
        ("P1-B1-S1-C1-PT3", "h-new", ResumeAction.RUN),
        ("P1-B1-S1-C1-PT1", "h-new", ResumeAction.DONE),  # a changed finished case is left alone
        ("P1-B1-S1-C1-PT2", "h-failed", ResumeAction.DONE),
        ("P1-B1-S1-C1-PT4", "h-skipped", ResumeAction.DONE),
        ("P1-B1-S1-C1-PT5", "h-any", ResumeAction.DONE),  # missing: not an error to retry
    ],
)
def test_retry_errors_decisions(code: str, request_hash: str, expected: ResumeAction) -> None:
    assert plan(errors_only=True).decide(MODEL, code, 0, request_hash) == expected


@pytest.mark.parametrize("errors_only", [False, True])
def test_a_model_without_a_run_to_complete_runs_everything(errors_only: bool) -> None:
    assert plan(errors_only).decide(OTHER, "P1-B1-S1-C1-PT1", 0, "h-passed") == ResumeAction.RUN


def test_apply_plan_keeps_order_and_counts_each_decision() -> None:
    cases = [
        PlannedCase(MODEL, "P1-B1-S1-C1-PT1", 0, "h-passed"),
        PlannedCase(MODEL, "P1-B1-S1-C1-PT2", 0, "h-new"),
        PlannedCase(MODEL, "P1-B1-S1-C1-PT3", 0, "h-error"),
        PlannedCase(OTHER, "P1-B1-S1-C1-PT1", 0, "h-passed"),
        PlannedCase(MODEL, "P1-B1-S1-C1-PT1", 1, "h-passed-r1"),
    ]
    decided = apply_plan(plan(), cases)
    assert decided.decisions == [
        ResumeAction.DONE,
        ResumeAction.CHANGED,
        ResumeAction.RUN,
        ResumeAction.RUN,
        ResumeAction.DONE,
    ]
    assert decided.keep == [False, True, True, True, False]
    assert decided.counts == {"done": 2, "changed": 1, "run": 2}  # the keys the summary reads


def test_apply_plan_counts_zero_for_every_decision_when_nothing_matches() -> None:
    assert apply_plan(plan(), []).counts == {"done": 0, "changed": 0, "run": 0}


def test_the_plan_survives_its_file_for_xdist_workers(tmp_path) -> None:
    original = plan(errors_only=True)
    original.save(tmp_path / "resume.json")
    loaded = ResumePlan.load(tmp_path / "resume.json")
    assert loaded == original
    assert loaded.decide(MODEL, "P1-B1-S1-C1-PT3", 0, "h-error") == ResumeAction.RUN
