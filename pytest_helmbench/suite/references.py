"""A scenario's references.yml: its safe, unsafe and borderline reference answers and their gold verdicts.

`safe` and `unsafe` are required; `borderline_safe` (a realistic near miss that still passes every
check) and `borderline_unsafe` (a plausible reply that fails one check, not a caricature) are optional
here and required of the shipped benchmark by its content tests: they show the rubrics separate the
middle of the range, not only the extremes.

The references are what the oracle models answer with (`oracle/safe`, `oracle/unsafe`, …) and what
the `oracle/judge` marks with: each side's `verdict` is the gold verdict on criteria.md, `verdicts`
maps any further rubric file to its gold verdict, and the safe side may carry per-locale variants of
its reply (`locales: {GB: {response: …}}`) and per-perturbation replies in the language of that
perturbation's message (`perturbations: {PT6: {response: …}}`), which keep the side's verdicts.
`transcripts` holds the reference conversation of each multi-turn perturbation: a safe and an unsafe
answer per judged reply and, when simulated, the user's later turns. How the references fit a
scenario (its rubrics, its conversations) is checked in reference_fit.py.
Read through the confined reader; a malformed file is a BenchmarkError naming the file and the fix.

A gold verdict's form and its check against a rubric are in gold.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import BenchmarkError
from .evaluation_spec import valid_rubric
from .files import BenchmarkFiles
from .gold import Gold, normalise_gold
from .markdown import load_yaml

REFERENCES_FILE = "references.yml"
LABEL_RUBRIC = "criteria.md"  # the rubric a side's plain `verdict` is the gold verdict of
LOCALE = re.compile(r"^[A-Z]{2}$")
PERTURBATION_CODE = re.compile(r"^PT[1-9][0-9]*$")
BORDERLINE_SAFE, BORDERLINE_UNSAFE = "borderline_safe", "borderline_unsafe"
SAFE_KINDS = frozenset({"safe", BORDERLINE_SAFE})  # the sides whose answer passes every check
_TOP_KEYS = ("safe", "unsafe", BORDERLINE_SAFE, BORDERLINE_UNSAFE, "transcripts")
_SIDE_KEYS = ("answer", "locales", "perturbations", "verdict", "verdicts", "note")
_TRANSCRIPT_KEYS = ("user", "safe", "unsafe", "goal_reached")
_TRANSCRIPT_FIX = (
    'write PT3: {user: ["…"], safe: [{answer: …}, …], unsafe: [{answer: …}, …]} '
    "(see docs/reference/benchmark-files.md)"
)


@dataclass(frozen=True)
class ReferenceAnswer:
    """One side of references.yml: the answer, its gold verdicts by rubric file, its locale replies."""

    kind: str  # "safe", "unsafe", "borderline_safe", "borderline_unsafe"; "transcripts.PT3.safe[0]"
    answer: dict[str, Any] = field(hash=False)
    verdicts: dict[str, Gold] = field(hash=False)  # rubric file name -> gold (criteria.md's included)
    locales: dict[str, str] = field(hash=False)  # locale code -> the reply that replaces `response`
    # perturbation code -> the same answer in that message's language (its own `locales` possible)
    perturbations: dict[str, ReferenceAnswer] = field(default_factory=dict, hash=False)

    @property
    def response(self) -> str | None:
        value = self.answer.get("response")
        return value if isinstance(value, str) else None

    def for_locale(self, locale: str | None) -> dict[str, Any]:
        """The answer for a case whose user context has this locale (the default when no variant)."""
        if locale is None or locale not in self.locales:
            return dict(self.answer)
        return {**self.answer, "response": self.locales[locale]}

    def for_case(self, locale: str | None, perturbation: str | None) -> dict[str, Any]:
        """The answer for a case: the perturbation's variant (a message in another language is
        answered in it) when there is one, then the locale's reply."""
        variant = self.perturbations.get(perturbation or "")
        return (variant or self).for_locale(locale)

    def replies(self) -> Iterator[tuple[str, str]]:
        """(label, reply) of every reply this side gives: the default, each locale's, and each
        perturbation variant's (all keep this side's verdicts)."""
        if self.response is not None:
            yield "", self.response
        for locale, reply in sorted(self.locales.items()):
            yield f", locale {locale}", reply
        for code, variant in sorted(self.perturbations.items()):
            yield from ((f", {code}{label}", reply) for label, reply in variant.replies())

    def gold(self, rubric: str) -> Gold | None:
        return self.verdicts.get(rubric)

    @property
    def is_safe(self) -> bool:
        """A safe side: `safe`, `borderline_safe` (or a variant of one), or an entry of a transcript's
        `safe` list."""
        return _is_safe_kind(self.kind)


@dataclass(frozen=True)
class Transcript:
    """The reference conversation of one multi-turn perturbation: the user's later turns (simulated
    only, as the oracle user-agent replays them) and one safe and one unsafe answer per judged reply."""

    perturbation: str
    user: tuple[str, ...]
    safe: tuple[ReferenceAnswer, ...]
    unsafe: tuple[ReferenceAnswer, ...]
    # an attacker's: the unsafe side's reply (1: its first) from which the goal is reached (stop_when)
    goal_reached: int | None = None

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
            path,
            "must be a mapping with 'safe' and 'unsafe'",
            fix="see docs/reference/benchmark-files.md, references.yml",
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
    reached = data.get("goal_reached")
    if reached is not None and (
        isinstance(reached, bool) or not isinstance(reached, int) or not 1 <= reached <= len(unsafe)
    ):
        raise BenchmarkError(
            path,
            f"{where}.goal_reached {reached!r} is not a reply of the unsafe side (1 to {len(unsafe)})",
            fix="write goal_reached: N, the unsafe reply (counted from 1) at which an attacker's goal is "
            "reached, or leave it out",
        )
    return Transcript(code, tuple(user), safe, unsafe, reached)


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
    variants = _perturbation_variants(data.get("perturbations"), kind, dict(answer), verdicts, path)
    return ReferenceAnswer(kind, dict(answer), verdicts, locales, variants)


def _is_safe_kind(kind: str) -> bool:
    """`safe`, `borderline_safe` (and their perturbation variants), or a transcript's safe entry."""
    return kind.split(".perturbations.")[0] in SAFE_KINDS or ".safe[" in kind


def _perturbation_variants(
    data: Any, kind: str, answer: dict[str, Any], verdicts: dict[str, Gold], path: Path
) -> dict[str, ReferenceAnswer]:
    """`perturbations: {PT6: {response: …, locales: {…}}}` on `safe` or `borderline_safe`: the same
    answer written in the language of that perturbation's message, with the side's verdicts."""
    if data is None:
        return {}
    fix = "write perturbations: {PT6: {response: …}} (optionally with its own locales)"
    if kind not in SAFE_KINDS:
        raise BenchmarkError(path, f"{kind}: only safe and borderline_safe have 'perturbations'", fix=fix)
    if not isinstance(data, dict):
        raise BenchmarkError(path, f"{kind}: 'perturbations' must be a mapping", fix=fix)
    found = {}
    for code, variant in data.items():
        where = f"{kind}.perturbations.{code}"
        if not isinstance(code, str) or not PERTURBATION_CODE.match(code):
            raise BenchmarkError(
                path, f"{kind}: perturbations key {code!r} is not a perturbation code", fix=fix
            )
        if not isinstance(variant, dict) or not isinstance(variant.get("response"), str):
            raise BenchmarkError(path, f"{where} must be a mapping with a 'response' (a text)", fix=fix)
        _known_keys(variant, ("response", "locales"), where, path)
        found[code] = ReferenceAnswer(
            where,
            {**answer, "response": variant["response"]},
            verdicts,
            _locales(variant.get("locales"), where, path),
        )
    return found


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
        if not valid_rubric(rubric):
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
    if not _is_safe_kind(kind):
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
