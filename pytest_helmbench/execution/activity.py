"""What each running case is doing now, so a slow case is never silent on the terminal.

pytest reports cases in collection order while the prefetch pool finishes them in any order: one
slow conversation would hide every case finished behind it. The executor notes each step of a case
(its reply, each turn, judging, the simulated user, an extraction) here; the item waiting for that
case reads it every few seconds and says what the case is doing and how many others finished
meanwhile (plugin/items.py). Thread-safe: the pool's threads write, pytest's thread reads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    """One step of a running case and when it began (the clock's seconds)."""

    what: str
    since: float


class Activity:
    """The current step of every running case, and how many cases have finished."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._steps: dict[str, Step] = {}
        self._lock = threading.Lock()
        self.finished = 0

    def doing(self, nodeid: str, what: str) -> None:
        step = Step(what, self._clock())
        with self._lock:
            self._steps[nodeid] = step

    def done(self, nodeid: str) -> None:
        with self._lock:
            self._steps.pop(nodeid, None)
            self.finished += 1

    def step(self, nodeid: str) -> Step | None:
        with self._lock:
            return self._steps.get(nodeid)

    def running(self) -> int:
        with self._lock:
            return len(self._steps)

    def waiting_line(self, nodeid: str, name: str, waited: float, shown: int) -> str:
        """`still waiting 20 s for P1-B1-S4-C2-PT3: turn 3: checks and judge calls (12 s); 14 other
        case(s) finished, not yet shown; 7 running` — the step once the case has begun, else that it
        is queued; `shown`: the cases pytest has reported so far."""
        step = self.step(nodeid)
        doing = (
            "queued behind the calls in flight"
            if step is None
            else f"{step.what} ({self._clock() - step.since:.0f} s)"
        )
        ahead = max(0, self.finished - shown)
        return (
            f"HELMBench: still waiting {waited:.0f} s for {name}: {doing}; "
            f"{ahead} other case(s) finished, not yet shown; {self.running()} running"
        )
