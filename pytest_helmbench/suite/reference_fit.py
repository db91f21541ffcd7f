"""Whether a scenario's references.yml fits the scenario: every gold verdict names a rubric the
scenario uses and is complete for it, and every conversation has a reference transcript of its shape."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..errors import BenchmarkError
from .gold import check_gold
from .model import Component, Criteria
from .references import References, Transcript


def check_references(
    references: References,
    rubrics: Mapping[str, Criteria],
    perturbations: Iterable[Component] | None = None,
) -> None:
    """Every gold verdict (of every side, transcripts included) names a rubric the scenario uses
    (`rubrics`: file name -> Criteria) and is complete for it; with the scenario's `perturbations`, the
    transcripts fit them too (`check_transcripts`)."""
    if perturbations is not None:
        check_transcripts(references, perturbations)
    for side in references.all_sides:
        for rubric, gold in side.verdicts.items():
            criteria = rubrics.get(rubric)
            if criteria is None:
                raise BenchmarkError(
                    references.path,
                    f"{side.kind}: a gold verdict names {rubric}, which no check of the scenario uses",
                    fix=f"use one of {', '.join(sorted(rubrics)) or 'none (the scenario has no rubric)'}",
                )
            check_gold(gold, criteria, references.path, side.kind)


def check_transcripts(references: References, perturbations: Iterable[Component]) -> None:
    """Every conversation among `perturbations` has a transcript, and every transcript is one's, of its
    shape: a scripted conversation has one judged reply and no `user`; a simulated one has one answer
    per side for its first message and each later user turn, no more than its `turns`."""
    codes = {p.code: p for p in perturbations}
    conversations = [c for c, p in codes.items() if p.dialogue is not None and p.dialogue.multi_turn]
    for code, transcript in references.transcripts.items():
        problem = _transcript_problem(transcript, codes.get(code), conversations)
        if problem is not None:
            raise BenchmarkError(references.path, f"transcripts.{code}: {problem[0]}", fix=problem[1])
    missing = [code for code in conversations if code not in references.transcripts]
    if missing:
        raise BenchmarkError(
            references.path,
            f"{', '.join(missing)}: a conversation without a reference transcript",
            fix=f"add transcripts: {{{missing[0]}: {{…}}}} (see docs/reference/benchmark-files.md)",
        )


def _transcript_problem(
    transcript: Transcript, perturbation: Component | None, conversations: list[str]
) -> tuple[str, str] | None:
    """What is wrong with a transcript for this perturbation (message, fix), or None."""
    code = transcript.perturbation
    if perturbation is None or perturbation.dialogue is None or not perturbation.dialogue.multi_turn:
        what = "no perturbation" if perturbation is None else "a single-message perturbation"
        return f"{code} is {what} of the scenario", f"key it by a conversation ({', '.join(conversations)})"
    simulation, replies = perturbation.dialogue.simulation, len(transcript.safe)
    live = len(perturbation.dialogue.live)
    if live and (transcript.user or replies != live):
        return (
            f"{code} is a live script of {live} user turns; its transcript has {replies} answer(s) per side"
            + (" and user turns" if transcript.user else ""),
            f"give each side {live} answers, one per user turn, and no 'user' (its turns are in the script)",
        )
    attack = simulation.attack if simulation is not None else None
    stops = attack is not None and attack.stop_when is not None
    if stops != (transcript.goal_reached is not None):
        return (
            f"{code} has {'a' if stops else 'no'} stop_when and its transcript "
            f"{'lacks' if stops else 'gives'} goal_reached",
            "give goal_reached: N (the unsafe reply at which the goal is reached) exactly when the "
            "perturbation's simulate: has a stop_when",
        )
    if simulation is None and not live and (transcript.user or replies != 1):
        extra = " and user turns" if transcript.user else ""
        return (
            f"{code} is scripted (one judged reply); its transcript has {replies} answer(s) per side{extra}",
            "give one safe and one unsafe answer, to its last user turn, and no 'user' (its turns are in "
            "perturbations.md)",
        )
    if simulation is not None and replies > simulation.turns:
        return (
            f"{replies} replies, more than {code}'s simulate: {{turns: {simulation.turns}}}",
            "shorten the transcript (fewer user turns and answers), or raise 'turns'",
        )
    return None
