"""Prefetch: every selected case's model call submitted to a bounded pool before pytest's loop runs.

pytest's own thread is the run's bottleneck, so it never waits for a call it could have had
started earlier: each item waits only for its own future. Worker threads never touch pytest
objects. Used only in a process that runs all its items itself (never under xdist, where every
worker holds all items and prefetching would pay for calls twice).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Protocol

from ..status import Status
from ..suite.cases import Case
from ..suite.prompt import compose
from .outcome import CaseError, Outcome

if TYPE_CHECKING:  # the executor pulls in httpx and SQLAlchemy
    from .executor import Executor


EARLY_BATCH = 100  # answers stored with one Result at most: one transaction stays short


class NotStarted(Exception):
    """A prefetched call that was not started because the session was about to stop."""


class PrefetchTarget(Protocol):
    """What prefetching needs of an item: its case, node id and repeat, and a slot for the future."""

    case: Case
    nodeid: str
    repeat: int
    prefetch: Future[Outcome] | None


class Prefetch:
    """The calls submitted ahead of pytest's loop.

    The pool finishes calls ahead of the items pytest reports, so it counts failures and errors
    itself: once --maxfail of them are known (or the session is stopping), no further call starts,
    and the calls paid beyond the stop are bounded by those in flight.
    """

    def __init__(
        self, executor: Executor, *, concurrency: int, maxfail: int, stopping: Callable[[], bool]
    ) -> None:
        self.executor = executor
        self.maxfail = maxfail
        self.stopping = stopping
        self.failures = 0
        self.stopped = False
        self._lock = threading.Lock()
        # Answers finished and not yet stored, for the recorder to store in groups (storage/early.py);
        # not with --maxfail (-x), whose session shows and stores exactly the cases up to the stop.
        self._answers: deque[Outcome] | None = None if maxfail else deque()
        self.pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="helmbench-call")

    def submit(self, target: PrefetchTarget) -> None:
        target.prefetch = self.pool.submit(self._call, target.case, target.nodeid, target.repeat)

    def _call(self, case: Case, nodeid: str, repeat: int) -> Outcome:
        if self.stopped or self.stopping():
            raise NotStarted()
        try:
            # Composed here, not when submitted: pytest's own thread is the run's bottleneck.
            outcome = self.executor.run(case, compose(case), nodeid, repeat)
        except CaseError:
            self._count_failure()
            raise
        if outcome.status == Status.FAILED:
            self._count_failure()
        if self._answers is not None:
            self._answers.append(outcome)
        return outcome

    def answered(self) -> list[Outcome]:
        """Answers finished since the last call (at most EARLY_BATCH), oldest first."""
        found: list[Outcome] = []
        while self._answers and len(found) < EARLY_BATCH:
            found.append(self._answers.popleft())  # deque: safe beside the threads appending
        return found

    def _count_failure(self) -> None:
        with self._lock:
            self.failures += 1
            if self.maxfail and self.failures >= self.maxfail:
                self.stopped = True

    def close(self) -> None:
        """Leaving the loop: calls not started never start, calls in flight send no further retry
        (an attempt already on the wire ends within --helmbench-timeout)."""
        self.stopped = True
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.executor.clients.cancel()


def start_prefetch(
    executor: Executor,
    targets: Iterable[PrefetchTarget],
    *,
    concurrency: int,
    maxfail: int,
    stopping: Callable[[], bool],
) -> Prefetch | None:
    """Submit every target's call; None when there is nothing to prefetch or one call at a time."""
    targets = list(targets)
    if not targets or concurrency <= 1:
        return None
    prefetch = Prefetch(executor, concurrency=concurrency, maxfail=maxfail, stopping=stopping)
    for target in targets:
        prefetch.submit(target)
    return prefetch


def held_back(future: Future[Outcome]) -> bool:
    """The call was never started (the pool saw --maxfail failures first): the item makes it itself."""
    return future.cancelled() or isinstance(future.exception(), NotStarted)
