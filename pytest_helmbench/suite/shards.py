"""--helmbench-shard K/N: a deterministic, behaviour-balanced 1/N of the selected case codes, and
what a process is in a run split across processes (`FleetRole`: its --helmbench-run-key and shard;
plain data, no database import: every session reads it, most to find it is None).

Every process of a run split across machines computes the same split from the codes alone, so the
shards are disjoint and together hold every selected code, and every model and repeat of a code goes
to the same shard. Within each behaviour the codes are taken in `sampling.rank` order (the sample's
ranking) and each goes to its most preferred shard (a SHA-256 of the code and the shard: rendezvous
hashing) that still has room, the room being an even share of the behaviour (sizes differ by at most
one). A code's preference never depends on other codes, so adding a scenario moves only a few codes
of its own behaviour, and none of any other behaviour.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from ..codes import code_sort_key
from .sampling import rank

SHARD_FORM = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


@dataclass(frozen=True)
class Shard:
    """Shard `index` (1-based) of `count`."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str | None) -> Shard | None:
    """`"2/3"` -> Shard(2, 3); empty -> None; anything else a ValueError that says what to write."""
    if text is None or not str(text).strip():
        return None
    match = SHARD_FORM.fullmatch(str(text))
    fix = "write K/N with 1 <= K <= N, e.g. 2/3 for the second of three shards"
    if match is None:
        raise ValueError(f"{text!r} is not K/N: {fix}")
    index, count = int(match[1]), int(match[2])
    if count < 1 or not 1 <= index <= count:
        raise ValueError(f"{text!r} has no shard {index} of {count}: {fix}")
    return Shard(index, count)


def _preferences(code: str, count: int) -> list[int]:
    """Shards 1..count in this code's order of preference (independent of every other code)."""
    return sorted(range(1, count + 1), key=lambda shard: hashlib.sha256(f"{code}#{shard}".encode()).digest())


def assign_shards(entries: Iterable[tuple[str, str]], count: int) -> dict[str, int]:
    """Each code of (behaviour, code) pairs (repeated pairs count once) -> its shard, 1..count."""
    by_behaviour: dict[str, set[str]] = {}
    for behaviour, code in entries:
        by_behaviour.setdefault(behaviour, set()).add(code)
    found: dict[str, int] = {}
    for behaviour in sorted(by_behaviour, key=code_sort_key):
        codes = sorted(by_behaviour[behaviour], key=lambda code: rank(0, code))
        base, extra = divmod(len(codes), count)
        sizes = dict.fromkeys(range(1, count + 1), 0)
        for code in codes:
            full = base + 1 if extra else base  # room: an even share; `extra` shards take one more
            shard = next(s for s in _preferences(code, count) if sizes[s] < full)
            sizes[shard] += 1
            if extra and sizes[shard] == base + 1:
                extra -= 1
            found[code] = shard
    return found


def shard_codes(entries: Iterable[tuple[str, str]], shard: Shard) -> set[str]:
    """The codes of (behaviour, code) pairs that `shard` runs."""
    return {code for code, index in assign_shards(entries, shard.count).items() if index == shard.index}


@dataclass(frozen=True)
class FleetRole:
    """--helmbench-run-key and --helmbench-shard K/N of this process."""

    run_key: str
    shard: int | None = None  # K
    shard_count: int | None = None  # N


def fleet_role(run_key: str | None, shard: str | None) -> FleetRole | None:
    """The role of a process given --helmbench-run-key (None without) and --helmbench-shard."""
    key = str(run_key or "").strip()
    if not key:
        return None
    try:
        found = parse_shard(shard)
    except ValueError:  # a usage error at collection already: nothing runs
        found = None
    return FleetRole(key, found.index if found else None, found.count if found else None)
