"""Which language a text is written in, well enough to tell whether a reply answers in the user's.

No model and no dependency: a reply in the wrong language is usually obvious from its letters. A
language written in its own script (Japanese, Hindi, Russian, Arabic, …) is recognised by the share
of the text's letters in that script; for Japanese, kana must appear too (kanji alone is Chinese).
A few Latin-script languages are told apart by their most frequent short words (`LATIN_WORDS`); a
Latin-script language not listed there can only be checked for its script.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass

LATIN = "Latin"
#: ISO 639-1 code -> the script it is written in (anything not listed is written in Latin script).
SCRIPTS: dict[str, str] = {
    "ja": "Japanese",
    "zh": "Han",
    "ko": "Hangul",
    "ru": "Cyrillic",
    "uk": "Cyrillic",
    "bg": "Cyrillic",
    "sr": "Cyrillic",
    "be": "Cyrillic",
    "kk": "Cyrillic",
    "ar": "Arabic",
    "fa": "Arabic",
    "ur": "Arabic",
    "he": "Hebrew",
    "hi": "Devanagari",
    "mr": "Devanagari",
    "ne": "Devanagari",
    "bn": "Bengali",
    "ta": "Tamil",
    "te": "Telugu",
    "gu": "Gujarati",
    "pa": "Gurmukhi",
    "th": "Thai",
    "el": "Greek",
    "ka": "Georgian",
    "hy": "Armenian",
}
#: The first word of a letter's Unicode name -> its script, for the scripts above.
_NAME_SCRIPTS = {
    "LATIN": LATIN,
    "CJK": "Han",
    "HIRAGANA": "Kana",
    "KATAKANA": "Kana",
    "HANGUL": "Hangul",
    "CYRILLIC": "Cyrillic",
    "ARABIC": "Arabic",
    "HEBREW": "Hebrew",
    "DEVANAGARI": "Devanagari",
    "BENGALI": "Bengali",
    "TAMIL": "Tamil",
    "TELUGU": "Telugu",
    "GUJARATI": "Gujarati",
    "GURMUKHI": "Gurmukhi",
    "THAI": "Thai",
    "GREEK": "Greek",
    "GEORGIAN": "Georgian",
    "ARMENIAN": "Armenian",
}
#: Frequent short words that mark a Latin-script language (articles, pronouns, prepositions). A word
#: several languages share ("de", "que", "la") counts for each of them in proportion: 1/n of a word.
LATIN_WORDS: dict[str, frozenset[str]] = {
    "en": frozenset("the and you to is of it that in for with this have are not what my me can".split()),
    "es": frozenset(
        "el la de que y en los las por para con una es lo mi pero muy estoy usted también".split()
    ),
    "fr": frozenset("le la les de et que est une pour pas je vous dans ce qui avec mon suis".split()),
    "de": frozenset("der das und ist nicht ich ein eine zu mit mich sie es auf mein bin".split()),
    "it": frozenset("il la di che non un una per sono ho con gli del mio questo".split()),
    "pt": frozenset("de que não um uma para com eu os da do meu estou muito você é em ao isso são".split()),
    "nl": frozenset("de het een van ik niet dat je met zijn mijn voor".split()),
    "pl": frozenset("w nie się że jest z jak mnie ale czy jestem".split()),
    "sv": frozenset("och att det är jag inte som på med för mig har min".split()),
}
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
MAJORITY = 0.5  # share of letters that must be in the language's script
KANA_SHARE = 0.05  # share of letters that must be kana for Japanese (kanji alone reads as Chinese)


def script_of(char: str) -> str | None:
    """The script of one letter (None for a letter of a script not in the table)."""
    name = unicodedata.name(char, "")
    first = name.split(" ", 1)[0]
    if first in ("FULLWIDTH", "HALFWIDTH"):
        first = name.split(" ", 2)[1] if " " in name else first
    return _NAME_SCRIPTS.get(first)


def script_shares(text: str) -> dict[str, float]:
    """Each script's share of the text's letters (empty when the text has no letters)."""
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return {}
    counts = Counter(script_of(c) or "Other" for c in letters)
    return {script: n / len(letters) for script, n in counts.items()}


def script_of_language(language: str) -> str:
    return SCRIPTS.get(language, LATIN)


_SHARED = Counter(word for marks in LATIN_WORDS.values() for word in marks)


def latin_scores(text: str) -> dict[str, float]:
    """How many of the text's words are frequent words of each listed Latin-script language (a word
    listed for n languages counts 1/n for each, so the words only one language uses decide)."""
    words = [w.casefold() for w in _WORD.findall(text)]
    return {code: sum(1 / _SHARED[w] for w in words if w in marks) for code, marks in LATIN_WORDS.items()}


def latin_language(text: str) -> str | None:
    """The listed Latin-script language whose frequent words the text uses most (None: too few, or
    a tie)."""
    scores = latin_scores(text)
    best = max(scores, key=lambda code: scores[code])
    ranked = sorted(scores.values(), reverse=True)
    if ranked[0] < 3 or ranked[0] == ranked[1]:
        return None
    return best


@dataclass(frozen=True)
class LanguageVerdict:
    """Whether a text is written in a language, and the evidence."""

    matches: bool
    reason: str
    shares: dict[str, float]
    detected: str | None = None  # the Latin-script language the frequent words point to


def written_in(text: str, language: str) -> LanguageVerdict:
    """Whether `text` is written mostly in `language` (ISO 639-1)."""
    shares = script_shares(text)
    if not shares:
        return LanguageVerdict(False, "the text has no letters", shares)
    script = script_of_language(language)
    if script == "Japanese":
        share = shares.get("Han", 0.0) + shares.get("Kana", 0.0)
        if share < MAJORITY or shares.get("Kana", 0.0) < KANA_SHARE:
            return LanguageVerdict(False, f"{share:.0%} of its letters are Japanese script", shares)
        return LanguageVerdict(True, f"{share:.0%} of its letters are Japanese script", shares)
    share = shares.get(script, 0.0)
    if share < MAJORITY:
        main = max(shares, key=lambda s: shares[s])
        return LanguageVerdict(
            False, f"{share:.0%} of its letters are {script} script (mostly {main})", shares
        )
    if script != LATIN:
        return LanguageVerdict(True, f"{share:.0%} of its letters are {script} script", shares)
    detected = latin_language(text)
    if language in LATIN_WORDS and detected is not None and detected != language:
        return LanguageVerdict(False, f"its words are {detected}, not {language}", shares, detected)
    checked = "its words and script" if language in LATIN_WORDS and detected else "its script only"
    return LanguageVerdict(True, f"written in {language} ({checked} checked)", shares, detected)


def identify(text: str) -> str | None:
    """A best guess at the text's language: the language of its main non-Latin script, else the
    listed Latin-script language its words point to; None when it cannot tell."""
    shares = script_shares(text)
    if not shares:
        return None
    if shares.get("Kana", 0.0) >= KANA_SHARE and shares.get("Kana", 0.0) + shares.get("Han", 0.0) >= MAJORITY:
        return "ja"
    main = max(shares, key=lambda s: shares[s])
    if main != LATIN:
        return next((code for code, script in SCRIPTS.items() if script == main), None)
    return latin_language(text)
