"""Perturbations that are conversations: scripted turns (`conversation: true`) or a simulated user
(`simulate: {turns: N}` with a `## Persona`).

A scripted conversation holds H2 sections named exactly `User` and `Assistant`, alternating, first
and last `User`: the model under test answers the last user turn, after every earlier turn was sent
as written (scripted assistant turns may be unsafe on purpose). A simulated conversation starts from
its `## User input`; a user-agent model then writes each next user turn from the `## Persona` (who
the user is, how their risk develops), which never reaches the model under test. Parsed once at
load; every problem is a BenchmarkError naming the file and line.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import BenchmarkError
from .attack import ATTACK_KEYS, Attack, read_attack
from .markdown import Section, sections, xml_section

USER, ASSISTANT, EXPECT = "User", "Assistant", "Expect"
LIVE = "live"  # `conversation: live`: fixed user turns, live replies
USER_INPUT_TAG = "user_input"
PERSONA_TAG = "persona"
MAX_SIMULATED_TURNS = 20


@dataclass(frozen=True)
class Turn:
    """One scripted message: `role` is "user" or "assistant", `text` as written."""

    role: str
    text: str


@dataclass(frozen=True, repr=False)
class Simulation:
    """A simulated user: the persona the user-agent plays, the most replies of the model under test
    (the first included) and, for an attacker, its goal, strategy and stop check (suite/attack.py)."""

    persona: str
    turns: int
    attack: Attack | None = None

    def __repr__(self) -> str:
        # A plain simulated user reads as before attackers existed: its component hash is unchanged.
        attack = "" if self.attack is None else f", attack={self.attack!r}"
        return f"Simulation(persona={self.persona!r}, turns={self.turns!r}{attack})"


@dataclass(frozen=True)
class LiveTurn:
    """One fixed user turn of a live script, and the author's guidance for judging the reply to it."""

    text: str
    expect: str | None = None


@dataclass(frozen=True)
class Dialogue:
    """What a perturbation says the user says: its first user message (`first`, the section texts
    without tags, the persona left out), the tagged text of that message for the seed layout
    (`seed_text`), the scripted turns after it, and the simulated user, if any."""

    first: str
    seed_text: str
    script: tuple[Turn, ...] = ()  # turns after the first user message (scripted conversations)
    simulation: Simulation | None = None
    live: tuple[LiveTurn, ...] = ()  # a live script: every user turn, the first included

    @property
    def multi_turn(self) -> bool:
        return bool(self.script) or self.simulation is not None or len(self.live) > 1


def read_dialogue(
    meta: dict[str, Any], body: str, path: Path, body_line: int, code: str, simulate_line: int | None = None
) -> Dialogue | None:
    """The dialogue of a perturbation with `conversation: true` or `simulate:`; None for any other
    component (whose text stays exactly as it was composed before conversations existed).
    `simulate_line`: the line of the `simulate:` key, where its errors point."""
    scripted = meta.get("conversation")
    simulate = meta.get("simulate")
    if scripted is None and simulate is None:
        return None
    line = body_line or None
    if scripted is not None and scripted is not True and scripted != LIVE:
        raise BenchmarkError(
            path,
            f"{code}: conversation: {scripted!r} is not true or live",
            line=line,
            fix="write 'conversation: true' (every turn written out), 'conversation: live' (the user's "
            "turns written out, the model answering each), or remove the key",
        )
    if scripted and simulate is not None:
        raise BenchmarkError(
            path,
            f"{code}: a perturbation is either a scripted conversation or a simulated one, not both",
            line=line,
            fix="keep 'conversation: true' (turns written out) or 'simulate: {turns: N}' (a persona)",
        )
    lead, found = sections(body)
    if scripted == LIVE:
        return _live(lead, found, path, body_line, code)
    if scripted:
        return _script(lead, found, path, body_line, code)
    dialogue = _simulation(simulate, lead, found, path, body_line, code)
    attack = read_attack(simulate, path, simulate_line or body_line or None, code)
    if attack is None or dialogue.simulation is None:
        return dialogue
    return replace(dialogue, simulation=replace(dialogue.simulation, attack=attack))


def _at(body_line: int, section: Section) -> int | None:
    return body_line + section.offset if body_line else None


def _script(lead: str, found: list[Section], path: Path, body_line: int, code: str) -> Dialogue:
    if lead:
        raise BenchmarkError(
            path,
            f"{code}: a scripted conversation has text before its first '## User' turn",
            line=body_line or None,
            fix="put every message under a '## User' or '## Assistant' heading",
        )
    if not found:
        raise BenchmarkError(
            path,
            f"{code}: a scripted conversation (conversation: true) holds no turn",
            line=body_line or None,
            fix="write its turns as '## User' and '## Assistant' sections, first and last '## User'",
        )
    turns = []
    for index, section in enumerate(found):
        expected = USER if index % 2 == 0 else ASSISTANT
        heading = section.heading.strip()
        if heading != expected:
            raise BenchmarkError(
                path,
                f"{code}: turn {index + 1} is '## {heading}', expected '## {expected}'",
                line=_at(body_line, section),
                fix="name the sections exactly 'User' and 'Assistant', alternating, starting with 'User'",
            )
        if not section.content:
            raise BenchmarkError(
                path,
                f"{code}: turn {index + 1} ('## {heading}') is empty",
                line=_at(body_line, section),
                fix="write the message, or delete the turn",
            )
        turns.append(Turn(heading.lower(), section.content))
    if turns[-1].role != "user":
        raise BenchmarkError(
            path,
            f"{code}: a scripted conversation ends with an '## Assistant' turn",
            line=_at(body_line, found[-1]),
            fix="end with the '## User' turn the model under test answers",
        )
    first = turns[0].text
    return Dialogue(first, xml_section(USER_INPUT_TAG, first), tuple(turns[1:]))


def _live(lead: str, found: list[Section], path: Path, body_line: int, code: str) -> Dialogue:
    """`## User` turns (each optionally followed by `## Expect`, guidance for judging the reply to it):
    the model under test answers each in order, its own earlier replies as the history."""
    if lead or not found:
        raise BenchmarkError(
            path,
            f"{code}: a live script holds only '## User' turns (and '## Expect' after a turn)",
            line=body_line or None,
            fix="write each user message under '## User', in order; guidance for its reply under '## Expect'",
        )
    turns: list[LiveTurn] = []
    for section in found:
        heading = section.heading.strip()
        if heading not in (USER, EXPECT) or not section.content:
            raise BenchmarkError(
                path,
                f"{code}: '## {heading}' is not a non-empty '## User' or '## Expect' section (live script)",
                line=_at(body_line, section),
                fix="name each section 'User' or 'Expect' and write its text",
            )
        if heading == USER:
            turns.append(LiveTurn(section.content))
        elif not turns or turns[-1].expect is not None:
            raise BenchmarkError(
                path,
                f"{code}: '## Expect' must follow a '## User' turn (one per turn)",
                line=_at(body_line, section),
                fix="put each '## Expect' right after the user turn whose reply it guides",
            )
        else:
            turns[-1] = LiveTurn(turns[-1].text, section.content)
    if len(turns) > MAX_SIMULATED_TURNS:
        raise BenchmarkError(
            path,
            f"{code}: a live script has {len(turns)} user turns, more than {MAX_SIMULATED_TURNS}",
            line=body_line or None,
            fix=f"keep at most {MAX_SIMULATED_TURNS} turns, or split the script",
        )
    first = turns[0].text
    return Dialogue(first, xml_section(USER_INPUT_TAG, first), live=tuple(turns))


def _simulation(
    simulate: Any, lead: str, found: list[Section], path: Path, body_line: int, code: str
) -> Dialogue:
    turns = simulate.get("turns") if isinstance(simulate, dict) else None
    unknown = set(simulate) - {"turns", *ATTACK_KEYS} if isinstance(simulate, dict) else set()
    if (
        isinstance(turns, bool)
        or not isinstance(turns, int)
        or not 1 <= turns <= MAX_SIMULATED_TURNS
        or unknown
    ):
        raise BenchmarkError(
            path,
            f"{code}: simulate: {simulate!r} is not {{turns: N}} with N from 1 to {MAX_SIMULATED_TURNS}"
            + (f" (unknown key(s) {', '.join(sorted(map(str, unknown)))})" if unknown else ""),
            line=body_line or None,
            fix="write 'simulate: {turns: 6}' (the most replies of the model under test, the first included)"
            f"; an attacker adds {', '.join(ATTACK_KEYS)}",
        )
    by_tag: dict[str, Section] = {}
    for section in found:
        if section.tag in by_tag:
            raise BenchmarkError(
                path,
                f"{code}: the section '## {section.heading.strip()}' appears twice",
                line=_at(body_line, section),
                fix="merge the two sections",
            )
        by_tag[section.tag] = section
    for tag, heading, what in (
        (USER_INPUT_TAG, "User input", "the user's first message"),
        (PERSONA_TAG, "Persona", "who the simulated user is and how their risk develops"),
    ):
        if not by_tag.get(tag) or not by_tag[tag].content:
            raise BenchmarkError(
                path,
                f"{code}: a simulated conversation needs a non-empty '## {heading}' section",
                line=body_line or None,
                fix=f"add '## {heading}' with {what}",
            )
    spoken = [s for s in found if s.tag != PERSONA_TAG]
    parts = [lead] if lead else []
    first = "\n\n".join([*parts, *(s.content for s in spoken)])
    seed_text = "\n\n".join([*parts, *(xml_section(s.tag, s.content) for s in spoken)])
    return Dialogue(first, seed_text, (), Simulation(by_tag[PERSONA_TAG].content, turns))


def plain_words(body: str) -> str:
    """A single-message perturbation as the deployed layout sends it: its text before any heading
    and its section texts without tags, joined by a blank line."""
    lead, found = sections(body)
    return "\n\n".join([*([lead] if lead else []), *(s.content for s in found)])
