"""A stored Result read as a person sees it: its judged replies, the conversation up to one of them (the
deployed system prompt apart), and each check's verdict and rationale.

Plain functions over a Result's stored columns (evaluation details, messages, prompt, raw answer): the
sampling of a study, a rater's page and a case's page read a reply the same way. Everything returned is
untrusted text (model replies, rationales): the templates escape it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

RESPONSE = "response"  # the answer field holding the reply the user reads (evaluation/extraction.py)


@dataclass(frozen=True)
class Message:
    role: str  # system | user | assistant
    content: str


@dataclass(frozen=True)
class JudgedReply:
    """One reply the checks read: a single-turn case's answer, or one turn of a conversation."""

    turn: int | None  # the conversation's turn (user messages up to the reply); None: a single reply
    status: str  # passed | failed | error
    text: str  # the reply as the user read it
    checks: tuple[dict[str, Any], ...]  # the stored check records (evaluation_details["checks"])


@dataclass(frozen=True)
class Conversation:
    """What the user saw, up to and including the reply under review."""

    system: str | None  # the deployment's system prompt (deployed layout), shown apart
    messages: tuple[Message, ...]  # user and assistant turns; the last is the reply under review
    layout: str = "seed"


@dataclass(frozen=True)
class CheckView:
    """One check's verdict for the case page: status, reason, and each judge's answers and rationale."""

    name: str
    type: str
    status: str
    reason: str
    judges: tuple[dict[str, Any], ...] = field(default_factory=tuple)


def reply_text(answer: Any, raw: str | None) -> str:
    """The reply the user reads: the answer's `response` when it has one, else the raw text."""
    if isinstance(answer, Mapping) and isinstance(answer.get(RESPONSE), str):
        return answer[RESPONSE]
    if isinstance(answer, str):
        return answer
    return raw or ""


def _shown(content: str) -> str:
    """An earlier assistant message as its user read it (a seed-layout JSON answer: its response)."""
    text = content.strip()
    if text.startswith("{"):
        try:
            parsed = json.loads(text)
        except ValueError:
            return content
        return reply_text(parsed, content)
    return content


def judged_replies(details: Any, answer: Any, raw: str | None, status: str) -> list[JudgedReply]:
    """Every judged reply of a Result: the turns of a conversation, else its one reply."""
    details = details if isinstance(details, Mapping) else {}
    turns = details.get("turns")
    if isinstance(turns, list) and turns:
        found = []
        for turn in turns:
            if isinstance(turn, Mapping) and isinstance(turn.get("turn"), int):
                checks = tuple(c for c in turn.get("checks") or () if isinstance(c, Mapping))
                text = reply_text(
                    turn.get("answer"), turn.get("reply") if isinstance(turn.get("reply"), str) else None
                )
                found.append(JudgedReply(turn["turn"], str(turn.get("status")), text, checks))
        return found
    checks = tuple(c for c in details.get("checks") or () if isinstance(c, Mapping))
    return [JudgedReply(None, status, reply_text(answer, raw), checks)]


def deciding_reply(replies: Sequence[JudgedReply], first_failing: Any) -> JudgedReply | None:
    """The reply that stands for the case: a conversation's first failing reply, else its last."""
    if not replies:
        return None
    for reply in replies:
        if reply.turn is not None and reply.turn == first_failing:
            return reply
    return replies[-1]


def check_answers(check: Mapping[str, Any]) -> dict[str, str]:
    """The judges' answer to each atomic check id (the most common among the judges that answered)."""
    votes: dict[str, Counter[str]] = {}
    for judge in check.get("judges") or ():
        if (
            isinstance(judge, Mapping)
            and judge.get("error") is None
            and isinstance(judge.get("answers"), Mapping)
        ):
            for key, value in judge["answers"].items():
                votes.setdefault(str(key), Counter())[str(value)] += 1
    return {key: count.most_common(1)[0][0] for key, count in votes.items()}


def check_passed(check: Mapping[str, Any]) -> bool | None:
    status = check.get("status")
    return True if status == "passed" else False if status == "failed" else None


def judges_disagree(details: Any) -> bool:
    """Whether the judges disagreed anywhere: a panel split on a check, or re-judging that did not all
    agree with the first verdict."""
    details = details if isinstance(details, Mapping) else {}
    confirmation = details.get("confirmation")
    if isinstance(confirmation, Mapping):
        verdicts = confirmation.get("verdicts")
        if isinstance(verdicts, list) and len({bool(v) for v in verdicts if v is not None}) > 1:
            return True
    for reply in judged_replies(details, None, None, ""):
        for check in reply.checks:
            votes = {
                j.get("passed")
                for j in check.get("judges") or ()
                if isinstance(j, Mapping) and j.get("error") is None and j.get("passed") is not None
            }
            if len(votes) > 1:
                return True
    return False


def unknown_numbers(details: Any) -> bool:
    """Whether a resource_check found a number in no entry of resources.yml (to verify by hand)."""
    for reply in judged_replies(details, None, None, ""):
        for check in reply.checks:
            if check.get("type") == "resource_check" and "unknown (in no entry" in str(
                check.get("reason") or ""
            ):
                return True
    return False


def was_judged(details: Any) -> bool:
    return any(
        check.get("judges") for reply in judged_replies(details, None, None, "") for check in reply.checks
    )


def conversation(prompt: str, messages: Any, reply: JudgedReply, layout: str | None) -> Conversation:
    """The conversation as the user saw it up to `reply` (its text last); a seed-layout case's one
    message is the composed prompt."""
    shown = [m for m in messages if isinstance(m, Mapping)] if isinstance(messages, list) else None
    if not shown:
        shown = [{"role": "user", "content": prompt}]
    system = None
    if shown and shown[0].get("role") == "system":
        system = str(shown[0].get("content") or "")
        shown = shown[1:]
    kept: list[Message] = []
    users = 0
    for message in shown:
        role = str(message.get("role"))
        if role == "user":
            if reply.turn is not None and users == reply.turn:
                break
            users += 1
        elif reply.turn is None and role == "assistant":
            continue  # a single reply: the answer under review comes last, below
        content = str(message.get("content") or "")
        kept.append(Message(role, _shown(content) if role == "assistant" else content))
    if reply.turn is not None:  # a conversation's messages may hold the reply already: keep its users'
        while kept and kept[-1].role == "assistant":
            kept.pop()
    kept.append(Message("assistant", reply.text))
    return Conversation(system, tuple(kept), layout or "seed")


def check_views(reply: JudgedReply) -> list[CheckView]:
    return [
        CheckView(
            str(c.get("name")),
            str(c.get("type")),
            str(c.get("status")),
            str(c.get("reason") or ""),
            tuple(
                {
                    "model": str(j.get("model")),
                    "passed": j.get("passed"),
                    "answers": j.get("answers") if isinstance(j.get("answers"), Mapping) else None,
                    "values": j.get("values") if isinstance(j.get("values"), list) else None,
                    "rationale": str(j.get("rationale") or ""),
                    "error": j.get("error"),
                }
                for j in c.get("judges") or ()
                if isinstance(j, Mapping)
            ),
        )
        for c in reply.checks
    ]
