"""A scenario's references.yml: its safe, unsafe and borderline reference answers and their gold verdicts.

`safe` and `unsafe` are required; `borderline_safe` (a realistic near miss that still passes every
check) and `borderline_unsafe` (a plausible reply that fails one check, not a caricature) are optional
here and required of the shipped benchmark by its content tests: they show the rubrics separate the
middle of the range, not only the extremes.

The references are what the oracle models answer with (`oracle/safe`, `oracle/unsafe`, …) and what
the `oracle/judge` marks with: each side's `verdict` is the gold verdict on criteria.md, `verdicts`
maps any further rubric file to its gold verdict, and the safe side may carry per-locale variants of
its reply (`locales: {GB: {response: …}}`), which keep the default's verdicts. `transcripts` holds
the reference conversation of each multi-turn perturbation: a safe and an unsafe answer per judged
reply and, when simulated, the user's later turns (`check_transcripts` fits them to the perturbations).
Read through the confined reader; a malformed file is a BenchmarkError naming the file and the fix.

A gold verdict's form and its check against a rubric are in gold.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import BenchmarkError
from .evaluation_spec import RUBRIC_FILE
from .files import BenchmarkFiles
from .gold import Gold, check_gold, normalise_gold
from .markdown import load_yaml
from .model import Component, Criteria

REFERENCES_FILE = "references.yml"
LABEL_RUBRIC = "criteria.md"  # the rubric a side's plain `verdict` is the gold verdict of
LOCALE = re.compile(r"^[A-Z]{2}$")
PERTURBATION_CODE = re.compile(r"^PT[1-9][0-9]*$")
BORDERLINE_SAFE, BORDERLINE_UNSAFE = "borderline_safe", "borderline_unsafe"
SAFE_KINDS = frozenset({"safe", BORDERLINE_SAFE})  # the sides whose answer passes every check
_TOP_KEYS = ("safe", "unsafe", BORDERLINE_SAFE, BORDERLINE_UNSAFE, "transcripts")
_SIDE_KEYS = ("answer", "locales", "verdict", "verdicts", "note")
_TRANSCRIPT_KEYS = ("user", "safe", "unsafe")
_TRANSCRIPT_FIX = 'write PT3: {user: ["…"], safe: [{answer: …}, …], unsafe: [{answer: …}, …]} (see README)'


@dataclass(frozen=True)
class ReferenceAnswer:
    """One side of references.yml: the answer, its gold verdicts by rubric file, its locale replies."""

    kind: str  # "safe", "unsafe", "borderline_safe", "borderline_unsafe"; "transcripts.PT3.safe[0]"
    answer: dict[str, Any] = field(hash=False)
    verdicts: dict[str, Gold] = field(hash=False)  # rubric file name -> gold (criteria.md's included)
    locales: dict[str, str] = field(hash=False)  # locale code -> the reply that replaces `response`

    @property
    def response(self) -> str | None:
        value = self.answer.get("response")
        return value if isinstance(value, str) else None

    def for_locale(self, locale: str | None) -> dict[str, Any]:
        """The answer for a case whose user context has this locale (the default when no variant)."""
        if locale is None or locale not in self.locales:
            return dict(self.answer)
        return {**self.answer, "response": self.locales[locale]}

    def gold(self, rubric: str) -> Gold | None:
        return self.verdicts.get(rubric)

    @property
    def is_safe(self) -> bool:
        """A safe side: `safe`, `borderline_safe`, or an entry of a transcript's `safe` list."""
        return self.kind in SAFE_KINDS or ".safe[" in self.kind


@dataclass(frozen=True)
class Transcript:
    """The reference conversation of one multi-turn perturbation: the user's later turns (simulated
    only, as the oracle user-agent replays them) and one safe and one unsafe answer per judged reply."""

    perturbation: str
    user: tuple[str, ...]
    safe: tuple[ReferenceAnswer, ...]
    unsafe: tuple[ReferenceAnswer, ...]

    @property
    def sides(self) -> tuple[ReferenceAnswer, ...]:
        return (*self.safe, *self.unsafe)


@dataclass(frozen=True)
class References:
    """A scenario's references.yml."""

    path: Path
    safe: ReferenceAnswer
    unsafe: ReferenceAnswer
    transcripts: dict[str, Transcript] = field(default_factory=dict, hash=False)
    borderline_safe: ReferenceAnswer | None = None
    borderline_unsafe: ReferenceAnswer | None = None

    @property
    def sides(self) -> tuple[ReferenceAnswer, ReferenceAnswer]:
        return (self.safe, self.unsafe)

    @property
    def borderlines(self) -> tuple[ReferenceAnswer, ...]:
        """The borderline sides the file has (borderline_safe first)."""
        return tuple(s for s in (self.borderline_safe, self.borderline_unsafe) if s is not None)

    def side(self, kind: str) -> ReferenceAnswer | None:
        """The single-message side named `kind` (safe, unsafe, borderline_safe, borderline_unsafe)."""
        return {s.kind: s for s in (self.safe, self.unsafe, *self.borderlines)}.get(kind)

    @property
    def all_sides(self) -> tuple[ReferenceAnswer, ...]:
        """`safe`, `unsafe`, the borderlines, then every side of every transcript (its safe entries,
        then its unsafe)."""
        transcripts = (s for t in self.transcripts.values() for s in t.sides)
        return (self.safe, self.unsafe, *self.borderlines, *transcripts)


def load_references(folder: Path, files: BenchmarkFiles) -> References | None:
    """The references of a scenario folder; None when it has no references.yml."""
    path = folder / REFERENCES_FILE
    if not files.is_file(path):
        return None
    return parse_references(load_yaml(files.read_text(path), path), path)


def parse_references(data: Any, path: Path) -> References:
    """Validate the YAML of a references.yml (both sides required, transcripts optional)."""
    if not isinstance(data, dict):
        raise BenchmarkError(
            path, "must be a mapping with 'safe' and 'unsafe'", fix="see README, references.yml"
        )
    _known_keys(data, _TOP_KEYS, "", path)
    missing = [side for side in ("safe", "unsafe") if side not in data]
    if missing:
        raise BenchmarkError(
            path, f"'{missing[0]}' is missing", fix=f"add '{missing[0]}:' with its 'answer' (and verdicts)"
        )
    transcripts = _transcripts(data["transcripts"], path) if "transcripts" in data else {}
    safe, unsafe = _side(data["safe"], "safe", path), _side(data["unsafe"], "unsafe", path)
    borderline = {k: _side(data[k], k, path) for k in (BORDERLINE_SAFE, BORDERLINE_UNSAFE) if k in data}
    return References(
        path, safe, unsafe, transcripts, borderline.get(BORDERLINE_SAFE), borderline.get(BORDERLINE_UNSAFE)
    )


def _known_keys(data: dict[Any, Any], allowed: tuple[str, ...], where: str, path: Path) -> None:
    unknown = sorted(set(map(str, data)) - set(allowed))
    if unknown:
        what = f"{where}: unknown key(s)" if where else "unknown top-level key(s)"
        raise BenchmarkError(path, f"{what} {', '.join(unknown)}", fix=f"use only {', '.join(allowed)}")


def _transcripts(data: Any, path: Path) -> dict[str, Transcript]:
    if not isinstance(data, dict):
        raise BenchmarkError(
            path, "'transcripts' must map perturbation codes to transcripts", fix=_TRANSCRIPT_FIX
        )
    found: dict[str, Transcript] = {}
    for code, entry in data.items():
        if not isinstance(code, str) or not PERTURBATION_CODE.match(code):
            raise BenchmarkError(
                path,
                f"transcripts: key {code!r} is not a perturbation code",
                fix="key each transcript by its perturbation's code, e.g. PT3",
            )
        found[code] = _transcript(entry, code, path)
    return found


def _transcript(data: Any, code: str, path: Path) -> Transcript:
    where = f"transcripts.{code}"
    if not isinstance(data, dict):
        raise BenchmarkError(path, f"{where} must be a mapping", fix=_TRANSCRIPT_FIX)
    _known_keys(data, _TRANSCRIPT_KEYS, where, path)
    user = data.get("user", [])
    if not isinstance(user, list) or not all(isinstance(t, str) and t.strip() for t in user):
        raise BenchmarkError(
            path,
            f"{where}.user must be a list of non-empty texts (the user's turns after the first)",
            fix='write user: ["…", "…"], one quoted message per later turn, or leave it out (scripted)',
        )
    sides: dict[str, tuple[ReferenceAnswer, ...]] = {}
    for kind in ("safe", "unsafe"):
        entries = data.get(kind)
        if not isinstance(entries, list) or not entries:
            raise BenchmarkError(
                path,
                f"{where}.{kind} must be a non-empty list, one answer per judged reply",
                fix=f"write {kind}: [{{answer: {{response: …, category: …}}, verdicts: …}}, …]",
            )
        sides[kind] = tuple(_side(e, f"{where}.{kind}[{i}]", path) for i, e in enumerate(entries))
    safe, unsafe = sides["safe"], sides["unsafe"]
    if len(unsafe) != len(safe) or (user and len(safe) != len(user) + 1):
        raise BenchmarkError(
            path,
            f"{where}: {len(safe)} safe and {len(unsafe)} unsafe answers, {len(user)} later user turn(s)",
            fix="give each side one answer per judged reply: the first message's, then one per later user "
            "turn (an unsafe side may start safe and fail later)",
        )
    return Transcript(code, tuple(user), safe, unsafe)


def _side(data: Any, kind: str, path: Path) -> ReferenceAnswer:
    if not isinstance(data, dict):
        raise BenchmarkError(path, f"'{kind}' must be a mapping", fix=f"write '{kind}:' then 'answer: {{…}}'")
    _known_keys(data, _SIDE_KEYS, kind, path)
    answer = data.get("answer")
    if not isinstance(answer, dict):
        raise BenchmarkError(
            path, f"{kind}: 'answer' must be a mapping (a JSON answer)", fix="write answer: {response: …, …}"
        )
    if "response" in answer and not isinstance(answer["response"], str):
        raise BenchmarkError(path, f"{kind}: answer.response must be a text", fix="quote the reply")
    verdicts = _verdicts(data.get("verdicts"), kind, path)
    verdict = data.get("verdict")
    if verdict is not None:
        if not isinstance(verdict, dict):
            raise BenchmarkError(
                path,
                f"{kind}: 'verdict' must be a mapping",
                fix="write verdict: {verdict: [SAFE], rationale: …}",
            )
        if LABEL_RUBRIC in verdicts:
            raise BenchmarkError(
                path,
                f"{kind}: criteria.md's gold verdict is given twice ('verdict' and 'verdicts')",
                fix="keep one of them",
            )
        verdicts[LABEL_RUBRIC] = normalise_gold(verdict)
    locales = _locales(data.get("locales"), kind, path)
    return ReferenceAnswer(kind, dict(answer), verdicts, locales)


def _verdicts(data: Any, kind: str, path: Path) -> dict[str, Gold]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise BenchmarkError(
            path,
            f"{kind}: 'verdicts' must map rubric files to gold verdicts",
            fix="e.g. reply-criteria.md: {…}",
        )
    found: dict[str, Gold] = {}
    for rubric, gold in data.items():
        if not isinstance(rubric, str) or not RUBRIC_FILE.match(rubric):
            raise BenchmarkError(
                path,
                f"{kind}: verdicts key {rubric!r} is not a rubric file name",
                fix="e.g. reply-criteria.md",
            )
        if not isinstance(gold, dict) or not gold:
            raise BenchmarkError(
                path,
                f"{kind}: the gold verdict for {rubric} must be a non-empty mapping",
                fix='e.g. {asks_safety: "yes", gives_method: "no"}',
            )
        found[rubric] = normalise_gold(gold)
    return found


def _locales(data: Any, kind: str, path: Path) -> dict[str, str]:
    if data is None:
        return {}
    if kind not in SAFE_KINDS and ".safe[" not in kind:
        raise BenchmarkError(
            path, f"{kind}: only a safe side has 'locales'", fix=f"remove 'locales' from {kind}"
        )
    if not isinstance(data, dict):
        raise BenchmarkError(
            path, f"{kind}: 'locales' must be a mapping", fix="e.g. locales: {GB: {response: …}}"
        )
    found: dict[str, str] = {}
    for locale, variant in data.items():
        if not isinstance(locale, str) or not LOCALE.match(locale):
            raise BenchmarkError(
                path, f"{kind}: locale {locale!r} is not a two-letter country code", fix="e.g. GB, US"
            )
        if (
            not isinstance(variant, dict)
            or set(variant) != {"response"}
            or not isinstance(variant["response"], str)
        ):
            raise BenchmarkError(
                path,
                f"{kind}: locale {locale} must be a mapping with only 'response' (a text)",
                fix=f"write {locale}: {{response: …}}",
            )
        found[locale] = variant["response"]
    return found


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
            fix=f"add transcripts: {{{missing[0]}: {{…}}}} (see README, references.yml)",
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
    if simulation is None and (transcript.user or replies != 1):
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
