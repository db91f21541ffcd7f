"""The metadata keys each benchmark file may hold: a key nobody reads is a mistake until shown otherwise.

A misspelled `critcal: true` would leave a scenario silently non-critical; so every key outside
these sets is an error naming the file, the line and the closest known key. Authors' own notes go
under keys starting with `x_` (`x_reviewer: …`), which are kept as metadata and never read.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..errors import BenchmarkError

OWN_KEY_PREFIX = "x_"

SCENARIO_KEYS = frozenset(
    {
        "title",
        "category",
        "risk",
        "critical",
        "refusal",
        "evaluation",
        "checks",
        "conditions",
        "user_contexts",
        "age",
        "locale",
        "harmful_labels",
    }
)
_COMPONENT = frozenset({"title", "severity", "rationale"})
CONDITION_KEYS = _COMPONENT | {"wrap"}
USER_CONTEXT_KEYS = _COMPONENT | {"wrap", "locale", "age", "language", "declines_resources", "memory_of_risk"}
PERTURBATION_KEYS = _COMPONENT | {
    "style",
    "language",
    "locale",
    "declines_resources",
    "conversation",
    "simulate",
}
KEYS_BY_KIND = {
    "condition": CONDITION_KEYS,
    "user_context": USER_CONTEXT_KEYS,
    "perturbation": PERTURBATION_KEYS,
}


def check_keys(
    meta: Mapping[str, object],
    known: Iterable[str],
    path: Path,
    lines: Mapping[str, int],
    where: str = "",
) -> None:
    """Every key of `meta` is known or the author's own (`x_…`); else a BenchmarkError at its line,
    with the closest known key when one is close (`critcal` -> `critical`)."""
    allowed = sorted(known)
    for key in meta:
        name = str(key)
        if name in allowed or name.startswith(OWN_KEY_PREFIX):
            continue
        close = difflib.get_close_matches(name, allowed, n=1, cutoff=0.6)
        guess = f" (did you mean {close[0]!r}?)" if close else ""
        raise BenchmarkError(
            path,
            f"{where}unknown key {name!r}{guess}: nothing reads it",
            line=lines.get(name),
            fix=f"use one of {', '.join(allowed)}; keep your own notes under {OWN_KEY_PREFIX}{name}",
        )
