"""The simulated user of a `simulate:` conversation: a user-agent model writes each next user turn.

The user agent gets its persona (who the user is, what they want, how their risk develops, when they
disclose) and the conversation so far, and answers `{"end": bool, "message": str}`: the user's next
message, or the end of the conversation. The persona goes to the user agent only, never to the
model under test. The conversation travels as data between nonce-marked lines (as a judge's graded
text does), so the replies of the model under test cannot instruct the user agent. Requests carry
temperature 0 and a seed, and are cached by their content (the transcript's hash is part of the
request key), so the same model answers replay the same conversation.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from typing import NoReturn

from ..config import Settings
from ..evaluation.answers import AnswerInvalid, parse_json_content
from ..jsontext import response_text
from ..providers.chat import CallError, ChatResponse
from ..providers.user_agent_wire import USER_AGENT_SCHEMA, UserAgentMessages
from ..suite.prompt import Message, user_turn
from .judging import Helpers
from .outcome import CaseLog
from .turns import JudgedReply, Talk

USER_AGENT_SEED = 0  # the seed when neither models.yml nor --helmbench-seed gives one


def plain_transcript(replies: list[str], user_texts: list[str]) -> tuple[Message, ...]:
    """The conversation as the user agent reads it: the user's words without tags and the replies as
    the user read them (the `response` of a seed-layout JSON answer), no system message."""
    found: list[Message] = []
    for index, text in enumerate(user_texts):
        found.append({"role": "user", "content": text})
        if index < len(replies):
            found.append({"role": "assistant", "content": replies[index]})
    return tuple(found)


@dataclass(frozen=True)
class NextTurn:
    """The user agent's answer: the next message, or None when the conversation ends."""

    message: str | None
    raw: str


def read_next_turn(response: ChatResponse) -> NextTurn:
    """The user agent's JSON answer; anything else is a CallError (the case errs, never scores)."""
    if response.refusal or response.finish_reason in ("content_filter", "length"):
        why = response.refusal or f"finish_reason {response.finish_reason}"
        raise CallError(f"the simulated user gave no next turn ({why})", raw=response.raw)
    try:
        data = parse_json_content(response.content)
    except AnswerInvalid:
        data = None
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("end"), bool)
        or not isinstance(data.get("message"), str)
    ):
        raise CallError(
            'the simulated user did not answer {"end": true|false, "message": "…"}', raw=response.content
        )
    message = data["message"].strip()
    if data["end"] or not message:
        return NextTurn(None, response.raw)
    return NextTurn(message, response.raw)


def next_user_turn(helpers: Helpers, settings: Settings, talk: Talk, log: CaseLog) -> bool:
    """Append the next user message: a live script's next fixed turn, or the user agent's of a
    simulated conversation; False when the conversation is over (the script's last turn answered, the
    turn limit, or the user agent ended it). CallError when the user agent gave no usable answer."""
    live = talk.prompt.live
    if live:
        answered = len(talk.turns)
        if answered >= len(live):
            return False
        add_user_turn(talk, live[answered].text)
        return True
    replies = [response_text(turn.response.content or "") for turn in talk.turns]
    following = user_agent_turn(helpers, settings, talk, log, replies)
    if following is None:
        return False
    add_user_turn(talk, following)
    return True


def user_agent_turn(
    helpers: Helpers, settings: Settings, talk: Talk, log: CaseLog, replies: list[str]
) -> str | None:
    """The simulated user's next message after the model's `replies` so far (the last may not be
    judged yet: the user agent reads replies, never verdicts), or None when the conversation is over
    (the turn limit, or the user agent ended it). Appends nothing. CallError when the user agent gave
    no usable answer."""
    simulation = talk.prompt.simulation
    if simulation is None or len(replies) >= simulation.turns:
        return None
    agent = settings.user_agent
    if agent is None:
        raise CallError(
            "a simulated conversation needs a user model: set --helmbench-user-model or a marking model"
        )
    seed = agent.seed if agent.seed is not None else settings.seed
    agent = replace(agent, temperature=0.0, seed=USER_AGENT_SEED if seed is None else seed)
    attack = simulation.attack
    asked = UserAgentMessages(
        simulation.persona,
        plain_transcript(replies, talk.user_texts),
        attack.goal if attack is not None else None,
        attack.strategy_text if attack is not None else None,
    )
    response = helpers.send(agent, asked.messages, USER_AGENT_SCHEMA, log, role="the simulated user")
    return read_next_turn(response).message


def add_user_turn(talk: Talk, message: str) -> None:
    """The simulated user's message becomes the conversation's next user turn."""
    talk.user_texts.append(message)
    talk.messages.append(user_turn(talk.prompt.layout, message))


def judge_while_user_writes(
    judge: Callable[[], JudgedReply], helpers: Helpers, settings: Settings, talk: Talk, log: CaseLog
) -> tuple[JudgedReply, Callable[[], bool]]:
    """A simulated turn's verdict (`judge`, run in a second thread) while the user agent writes the
    next message, and what then goes on with that message. The user agent reads the replies, never
    the verdicts, so neither waits for the other: one after the other, a turn's judge and user calls
    were most of a conversation's time on the local model. The message (or the user agent's error) is
    used only once the verdict is known not to be an error, as if asked after it (executor._converse)."""
    replies = [response_text(turn.response.content or "") for turn in talk.turns]
    replies.append(response_text(talk.messages[-1]["content"]))  # the reply being judged
    pool = ThreadPoolExecutor(1, thread_name_prefix="helmbench-judge")
    try:
        judging = pool.submit(contextvars.copy_context().run, judge)  # its calls stay chained
        try:
            written = user_agent_turn(helpers, settings, talk, log, replies)
        except Exception as exc:  # raised when the conversation would have asked for it
            return judging.result(), partial(_raise, exc)
        return judging.result(), partial(_add_written, talk, written)
    finally:
        pool.shutdown(wait=False)  # a timeout interrupting this thread does not wait for the judge


def _raise(error: Exception) -> NoReturn:
    raise error


def _add_written(talk: Talk, written: str | None) -> bool:
    """The message written while the reply was judged becomes the next user turn; None: the user agent
    ended the conversation."""
    if written is None:
        return False
    add_user_turn(talk, written)
    return True
