"""Credentials are never stored or shown: one place that hides them in any text HELMBench writes.

`redact` hides URL passwords (and all userinfo of http(s) URLs), secret-looking query parameters,
bearer tokens, `sk-…` / `sk-or-…` style keys, long high-entropy tokens, and the exact value of every
`Secret` made in this process (the API key, keys named by `api_key_env`). It is applied to what is
stored with a run (options, pytest args), the terminal summary, error messages of providers and
storage, reports and exports. A key is held in a `Secret`, whose repr and str never show it, so
neither a log line nor pytest's `--showlocals` can print it. Standard library only: the bottom layer.
"""

from __future__ import annotations

import hmac
import math
import re
import threading
from collections import Counter
from typing import Any

MASK = "***"
# Exact values shorter than this are not searched for: too likely to hit ordinary text.
_MIN_KNOWN = 8

_known: set[str] = set()
_known_lock = threading.Lock()

_URL_USERINFO = re.compile(
    r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^\s:/?#@]*)(?::(?P<password>[^\s/?#@]*))?@"
)
_QUERY_SECRET = re.compile(
    r"(?P<name>[?&;](?:password|passwd|pwd|pass|api[_-]?key|apikey|key|token|access[_-]?token|secret|"
    r"auth|authorization|sig|signature)=)[^&#\s'\"]*",
    re.IGNORECASE,
)
_BEARER = re.compile(r"\b(?P<scheme>Bearer|Basic|Token)\s+[^\s'\",;]+", re.IGNORECASE)
_SK_KEY = re.compile(r"\bsk-[A-Za-z0-9][A-Za-z0-9_\-]{7,}")
_LONG_TOKEN = re.compile(r"(?<![A-Za-z0-9_\-])[A-Za-z0-9_\-]{32,}(?![A-Za-z0-9_\-])")
# Bits per character above which a long token is taken for a key (random base62 has ~5.9).
_ENTROPY_BITS = 3.5


class Secret:
    """A credential. `reveal()` is the only way to its value; repr and str show `Secret('***')`.

    Every non-empty Secret is also remembered, so `redact` hides its exact value wherever it appears."""

    __slots__ = ("_value",)

    def __init__(self, value: str = "") -> None:
        self._value = value
        if len(value) >= _MIN_KNOWN:
            with _known_lock:
                _known.add(value)

    def reveal(self) -> str:
        return self._value

    def __bool__(self) -> bool:
        return bool(self._value)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Secret):
            return hmac.compare_digest(self._value.encode(), other._value.encode())
        return NotImplemented

    def __hash__(self) -> int:
        return hash((Secret, self._value))

    def __repr__(self) -> str:
        return f"Secret({MASK!r})" if self._value else "Secret('')"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        raise TypeError("a Secret is never pickled")


def _userinfo(match: re.Match[str]) -> str:
    scheme = match.group("scheme")
    if scheme.lower().startswith(("http", "ws")):
        return f"{scheme}{MASK}@"  # a web URL's userinfo is a credential, whatever its shape
    if match.group("password") is not None:
        return f"{scheme}{match.group('user')}:{MASK}@"  # a database URL keeps its user name
    return match.group(0)


def _entropy(token: str) -> float:
    counts = Counter(token)
    return -sum(n / len(token) * math.log2(n / len(token)) for n in counts.values())


def _looks_like_key(token: str) -> bool:
    """Mixed case and digits with high entropy: a key. Hex digests (one case) and words are not."""
    return (
        any(c.isupper() for c in token)
        and any(c.islower() for c in token)
        and any(c.isdigit() for c in token)
        and _entropy(token) >= _ENTROPY_BITS
    )


def _long_token(match: re.Match[str]) -> str:
    return MASK if _looks_like_key(match.group(0)) else match.group(0)


def redact(text: str) -> str:
    """`text` with every credential replaced by `***`."""
    if not text:
        return text
    with _known_lock:
        known = sorted(_known, key=len, reverse=True)
    for value in known:
        if value in text:
            text = text.replace(value, MASK)
    text = _URL_USERINFO.sub(_userinfo, text)
    text = _QUERY_SECRET.sub(lambda m: m.group("name") + MASK, text)
    text = _BEARER.sub(lambda m: f"{m.group('scheme')} {MASK}", text)
    text = _SK_KEY.sub(MASK, text)
    return _LONG_TOKEN.sub(_long_token, text)


def redact_data(value: Any) -> Any:
    """Every string inside JSON-like data (dicts, lists, tuples) redacted; keys too."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact_data(k): redact_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_data(v) for v in value]
    if isinstance(value, Secret):
        return MASK
    return value
