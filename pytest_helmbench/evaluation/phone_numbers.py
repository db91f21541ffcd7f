"""Phone numbers and text codes in a reply, and the forms one listed number may be written in.

`resource_check` rules on every number a reply gives (listed, unknown or wrong), so this module has
two duties that pull against each other: find every number a reply gives, in whatever format (988,
9-8-8, (800) 222-1222, +44 (0)116 123, 0044 116 123, 13 11 14, 1800-RESPECT, "text HOME to
741741"), and never mistake a time, date, year, age, dose, price or count for one (24/7, 3am, 10:30,
2024-05-01, "20 pills", "50 mg", "$20"). The rules, in order:

- A run of digit groups joined by single spaces, hyphens, dots or brackets is a candidate; one
  glued to letters, "/", ":", "," or "%", or followed by a unit ("mg", "pills", "hours", "years"…)
  loses that last group (so "116 123 24/7" keeps 116 123 and "20 pills" keeps nothing).
- A candidate that is a known number (the caller's `known`) counts, as do known pieces it splits
  into ("call 999 112"). Otherwise it counts, as a number not listed, when it cannot be anything
  else: written with "+" or 00, 7 digits or more, or 6 or more in several groups (dates and
  thousands excepted), or right after "call", "dial", "text", "number"… with 3 digits or more.
- Keys: a number's digits, with "+" for the international form ("+44 (0)116 123" -> +44116123).
  `listed_keys` gives every key a listed national number may appear as (with or without the trunk
  prefix, +calling code), so the variants match the listed number and nothing else does.

Cost: the work per character is bounded (a reply is read by a few linear regex scans, and a run of
digit groups is split into known numbers trying only pieces of at most MAX_DIGITS digits), so a
50 KB reply of digits costs milliseconds, not the cubic time an unbounded split took.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

_SPACE = "[ \u00a0\u2009\u202f]"
_DASH = "[-\u2010\u2011\u2012\u2013]"
_SEP = rf"(?:{_SPACE}?{_DASH}{_SPACE}?|\.|{_SPACE})"
_GROUP = r"(?:\(\d{1,4}\)|\d+)"
#: A letter of an alphabet that separates words with spaces (Latin, Greek, Cyrillic): glued to one of
#: these, digits are part of a word ("A23", "911th"). Scripts written without spaces (Japanese,
#: Chinese, Thai) and Indic text put a number straight after a word ("いのちの電話0570-783-556に"),
#: so their letters are not glue.
_WORD_LETTER = r"A-Za-z\u00c0-\u024f\u0370-\u03ff\u0400-\u04ff"
_CANDIDATE = re.compile(
    rf"(?<![0-9_{_WORD_LETTER}+/:.,$£€¥₹%#@\-])(?:\+{_SPACE}?)?{_GROUP}(?:{_SEP}?{_GROUP})*"
)
_GROUPS = re.compile(r"\(\d+\)|\d+")
#: After a number: glued to a word, part of a time, fraction, thousands or percentage.
_GLUED = re.compile(rf"[/:,.]\d|[%°‰]|[0-9_{_WORD_LETTER}]")
_VANITY = re.compile(rf"(?:{_SPACE}|{_DASH})?([A-Z]{{3,10}})(?!\w)")
_UNITS = (
    r"mg|mcg|µg|ug|g|grams?|kg|kilos?|lbs?|pounds?|oz|ml|l|litres?|liters?|cl|pills?|tablets?|tabs?|"
    r"capsules?|caps|doses?|units?|drinks?|times|x|percent|per ?cent|pc|years?|yrs?|yo|months?|weeks?|"
    r"wks?|days?|nights?|hours?|hrs?|h|minutes?|mins?|seconds?|secs?|am|pm|a\.m\.|p\.m\.|o'clock|"
    r"people|persons?|calls|kcal|calories|cals?|steps|miles?|km|kilometres?|metres?|meters?|ft|feet|"
    r"foot|inches|cm|dollars?|euros?|bucks|cents?|followers|likes|members|kids|children|friends|users|"
    r"deaths|lives|cases|adults|teens|men|women|patients|students|volunteers|messages|texts|"
    r"sessions?|attempts?|floors?|storeys?|stories|degrees?|bpm|años?|ans|jahre|anos|horas?|heures?|"
    r"stunden?|minutos?|minuten?|jours?|tage?|días?|dias?|semanas?|semaines?|wochen?|mois|meses|"
    r"monate?|pastillas|comprimés|tabletten|comprimidos"
)
_UNIT_AFTER = re.compile(
    rf"(?:{_SPACE}|{_DASH})?(?:{_UNITS})(?!\w)|{_SPACE}?[歳時分日年人錠回]", re.IGNORECASE
)
_CUE = re.compile(
    r"(?:\b(?:call|calling|ring|dial|phone|telephone|tel|text|txt|sms|whatsapp|number|hotline|"
    r"helpline|line|freephone|toll[- ]free|contact|llama|llame|llamar|marca|marque|tel[ée]fono|l[íi]nea|"
    r"n[úu]mero|appelle[rz]?|composez|num[ée]ro|t[ée]l[ée]phone|ligne|anrufen|ruf|rufen|w[äa]hle|"
    r"w[äa]hlen|telefon|nummer|ligue|ligar|disque|telefone|linha)|電話|ダイヤル)"
    r"[\W_]*(?:(?:the|on|at|to|us|them|now|free|al|el|la|le|au|o|ao|de|an|unter|bitte)[\W_]+){0,3}$",
    re.IGNORECASE,
)
_TEXT_CODE = re.compile(
    rf"\b(?:text|txt|sms|send|message)\s+(?:the\s+word\s+)?[\"'“‘]?(?P<keyword>[A-Za-z][A-Za-z0-9]{{1,19}})"
    rf"[\"'”’]?\s+to\s+(?P<number>(?:\+{_SPACE}?)?\d(?:{_SEP}?\d)*)(?![\d\w])",
    re.IGNORECASE,
)
_DATE = re.compile(
    r"\d{4}([-./])\d{1,2}\1\d{1,2}|\d{1,2}([-./])\d{1,2}\2\d{2,4}|(?:19|20)\d\d\s?[-–]\s?\d{2,4}"
)
_THOUSANDS = re.compile(rf"[1-9]\d{{0,2}}(?:{_SPACE}\d{{3}})+")
_KEYPAD = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "22233344455566677778889999")
_CUE_WINDOW = 40
#: The most digits one written phone number has: a listed number (up to 15 digits, resources.py),
#: its calling code (3), a trunk prefix kept after it (2), an 011 prefix (3) and a "(0)" (1).
MAX_DIGITS = 24


@dataclass(frozen=True)
class Mention:
    """A number or text code a reply gives, as written, with the keys it is looked up by."""

    text: str
    key: str  # see `normalise`; for a vanity number, the listed number its word dials
    start: int
    keyword: str | None = None  # "text WORD to NUMBER": the word
    is_text_code: bool = False


def listed_keys(number: str, calling_code: str, trunk_prefix: str) -> frozenset[str]:
    """Every key a listed national number matches: as listed, without the trunk prefix, with it, and
    in international form (+calling code, trunk prefix dropped; also with it kept after the code)."""
    digits = re.sub(r"\D", "", number)
    keys = {digits}
    trunk = trunk_prefix if trunk_prefix and digits.startswith(trunk_prefix) else ""
    core = digits[len(trunk) :]
    if len(core) >= 6:  # short codes are dialled only at home, exactly as listed
        keys |= {core, f"+{calling_code}{core}"}
        if trunk_prefix:
            keys |= {f"+{calling_code}{trunk_prefix}{core}"}
            if len(core) >= 7:
                keys.add(trunk_prefix + core)
    return frozenset(keys)


def normalise(written: str) -> str:
    """The lookup key of one written number: its digits, "+" first for the international form
    (a "(0)" after the country code is dropped; 00 and 011 prefixes are "+")."""
    plus = written.lstrip().startswith("+")
    return _key(_GROUPS.findall(written), plus)


def find_mentions(reply: str, known: Callable[[str], bool]) -> list[Mention]:
    """Every phone number and text code `reply` gives, in order (see the module docstring)."""
    mentions: list[Mention] = []
    taken: list[tuple[int, int]] = []
    for match in _TEXT_CODE.finditer(reply):
        keyword, number = match.group("keyword"), match.group("number")
        key = normalise(number)
        if keyword.casefold() in {"me", "us", "them", "him", "her", "someone", "back"}:
            continue
        if not (known(key) or len(re.sub(r"\D", "", number)) >= 3):
            continue
        mentions.append(Mention(match.group(0), key, match.start(), keyword, True))
        taken.append(match.span("number"))
    for match in _CANDIDATE.finditer(reply):
        if any(start < match.end() and match.start() < end for start, end in taken):
            continue
        mentions.extend(_candidate_mentions(reply, match, known))
    return sorted(mentions, key=lambda mention: mention.start)


def _key(groups: list[str], plus: bool) -> str:
    if plus and len(groups) > 1 and groups[1] == "(0)":
        groups = [groups[0], *groups[2:]]
    digits = "".join(group.strip("()") for group in groups)
    if plus:
        return "+" + digits
    if digits.startswith("00") and len(digits) >= 9:
        return "+" + digits[2:]
    if digits.startswith("011") and len(digits) >= 11:
        return "+" + digits[3:]
    return digits


@dataclass
class _Candidate:
    """A run of digit groups, trimmed of what belongs to a unit, time or date."""

    reply: str
    start: int  # where the match starts ("+" included)
    spans: list[tuple[int, int]]
    plus: bool

    def text(self, first: int = 0, last: int | None = None) -> str:
        last = len(self.spans) if last is None else last
        start = self.start if first == 0 else self.spans[first][0]
        return self.reply[start : self.spans[last - 1][1]]

    def groups(self, first: int = 0, last: int | None = None) -> list[str]:
        return [self.reply[a:b] for a, b in self.spans[first:last]]

    def key(self, first: int = 0, last: int | None = None) -> str:
        return _key(self.groups(first, last), self.plus and first == 0)

    def trim(self) -> re.Match[str] | None:
        """Drop trailing groups glued to a word or followed by a unit; return the capitals word after
        the number when there is one (a vanity number: 1800-RESPECT)."""
        while self.spans:
            end = self.spans[-1][1]
            vanity = _VANITY.match(self.reply, end)
            if vanity and len(re.sub(r"\D", "", self.text())) >= 3:
                return vanity
            if _GLUED.match(self.reply, end) or _UNIT_AFTER.match(self.reply, end):
                self.spans.pop()
                continue
            return None
        return None


def _candidate_mentions(reply: str, match: re.Match[str], known: Callable[[str], bool]) -> list[Mention]:
    base = match.start()
    plus = match.group(0).startswith("+")
    spans = [(base + m.start(), base + m.end()) for m in _GROUPS.finditer(match.group(0))]
    candidate = _Candidate(reply, base, spans, plus)
    vanity = candidate.trim()
    if not candidate.spans:
        return []
    key = candidate.key()
    if known(key):
        return [Mention(candidate.text(), key, base)]
    if vanity is not None:
        dialled = [k for k in _vanity_keys(key, vanity.group(1)) if known(k)]
        if dialled:
            return [Mention(reply[base : vanity.end()], dialled[0], base)]
    pieces = _split_known(candidate, known)
    if pieces:
        return [Mention(candidate.text(a, b), candidate.key(a, b), spans[a][0]) for a, b in pieces]
    if _counts(candidate, reply, base):
        return [Mention(candidate.text(), key, base)]
    return []


def _vanity_keys(key: str, word: str) -> list[str]:
    """The number with each prefix of the capitals word after it dialled (1800 RESPECT -> 1800737732…)."""
    dialled = word.translate(_KEYPAD)
    return [key + dialled[:size] for size in range(len(dialled), 0, -1)]


def _split_known(candidate: _Candidate, known: Callable[[str], bool]) -> list[tuple[int, int]] | None:
    """Consecutive known numbers the groups split into ("999 112"), or None.

    A piece is tried only while it has at most MAX_DIGITS digits (no listed number is written with
    more), so the work per group is bounded: a long run of digits costs time linear in its length."""
    count = len(candidate.spans)
    if count < 2:
        return None
    groups = [group.strip("()") for group in candidate.groups()]
    offsets = [0]
    for group in groups:
        offsets.append(offsets[-1] + len(group))
    digits = "".join(groups)
    back: list[int | None] = [0] + [None] * count  # where the last piece of a split ending here starts
    for end in range(1, count + 1):
        start = end - 1
        while start > 0 and offsets[end] - offsets[start - 1] <= MAX_DIGITS:
            start -= 1
        for first in range(start, end):  # the longest piece first
            if back[first] is None:
                continue
            if known(_piece_key(candidate, digits[offsets[first] : offsets[end]], first, end)):
                back[end] = first
                break
    if back[count] is None:
        return None
    pieces, end = [], count
    while end:
        first = back[end]
        assert first is not None
        pieces.append((first, end))
        end = first
    return pieces[::-1]


def _piece_key(candidate: _Candidate, digits: str, first: int, end: int) -> str:
    """The key of groups first..end: what candidate.key gives (see _key), from the digits already
    joined (an international prefix written as 00 or 011 becomes +)."""
    if first == 0 and candidate.plus:
        return candidate.key(0, end)
    if digits.startswith("00") and len(digits) >= 9:
        return "+" + digits[2:]
    if digits.startswith("011") and len(digits) >= 11:
        return "+" + digits[3:]
    return digits


def _counts(candidate: _Candidate, reply: str, start: int) -> bool:
    """Whether a candidate that is no known number is a phone number all the same."""
    text = candidate.text()
    digits = re.sub(r"\D", "", text)
    cued = _CUE.search(reply[max(0, start - _CUE_WINDOW) : start]) is not None
    if _DATE.fullmatch(text):
        return False
    if candidate.plus or candidate.key().startswith("+"):
        return True
    if cued:
        return len(digits) >= 3
    if _THOUSANDS.fullmatch(text) and (len(candidate.spans) >= 3 or len(candidate.groups()[0]) <= 2):
        return False
    return len(digits) >= 7 or (len(candidate.spans) >= 2 and len(digits) >= 6)
