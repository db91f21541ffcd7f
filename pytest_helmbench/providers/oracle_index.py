"""What the oracle models know of a benchmark: each case by its composed prompt, each rubric by its
text, and the gold verdict of every reference and calibration reply of each rubric.

A gold verdict is found by what the judge is shown (the check's view: the reply, or only the label
fields a rubric grades), keyed by the reply when the view holds one, else by the view's text. Where
one text has several gold verdicts (a label `{"category": "SUPPORT"}` is right early in a conversation
and too low after a plan), each is tied to the user message the reply answers (its `context`), and
the one whose message comes last in the judge's prompt rules.

Built once per process from the benchmark folder (the same confined reader and loader a session
uses), when the first oracle call needs it. A scenario that does not load is left out (it is a
collection error of its own), so its prompts are unknown to the oracles: their calls are errors.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..codes import LAYOUTS
from ..errors import BenchmarkError
from ..jsontext import response_text
from ..suite.attack_check import stop_criteria
from ..suite.calibration import (
    CalibrationItem,
    CalibrationSet,
    judged_text,
    load_calibration,
    rubric_views,
    scenario_rubrics,
)
from ..suite.cases import case_by_code, expand
from ..suite.evaluation_spec import REPLY_FIELD, EvaluationTypes, JudgedView
from ..suite.gold import Gold
from ..suite.loader import BenchmarkLoader
from ..suite.model import Component, Criteria, Scenario, ScenarioOf, content_hash
from ..suite.prompt import compose, render_messages
from ..suite.reference_fit import check_transcripts
from ..suite.references import ReferenceAnswer, References, Transcript, load_references
from ..suite.resources import CrisisResources, load_resources
from .oracle_templates import REFUSAL, TEMPLATES, template_reply

log = logging.getLogger(__name__)


def reply_key(text: str) -> str:
    """How a graded reply is recognised: its text with runs of whitespace made one space (YAML's
    folded and literal blocks differ only there)."""
    return " ".join(text.split())


def graded_key(graded: str) -> str:
    """How a judge's graded text is recognised: the reply it holds (a view with `response`), else the
    view's own text."""
    return reply_key(response_text(graded))


def answered_words(perturbation: Component, turn: int, transcript: Transcript | None = None) -> str | None:
    """The user message the model's `turn`-th reply (0: its first) answers in a conversation: the
    last scripted user turn or the first message, then the transcript's user turns; None when unknown."""
    dialogue = perturbation.dialogue
    if dialogue is not None and dialogue.live:  # a live script: its user turns, in order
        return dialogue.live[turn].text if 0 <= turn < len(dialogue.live) else None
    if turn == 0:
        users = [t.text for t in dialogue.script if t.role == "user"] if dialogue is not None else []
        return users[-1] if users else perturbation.words
    if transcript is not None and 0 < turn <= len(transcript.user):
        return transcript.user[turn - 1]
    return None


def opening_key(messages: list[dict[str, str]]) -> str:
    """How a case is recognised in any layout and at any turn: its messages up to and including the
    first user message (the same for every request of one conversation)."""
    first_user = next((i for i, m in enumerate(messages) if m.get("role") == "user"), len(messages) - 1)
    digest = hashlib.sha256()
    for message in messages[: first_user + 1]:
        for part in (message.get("role"), message.get("content")):
            digest.update(_framed(part))
    return digest.hexdigest()


def _framed(value: object) -> bytes:
    """A message's part as its type, its length and its bytes, so that no two openings share a key: a
    string as is (a system prompt runs to kilobytes, which JSON-encoding each one first made costly),
    anything else (a list of content parts, a missing role) as JSON."""
    kind, text = (b"s", value) if isinstance(value, str) else (b"j", json.dumps(value, ensure_ascii=False))
    data = text.encode("utf-8")
    return b"%s%d:%s" % (kind, len(data), data)


def rendered_opening(messages: list[dict[str, str]]) -> str:
    """A case's opening messages (up to and including the first user message) as a judge's or an
    extractor's prompt renders them: what every later turn's rendering starts with."""
    first_user = next((i for i, m in enumerate(messages) if m.get("role") == "user"), len(messages) - 1)
    opening = [
        {"role": m.get("role", ""), "content": m.get("content", "")} for m in messages[: first_user + 1]
    ]
    return hashlib.sha256(render_messages(opening).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CaseEntry:
    """A case as the answer oracles see it: its scenario, references and the user context's locale."""

    code: str
    scenario: Scenario
    references: References | None
    locale: str | None
    perturbation: str = ""  # its perturbation's code (whose transcript, if any, the oracles replay)
    scripted_replies: int = 0  # assistant turns of its script (not the model's own replies)


@dataclass(frozen=True)
class GoldEntry:
    """A gold verdict and where it comes from (shown as the oracle judge's rationale)."""

    gold: Gold = field(hash=False)
    origin: str
    source: Path
    context: str | None = None  # the user message the reply answers (reply_key), in a conversation


@dataclass
class RubricGold:
    """One rubric (by text): its parsed form and the gold verdict of every known reply."""

    criteria: Criteria
    replies: dict[str, list[GoldEntry]] = field(default_factory=dict)

    def add(self, graded: str, entry: GoldEntry) -> None:
        """`graded`: what the judge is shown (the view's text)."""
        self.replies.setdefault(graded_key(graded), []).append(entry)

    def find(self, graded: str, prompt: str) -> list[GoldEntry]:
        """The gold entries of a graded text for `prompt`: those that fit it first (an entry tied to a
        user message fits when that message is the prompt's latest, no assistant turn after it: the
        graded reply answers it), else every entry (a reply labelled once, say on a conversation's
        first judged reply, stands for the same reply elsewhere); then every one when they agree,
        else those whose message comes last, else those tied to no message (a scenario's own
        references)."""
        text = reply_key(prompt)
        known = self.replies.get(graded_key(graded), [])
        entries = [e for e in known if _answers(text, e.context)] or known
        if len({gold_key(e) for e in entries}) <= 1:
            return entries
        ends = {id(e): _end(text, e.context) for e in entries}
        latest = max(ends.values())
        return [e for e in entries if ends[id(e)] == latest]


ASSISTANT_TURN = "[assistant]"  # how a conversation's reply opens in the judge's prompt (render_messages)


def _answers(text: str, context: str | None) -> bool:
    """Whether a reply tied to the user message `context` can be the one graded on the prompt `text`:
    the message is there and no assistant turn follows it."""
    if not context:
        return True
    end = _end(text, context)
    return end >= 0 and ASSISTANT_TURN not in text[end:]


def gold_key(entry: GoldEntry) -> str:
    """A gold verdict's ruling (its rationale left out: two labellers may word one ruling apart)."""
    return json.dumps({k: v for k, v in entry.gold.items() if k != "rationale"}, sort_keys=True)


def _end(text: str, context: str | None) -> int:
    """Where the last occurrence of `context` ends in `text`: 0 for no context, -1 when absent."""
    if not context:
        return 0
    found = text.rfind(context)
    return found + len(context) if found >= 0 else -1


@dataclass
class OracleIndex:
    """Every case by prompt hash, every rubric by text; `digest` names this exact content.

    A scenario's cases are composed when a prompt that may open one of them is first looked up (found
    by its scenario text or perturbation words), not at build: a run touches a few scenarios of the
    tens of thousands of cases a benchmark composes to, and composing them all took most of the build.
    """

    root: Path
    cases: dict[str, list[CaseEntry]] = field(default_factory=dict)
    rubrics: dict[str, RubricGold] = field(default_factory=dict)
    # reply text (reply_key) -> the reference answers that hold it (the oracle judge's extractions)
    answers: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # a simulated perturbation's persona -> its case (whose transcript's user turns oracle/user replays)
    personas: dict[str, CaseEntry] = field(default_factory=dict)
    resources: CrisisResources | None = None  # the services the template oracles name
    # a case's opening messages as a judge or extractor sees them (render_messages) -> the case
    conversations: dict[str, list[CaseEntry]] = field(default_factory=dict)
    digest: str = ""
    # (scenario, perturbation) codes whose cases are not composed yet, in folder order: the scenario, its
    # references and the perturbation
    pending: dict[tuple[str, str], tuple[Scenario, References | None, Component]] = field(
        default_factory=dict
    )
    rank: dict[str, int] = field(default_factory=dict)  # scenario code -> folder order
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def case(self, messages: list[dict[str, str]]) -> list[CaseEntry]:
        key = opening_key(messages)
        if key not in self.cases:
            self._compose_for(_first_user_text(messages), lambda: key in self.cases)
        return self.cases.get(key, [])

    def conversation(self, head: str) -> list[CaseEntry]:
        """The cases whose opening, rendered as a judge's prompt shows it, is `head`."""
        key = hashlib.sha256(head.encode("utf-8")).hexdigest()
        if key not in self.conversations:
            self._compose_for(_rendered_user_text(head), lambda: key in self.conversations)
        return self.conversations.get(key, [])

    def rubric(self, text: str) -> RubricGold | None:
        return self.rubrics.get(text)

    def _compose_for(self, opening: str, found: Callable[[], bool]) -> None:
        """Index the cases of every pending perturbation whose prompts can open with `opening` (the
        first user message); of every pending one when none can (an unknown prompt stays unknown).
        One perturbation's cases, not its scenario's: a few cases of a large benchmark compose a few
        hundred prompts, not tens of thousands. `found`: whether another thread indexed the looked-up
        prompt while this one waited."""
        with self._lock:
            if not self.pending or found():
                return
            fits = [
                key
                for key, (scenario, _, perturbation) in self.pending.items()
                if _may_open(scenario, perturbation, opening)
            ]
            for key in fits or list(self.pending):
                scenario, references, perturbation = self.pending.pop(key)
                self._add_cases(scenario, references, perturbation)

    def _add_cases(
        self, scenario: Scenario, references: References | None, perturbation: Component | None = None
    ) -> None:
        """Every case of `scenario` (of its `perturbation` only, when given) in every layout, by its
        opening; lists keep the benchmark's folder order whichever scenario was composed first. A list
        another thread may be reading is replaced, never changed in place."""
        cases: dict[str, list[CaseEntry]] = {}
        conversations: dict[str, list[CaseEntry]] = {}
        wanted = perturbation.code if perturbation is not None else None
        for case in expand(scenario, [""], LAYOUTS, keep=lambda c: wanted in (None, c.perturbation.code)):
            dialogue = case.perturbation.dialogue
            scripted = sum(t.role == "assistant" for t in dialogue.script) if dialogue is not None else 0
            entry = CaseEntry(case.code, scenario, references, case.locale, case.perturbation.code, scripted)
            messages = compose(case).messages
            cases.setdefault(opening_key(messages), []).append(entry)
            conversations.setdefault(rendered_opening(messages), []).append(entry)
            if dialogue is not None and dialogue.simulation is not None:
                self.personas.setdefault(dialogue.simulation.persona, entry)
        for known, new in ((self.cases, cases), (self.conversations, conversations)):
            for key, entries in new.items():
                merged = [*known.get(key, ()), *entries]
                known[key] = sorted(merged, key=lambda e: self.rank.get(e.scenario.code, 0))  # stable


def _may_open(scenario: Scenario, perturbation: Component, opening: str) -> bool:
    """Whether a case of this perturbation can have `opening` as its first user message: the deployed
    layout sends the perturbation's words alone, the seed layout the scenario's text first and the
    perturbation's text last (suite/prompt.py)."""
    if perturbation.words == opening:
        return True
    seed = bool(scenario.text) and opening.startswith(scenario.text)
    return seed and (not perturbation.text or opening.endswith(perturbation.text))


def _first_user_text(messages: list[dict[str, str]]) -> str:
    return next((str(m.get("content", "")) for m in messages if m.get("role") == "user"), "")


def _rendered_user_text(head: str) -> str:
    """The first user message of a rendered opening (render_messages: `[role]`, a line break, the
    content; messages apart by a blank line), which is its last message."""
    if head.startswith("[user]\n"):
        return head.removeprefix("[user]\n")
    return head.rpartition("\n\n[user]\n")[2]


def build_index(
    root: Path, evaluation_types: EvaluationTypes, scenario_of: ScenarioOf | None = None
) -> OracleIndex:
    """Load every scenario, its references and the calibration set of the benchmark at `root`; the
    scenarios from `scenario_of` when given (the session's, already parsed for collection: parsing the
    shipped benchmark's 93 again took half a second of every oracle session and xdist worker)."""
    loader = BenchmarkLoader(root, evaluation_types=evaluation_types)
    load_scenario = scenario_of or loader.load_scenario
    index = OracleIndex(root)
    try:
        index.resources = load_resources(root, loader.files)
    except BenchmarkError as exc:
        log.warning("oracles: resources.yml is left out: %s", exc)
    parts: list[Any] = [repr(index.resources.locales) if index.resources is not None else None]
    scenarios: dict[str, Scenario] = {}
    for folder in loader.scenario_dirs():
        try:
            scenario = load_scenario(folder)
            references = load_references(folder, loader.files)
            if references is not None:  # a transcript that does not fit its conversation: left out too
                check_transcripts(references, scenario.perturbations)
        except BenchmarkError as exc:
            log.warning("oracles: scenario %s left out: %s", folder.name, exc)
            continue
        scenarios[scenario.code] = scenario
        parts.append((scenario.code, scenario.hash, _references_part(references)))
        index.rank[scenario.code] = len(index.rank)
        if any(p.dialogue is not None and p.dialogue.simulation is not None for p in scenario.perturbations):
            index._add_cases(scenario, references)  # now: oracle/user finds a case by its persona alone
        else:
            for perturbation in scenario.perturbations:
                index.pending[(scenario.code, perturbation.code)] = (scenario, references, perturbation)
        if references is not None:
            _add_references(index, scenario, references)
    try:
        calibration = load_calibration(root, loader.files)
    except BenchmarkError as exc:
        log.warning("oracles: the calibration set is left out: %s", exc)
        calibration = CalibrationSet(())
    _add_calibration(index, calibration, scenarios)
    _carry_template_golds(index, calibration, scenarios)
    parts.append(calibration.label_set_hash)
    index.digest = content_hash("oracles", parts)
    return index


def _references_part(references: References | None) -> Any:
    if references is None:
        return None
    return [(s.kind, s.answer, s.verdicts, list(s.replies())) for s in references.all_sides]


def _rubric(index: OracleIndex, criteria: Criteria) -> RubricGold:
    found = index.rubrics.get(criteria.text)
    if found is None:
        found = index.rubrics[criteria.text] = RubricGold(criteria)
    return found


def _add_references(index: OracleIndex, scenario: Scenario, references: References) -> None:
    origin = f"{scenario.code}/{references.path.name}"
    for side in references.all_sides:
        for _, reply in side.replies():
            index.answers.setdefault(reply_key(reply), []).append(side.answer)
    views = rubric_views(scenario)
    sides = _sides_in_context(scenario, references)
    _add_stop_golds(index, scenario, references, origin)
    for criteria in scenario_rubrics(scenario).values():
        rubrics = [_rubric(index, part) for part in (criteria, criteria.conversation) if part is not None]
        view = views.get(criteria.name) or JudgedView((REPLY_FIELD,))
        for side, context in sides:
            gold = side.gold(criteria.name)
            if gold is None:
                continue
            for label, answer in _variants(side):
                entry = GoldEntry(gold, f"{origin} ({side.kind}{label})", references.path, context)
                for rubric in rubrics:  # a conversation part's gold: with the last reply it covers
                    rubric.add(view.text(answer), entry)


def _add_stop_golds(index: OracleIndex, scenario: Scenario, references: References, origin: str) -> None:
    """An attacker's `stop_when` gold for every reply of its transcript: the goal is withheld by every
    safe reply and by the unsafe side before its `goal_reached`, reached from that reply on."""
    for perturbation in scenario.perturbations:
        dialogue, transcript = perturbation.dialogue, references.transcripts.get(perturbation.code)
        simulation = dialogue.simulation if dialogue is not None else None
        attack = simulation.attack if simulation is not None else None
        criteria = stop_criteria(attack, perturbation.source) if attack is not None else None
        if criteria is None or transcript is None or transcript.goal_reached is None:
            continue
        check = criteria.checks[0]
        withheld = {check.id: check.pass_answer}
        reached = {check.id: "no" if check.pass_answer == "yes" else "yes"}
        rubric = _rubric(index, criteria)
        for turn, pair in enumerate(zip(transcript.safe, transcript.unsafe, strict=False)):
            words = answered_words(perturbation, turn, transcript)
            context = reply_key(words) if words else None
            for side in pair:
                unsafe = side is pair[1] and turn + 1 >= transcript.goal_reached
                gold = reached if unsafe else withheld
                entry = GoldEntry(
                    gold, f"{origin} (transcripts.{perturbation.code}, stop_when)", references.path, context
                )
                for _, answer in _variants(side):
                    rubric.add(str(answer.get(REPLY_FIELD, "")), entry)
        fixed = GoldEntry(
            withheld, f"{origin} (safe sides and fixed replies, stop_when)", references.path, None
        )
        for reply in _withholding_replies(index, references):
            if graded_key(reply) not in rubric.replies:  # a transcript's verdict for this very text stands
                rubric.add(reply, fixed)


def _withholding_replies(index: OracleIndex, references: References) -> list[str]:
    """Replies that withhold every attacker's goal: the scenario's safe and borderline-safe answers (a
    borderline oracle's first reply; they pass every check) and the fixed oracle replies."""
    safe = [reply for side in references.all_sides if side.is_safe for _, reply in side.replies()]
    return [*safe, *_fixed_replies(index)]


def _fixed_replies(index: OracleIndex) -> list[str]:
    """The replies of oracle/refuse-all and of the template oracles in every locale: none holds detail of
    any kind, so each withholds every attacker's goal (their `stop_when` gold)."""
    locales = (None, *index.resources.codes()) if index.resources is not None else (None,)
    return [
        REFUSAL,
        *(template_reply(role, index.resources, locale) for role in TEMPLATES for locale in locales),
    ]


def _variants(side: ReferenceAnswer) -> list[tuple[str, dict[str, Any]]]:
    """(label, whole answer) of each reply a side gives (its locale and language variants replace
    only `response`)."""
    found = [(label, {**side.answer, REPLY_FIELD: reply}) for label, reply in side.replies()]
    return found or [("", dict(side.answer))]


def _sides_in_context(scenario: Scenario, references: References) -> list[tuple[ReferenceAnswer, str | None]]:
    """Every side with the user message its reply answers: a transcript's sides are tied to their
    turn's message; the scenario's own sides answer any case."""
    found: list[tuple[ReferenceAnswer, str | None]] = [
        (side, None) for side in (references.safe, references.unsafe, *references.borderlines)
    ]
    perturbations = {p.code: p for p in scenario.perturbations}
    for code, transcript in references.transcripts.items():
        perturbation = perturbations.get(code)
        for turn, pair in enumerate(zip(transcript.safe, transcript.unsafe, strict=False)):
            words = answered_words(perturbation, turn, transcript) if perturbation is not None else None
            found.extend((side, reply_key(words) if words else None) for side in pair)
    return found


def _add_calibration(index: OracleIndex, calibration: CalibrationSet, scenarios: dict[str, Scenario]) -> None:
    for item in calibration.items:
        scenario = scenarios.get(item.scenario)
        criteria = scenario_rubrics(scenario).get(item.rubric) if scenario is not None else None
        if scenario is None or criteria is None or item.response is None:
            log.warning("oracles: calibration item %s names no rubric of a loaded scenario", item.id)
            continue
        if not item.has_gold:  # its raters tied: there is no gold verdict to give
            continue
        origin = f"{item.source.parent.name}/{item.source.name} item {item.id}"
        entry = GoldEntry(item.gold, origin, item.source, _item_context(scenario, item))
        for part in _parts(criteria):  # a conversation part's gold: with the reply, as in references
            _rubric(index, part).add(judged_text(item, rubric_views(scenario).get(item.rubric)), entry)


def _parts(criteria: Criteria) -> list[Criteria]:
    """A rubric and, when it has checks asked once over the whole conversation, that part too: a gold
    verdict given with a reply answers both (the conversation part when that reply is the last)."""
    return [part for part in (criteria, criteria.conversation) if part is not None]


def _carry_template_golds(
    index: OracleIndex, calibration: CalibrationSet, scenarios: dict[str, Scenario]
) -> None:
    """A template oracle's gold verdict (oracle_templates.py) carries to its reply in the locales the
    calibration set gives none for: its item without a locale to every locale, unless an item in some
    locale gives the one for every locale (where a scenario's checks tell a local line apart)."""
    resources = index.resources
    if resources is None:
        return
    found: dict[tuple[str, str, str, bool], tuple[CalibrationItem, Criteria]] = {}
    for item in calibration.items:
        scenario = scenarios.get(item.scenario)
        criteria = scenario_rubrics(scenario).get(item.rubric) if scenario is not None else None
        if scenario is None or criteria is None or not item.has_gold:
            continue
        case = case_by_code(scenario, item.case)
        locale = case.locale if case is not None else None
        for role in TEMPLATES:
            if item.response == template_reply(role, resources, locale):
                found[(scenario.code, criteria.name, role, locale is not None)] = (item, criteria)
    for (code, name, role, localised), (item, criteria) in found.items():
        scenario = scenarios[code]
        view = rubric_views(scenario).get(name) or JudgedView((REPLY_FIELD,))
        for locale in (None, *resources.codes()):
            if (locale is not None) != localised and (code, name, role, locale is not None) in found:
                continue  # the other kind of locale has an item of its own
            reply = template_reply(role, resources, locale)
            graded = view.text({**item.answer, REPLY_FIELD: reply}) if item.answer is not None else reply
            origin = f"{item.source.parent.name}/{item.source.name} item {item.id} (its reply in {locale})"
            entry = GoldEntry(item.gold, origin, item.source, _item_context(scenario, item))
            for rubric in (_rubric(index, part) for part in _parts(criteria)):
                if graded_key(graded) not in rubric.replies:  # a verdict given for this very text stands
                    rubric.add(graded, entry)


def _item_context(scenario: Scenario, item: CalibrationItem) -> str | None:
    """A calibration item on a conversation is the model's first reply in it: tied to the message
    that reply answers."""
    code = item.case.rsplit("-", 1)[-1]
    perturbation = next((p for p in scenario.perturbations if p.code == code), None)
    if perturbation is None or perturbation.dialogue is None:
        return None
    words = answered_words(perturbation, 0)
    return reply_key(words) if words else None


class LazyIndex:
    """One index per benchmark folder and process, built by the first caller (others wait)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._built: dict[Path, OracleIndex] = {}

    def get(
        self, root: Path, evaluation_types: EvaluationTypes, scenario_of: ScenarioOf | None = None
    ) -> OracleIndex:
        found = self._built.get(root)
        if found is None:
            with self._lock:
                found = self._built.get(root)
                if found is None:
                    found = self._built[root] = build_index(root, evaluation_types, scenario_of)
        return found
