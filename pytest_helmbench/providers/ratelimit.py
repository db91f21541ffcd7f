"""Adaptive concurrency for model calls: additive increase, multiplicative decrease (AIMD).

On a 429 the number of calls allowed in flight halves (at most once per cool-down, so a burst of
429s from calls that were already in flight counts once), never below a floor; every success adds
1/limit, so the limit climbs back by about one per `limit` successes.

A conversation's calls (`chained`) take the next free place before other waiting calls: each of its
turns waits for the one before, so queued behind every single-turn case's calls at each step it would
end long after the rest (the first run on two-slot local servers: 284 s with this, 302 s without).
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)


_CHAINED = contextvars.ContextVar("helmbench_chained_call", default=False)


@contextmanager
def chained(on: bool = True) -> Iterator[None]:
    """The calls made in this context (a conversation's turns, their judges, its simulated user) go first."""
    token = _CHAINED.set(on)
    try:
        yield
    finally:
        _CHAINED.reset(token)


class AdaptiveLimiter:
    """Gate for HTTP attempts shared by all threads of a process."""

    def __init__(self, maximum: int, floor: int | None = None, cooldown: float = 1.0) -> None:
        self.maximum = max(1, maximum)
        self.floor = max(1, min(floor if floor is not None else 4, self.maximum))
        self.limit = float(self.maximum)
        self.cooldown = cooldown
        self.active = 0
        self.chained_waiting = 0  # chained calls waiting for a place: the others wait behind them
        self.lowest = self.limit
        self._last_decrease = 0.0
        self._cond = threading.Condition()

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Wait until fewer than `limit` attempts are in flight (and, unless this call is `chained`, no
        chained call waits), then hold a place for one."""
        first = _CHAINED.get()
        with self._cond:
            self.chained_waiting += first
            try:
                while self.active >= int(self.limit) or (not first and self.chained_waiting):
                    self._cond.wait()
            finally:
                if first:  # the calls that waited behind this one may go now
                    self.chained_waiting -= 1
                    self._cond.notify_all()
            self.active += 1
        try:
            yield
        finally:
            with self._cond:
                self.active -= 1
                self._cond.notify_all()

    def on_rate_limited(self) -> None:
        with self._cond:
            now = time.monotonic()
            if now - self._last_decrease < self.cooldown:
                return
            self._last_decrease = now
            old = self.limit
            self.limit = max(float(self.floor), self.limit / 2)
            self.lowest = min(self.lowest, self.limit)
            if int(old) != int(self.limit):
                log.info("rate limited: concurrency %d -> %d", int(old), int(self.limit))

    def on_success(self) -> None:
        with self._cond:
            if self.limit < self.maximum:
                self.limit = min(float(self.maximum), self.limit + 1.0 / self.limit)
                self._cond.notify_all()
