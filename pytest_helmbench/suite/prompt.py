"""Compose a case into the exact messages and request sent to the model (test cases -> prompt).

Two layouts of one benchmark (docs/reference/composition.md):

* `seed`: one user message holding the scenario (the task and the category list), the condition,
  the user context and the perturbation, non-empty parts joined by a blank line, answered in the
  scenario's JSON schema: exactly the v1.0 contract, byte for byte;
* `deployed`: a `system` message (the composed condition, then a blank line and the composed user
  context, if any) and the user's words as a plain `user` message; no scenario text, no category
  list, no `response_format`: the reply is plain text.

A scripted conversation appends its later turns (seed: each user turn as `<user_input>…</user_input>`;
assistant turns verbatim); a simulated one starts with the first user message and goes on in
execution/conversation.py, which wraps each simulated user turn with `user_turn`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from typing import Any

from ..codes import DEPLOYED, SEED
from .cases import Case
from .conversation import USER_INPUT_TAG, LiveTurn, Simulation
from .markdown import xml_section
from .model import Criteria, Scenario

Message = dict[str, str]


@dataclass(frozen=True)
class ComposedPrompt:
    """What is sent for a case: one user message (`text`, the seed layout's single message) or a list
    of messages (`turns`; `text` is then their rendering, `render_messages`), with the response
    format (None: a plain-text reply) and the simulated user, if the conversation goes on."""

    text: str
    response_format: dict[str, Any] | None
    turns: tuple[Message, ...] = ()
    layout: str = SEED
    simulation: Simulation | None = None
    live: tuple[LiveTurn, ...] = ()  # a live script's user turns (the first is already in the messages)

    @property
    def hash(self) -> str:
        """sha256 of the one user message (as in v1.0), else of the message list as JSON; with a
        simulated user, its persona and turn limit too (they decide what the user will say, so an
        edit to them is a change --helmbench-changed runs again)."""
        material = self.text if not self.turns else json.dumps(list(self.turns), ensure_ascii=False)
        if self.simulation is not None:
            simulated: dict[str, Any] = {"persona": self.simulation.persona, "turns": self.simulation.turns}
            if self.simulation.attack is not None:  # an attacker's goal, strategy and stop check
                simulated["attack"] = repr(self.simulation.attack)
            material += "\0" + json.dumps(simulated, ensure_ascii=False, sort_keys=True)
        if self.live:
            scripted = [[turn.text, turn.expect] for turn in self.live]
            material += "\0" + json.dumps(scripted, ensure_ascii=False)
        return hashlib.sha256(material.encode("utf-8")).hexdigest()

    @property
    def messages(self) -> list[Message]:
        if self.turns:
            return [dict(message) for message in self.turns]
        return [{"role": "user", "content": self.text}]

    @property
    def multi_turn(self) -> bool:
        return (
            self.simulation is not None
            or len(self.live) > 1
            or sum(m["role"] == "user" for m in self.messages) > 1
        )


def user_turn(layout: str, text: str) -> Message:
    """A user message after the first: tagged as user input in the seed layout, plain when deployed."""
    return {"role": "user", "content": xml_section(USER_INPUT_TAG, text) if layout == SEED else text}


def render_messages(messages: list[Message]) -> str:
    """Messages as one text (stored as the Result's prompt, shown to a reader and to the judge as the
    case): each as `[role]`, a line break and its content, separated by a blank line."""
    return "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in messages)


def compose(case: Case) -> ComposedPrompt:
    """The case's messages in its layout (see the module docstring)."""
    dialogue = case.perturbation.dialogue
    if case.layout == DEPLOYED:
        system = case.condition.text
        if case.user_context is not None and case.user_context.text:
            system += "\n\n" + case.user_context.text
        messages: list[Message] = [
            {"role": "system", "content": system},
            {"role": "user", "content": case.perturbation.words},
        ]
        response_format = None
    else:
        parts = [
            case.scenario.text,
            case.condition.text,
            case.user_context.text if case.user_context else "",
            case.perturbation.text,
        ]
        first = "\n\n".join(part for part in parts if part)
        if dialogue is None:
            return ComposedPrompt(first, case.scenario.response_format)
        messages = [{"role": "user", "content": first}]
        response_format = case.scenario.response_format
    if dialogue is not None:
        for turn in dialogue.script:
            if turn.role == "user":
                messages.append(user_turn(case.layout, turn.text))
            else:
                messages.append({"role": "assistant", "content": turn.text})
    return ComposedPrompt(
        render_messages(messages),
        response_format,
        tuple(messages),
        case.layout,
        dialogue.simulation if dialogue is not None else None,
        dialogue.live if dialogue is not None else (),
    )


GUIDANCE_TAG = "turn_guidance"


def with_guidance(scenario: Scenario, guidance: str | None) -> Scenario:
    """The scenario as the judge reads one reply of a live script: every rubric it is judged by ends
    with that turn's `## Expect` (the author's guidance, a tagged section of the rubric, never of the
    data); None: the scenario as it is."""
    if not guidance:
        return scenario

    def guided(criteria: Criteria | None) -> Criteria | None:
        if criteria is None:
            return None
        return replace(criteria, text=f"{criteria.text}\n\n{xml_section(GUIDANCE_TAG, guidance)}")

    checks = tuple(replace(check, criteria=guided(check.criteria)) for check in scenario.checks)
    return replace(scenario, criteria=guided(scenario.criteria), checks=checks)
