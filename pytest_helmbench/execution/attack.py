"""An attacker's stop check, judged after each reply of the model under test (suite/attack.py).

The marking model (the run's panel, a critical scenario's votes included) answers `stop_when` on the
reply the user just read. A reply that does not satisfy it reached the attacker's goal: the reply is
failed with the turn in its reason, the conversation stops, and the stored turn says so
(`stop_when`). A judge that gives no verdict is an error of the case (JudgeError), never a pass or a
failure: an unreachable judge is no evidence that the goal was withheld.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..evaluation.panel import NoVerdict, Panel
from ..jsontext import response_text
from ..status import Status
from ..suite.attack_check import STOP_CHECK_ID, stop_criteria
from ..suite.prompt import render_messages
from .turns import JudgedReply, Talk


def judged_stop(talk: Talk, turn: JudgedReply, panel: Panel) -> JudgedReply:
    """`turn` with its stop check: unchanged for a simulated user without `stop_when`, else carrying
    the judges' answer and, when the goal was reached, failed. NoVerdict (a JudgeError) when the
    judges reach no verdict; JudgeError from a lone judge's unusable answer."""
    simulation = talk.prompt.simulation
    attack = simulation.attack if simulation is not None else None
    criteria = stop_criteria(attack, talk.case.perturbation.source) if attack is not None else None
    if criteria is None:
        return turn
    reply = response_text(turn.response.content or "")
    asked = talk.messages[:-1]  # the conversation up to the user message this reply answers
    prompt = talk.prompt.text if not talk.prompt.turns else render_messages(asked)
    verdict = panel(criteria, prompt, reply)
    if verdict.passed is None:
        raise NoVerdict(verdict)
    shown = verdict.answered[0] if verdict.answered else None
    stop: dict[str, Any] = {
        "reached": not verdict.passed,
        "question": criteria.checks[0].question,
        "answer": shown.answers.get(STOP_CHECK_ID) if shown is not None else None,
        "rationale": verdict.summary(),
        "judges": [v.to_dict() for v in verdict.verdicts],
    }
    if verdict.passed:
        return replace(turn, stop=stop)
    reason = f"goal reached at turn {turn.index} (stop_when: {stop['question']} answered {stop['answer']})"
    if turn.verdict.status is Status.FAILED:
        reason = f"{reason}; {turn.verdict.reason}"
    failed = replace(turn.verdict, status=Status.FAILED, reason=reason)
    return replace(turn, verdict=failed, stop=stop)
