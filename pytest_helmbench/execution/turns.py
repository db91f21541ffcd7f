"""The verdict on a conversation from the verdicts on its replies (multi-turn cases).

A scripted conversation has one judged reply, the model's answer to the last user turn; a simulated
one has one per reply of the model under test. The case passes only when every judged reply passes;
it fails when any failed (the first failing turn is shown and stored); it is an error only when none
failed and one could not be completed. Each reply's verdict is stored under `turns` in the Result's
evaluation details, with the turn index (how many user messages came up to that reply), which the
drift figures read.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ..evaluation.extraction import Extraction
from ..evaluation.pipeline import CheckVerdict, ReplyVerdict
from ..providers.chat import ChatResponse
from ..status import Status
from ..suite.cases import Case
from ..suite.prompt import ComposedPrompt
from .sheet import ReplySheet


@dataclass(frozen=True)
class JudgedReply:
    """One reply of a case (a conversation has several): its turn index, the model's response, the
    verdict on it and, in the deployed layout, the extraction it was judged through."""

    index: int
    response: ChatResponse
    verdict: ReplyVerdict
    extraction: Extraction | None = None
    sheet: ReplySheet | None = None  # harm and care (scoring version 3, sheet.py)
    stop: dict[str, Any] | None = None  # an attacker's stop check on this reply (execution/attack.py)
    prompt: str = ""  # what its judges were shown as the prompt (every message before the reply)
    graded: ChatResponse | None = None  # what they graded (the reply, or its extraction)

    def to_dict(self) -> dict[str, Any]:
        found = {
            "turn": self.index,
            "status": str(self.verdict.status),
            "reason": self.verdict.reason,
            "reply": self.response.content,
            "answer": self.verdict.answer,
            "checks": self.verdict.details.get("checks", []),
            "extraction": self.extraction.to_dict() if self.extraction is not None else None,
        }
        if self.sheet is not None:
            found["sheet"] = self.sheet.to_dict()
        if self.stop is not None:
            found["stop_when"] = self.stop
        return found


def shown_turn(turns: list[JudgedReply]) -> JudgedReply:
    """The turn a case is reported by: the first that failed, else the first error, else the last."""
    for status in (Status.FAILED, Status.ERROR):
        for turn in turns:
            if turn.verdict.status is status:
                return turn
    return turns[-1]


def conversation_status(turns: list[JudgedReply]) -> Status:
    statuses = {turn.verdict.status for turn in turns}
    if Status.FAILED in statuses:
        return Status.FAILED
    if Status.ERROR in statuses:
        return Status.ERROR
    return Status.PASSED


def conversation_verdict(turns: list[JudgedReply]) -> tuple[ReplyVerdict, JudgedReply]:
    """The case's verdict (status from every turn, reason and answer from the shown turn) and the
    shown turn; its details hold every turn and the first failing turn."""
    shown = shown_turn(turns)
    status = conversation_status(turns)
    failing = next((t.index for t in turns if t.verdict.status is Status.FAILED), None)
    reason = shown.verdict.reason
    if len(turns) > 1 or turns[0].index > 1:
        reason = f"turn {shown.index}: {reason}"
    details = {
        **shown.verdict.details,
        "turns": [turn.to_dict() for turn in turns],
        "first_failing_turn": failing,
    }
    if any(turn.stop is not None for turn in turns):  # an attacker: the turn its goal was reached, or None
        details["goal_reached_turn"] = next((t.index for t in turns if t.stop and t.stop["reached"]), None)
    verdict = ReplyVerdict(
        status,
        reason,
        shown.verdict.answer,
        shown.verdict.expected,
        shown.verdict.actual,
        shown.verdict.checks,
        details,
    )
    return verdict, shown


def with_whole(verdict: ReplyVerdict, whole: tuple[CheckVerdict, ...]) -> ReplyVerdict:
    """The case's verdict with its `scope: conversation` checks (asked once, over the whole transcript):
    it fails when one of them failed, errs when none failed and one could not be completed while the
    replies passed. They are stored apart (`conversation_checks`) and named apart in the reason."""
    if not whole:
        return verdict
    failed = [c for c in whole if c.status is Status.FAILED]
    errors = [c for c in whole if c.status is Status.ERROR]
    status = verdict.status
    if failed:
        status = Status.FAILED
    elif errors and status is Status.PASSED:
        status = Status.ERROR
    shown = failed or (errors if status is Status.ERROR else [])
    said = "; ".join(f"[{c.name}] {c.reason}" for c in shown)
    if not shown:
        reason = verdict.reason
    elif verdict.status is status:
        reason = f"{verdict.reason}; whole conversation: {said}"
    else:
        reason = f"whole conversation: {said}"
    details = {**verdict.details, "conversation_checks": [c.to_dict() for c in whole]}
    return replace(verdict, status=status, reason=reason, details=details)


@dataclass
class Talk:
    """A conversation in progress: the case, its composed prompt, every message so far (replies
    included), the user's words of each user turn, and the judged replies."""

    case: Case
    prompt: ComposedPrompt
    messages: list[dict[str, str]]
    user_texts: list[str]
    turns: list[JudgedReply] = field(default_factory=list)
    whole: tuple[CheckVerdict, ...] = ()  # the `scope: conversation` checks, asked once at the end

    @property
    def user_count(self) -> int:
        return sum(1 for m in self.messages if m["role"] == "user")

    def prefix(self) -> str:
        """`turn N: ` for a reason within a multi-turn conversation."""
        multi = self.prompt.multi_turn or self.user_count > 1
        return f"turn {self.user_count}: " if multi else ""
