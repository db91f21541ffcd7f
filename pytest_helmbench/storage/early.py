"""Results stored before their items report them (Recorder.record's `ahead`), and how each is then
recognised when its item does report it.

With concurrency, a serial run's calls finish ahead of pytest's loop; when storage is the loop's
bottleneck many answers wait at once. Storing them with the Result being recorded makes one commit
(one WAL flush on PostgreSQL) serve many Results. A Result is still never reported before it is
stored: it is stored earlier. An interrupted session may thus keep answers it had not shown yet,
which a resume then does not pay for again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..execution.outcome import Outcome
from ..status import Status
from .content import ContentIds
from .result_rows import RunCounters

# Only answers: an error may be rerun (pytest-rerunfailures), and its rerun replaces it.
ANSWERED = frozenset({Status.PASSED, Status.FAILED})
Row = tuple[Outcome, RunCounters, ContentIds]
Key = tuple[int, str, int, str]


def result_key(run_id: int, outcome: Outcome) -> Key:
    """A Result's place in its run: one per case, repeat and layout."""
    return (run_id, outcome.case_code, outcome.repeat, outcome.layout)


def fingerprint(outcome: Outcome) -> tuple[Any, ...]:
    """What tells the answer stored early from the one its item reports (they are the same)."""
    return (outcome.status, outcome.reason, outcome.request_hash, outcome.raw_response, outcome.cost_usd)


class EarlyResults:
    """The Results this session stored before their items reported them."""

    def __init__(self) -> None:
        self._stored: dict[Key, Outcome] = {}

    def rows(self, ahead: Iterable[Outcome], first: Key, fits: Callable[[Outcome], Row | None]) -> list[Row]:
        """The answers in `ahead` to store with the Result at `first`: those `fits` accepts (the
        recorder's fast path: rows known, run its own, not stored yet), each case once."""
        rows, keys = [], {first}
        for early in ahead:
            row = fits(early) if early.status in ANSWERED else None
            if row is not None and (key := result_key(row[1].id, early)) not in keys:
                keys.add(key)
                rows.append(row)
        return rows

    def stored(self, rows: Iterable[Row]) -> list[Key]:
        """Remember rows just committed; returns their keys."""
        keys = []
        for outcome, run, _ in rows:
            keys.append(key := result_key(run.id, outcome))
            self._stored[key] = outcome
        return keys

    def take(self, run_id: int, outcome: Outcome) -> bool | None:
        """True when the item reports the answer stored early (nothing left to write); None when it was
        not stored early; False if the answer stored differs (it cannot: then it is replaced)."""
        if not self._stored:
            return None
        stored = self._stored.pop(result_key(run_id, outcome), None)
        return None if stored is None else fingerprint(stored) == fingerprint(outcome)

    def unreported(self) -> list[Outcome]:
        """The answers stored early whose items never reported them (the session stopped first): the
        summary counts them too, so it says what the database holds."""
        return list(self._stored.values())
