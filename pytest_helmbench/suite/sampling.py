"""--helmbench-sample: a stable, stratified draw of case codes.

Each code is ranked by the SHA-256 of `"{seed}:{code}"` (as pytest-randomly seeds by test), so a
code's rank never depends on which other codes exist: adding a scenario moves only the few codes
it outranks, and the rest of the sample stays. Codes are drawn round-robin across behaviours, each
behaviour giving its best-ranked code not yet drawn, so every behaviour is represented whenever the
size allows. The draw is of codes: every model and repeat of a drawn code is kept.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from ..codes import code_sort_key


def rank(seed: int, code: str) -> bytes:
    """A code's place in the draw for this seed (smaller first), independent of every other code."""
    return hashlib.sha256(f"{seed}:{code}".encode()).digest()


def sample_codes(entries: Iterable[tuple[str, str]], size: int, seed: int) -> set[str]:
    """`size` codes from (behaviour, code) pairs (repeated pairs count once), round-robin over the
    behaviours in numeric order, each behaviour's codes in rank order."""
    by_behaviour: dict[str, set[str]] = {}
    for behaviour, code in entries:
        by_behaviour.setdefault(behaviour, set()).add(code)
    queues = [
        sorted(by_behaviour[behaviour], key=lambda code: rank(seed, code), reverse=True)
        for behaviour in sorted(by_behaviour, key=code_sort_key)
    ]
    chosen: set[str] = set()
    while len(chosen) < size and any(queues):
        for queue in queues:
            if queue and len(chosen) < size:
                chosen.add(queue.pop())
    return chosen
