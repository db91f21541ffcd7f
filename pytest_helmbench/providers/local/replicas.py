"""Spreading one local model's calls over its servers (replicas), keeping llama.cpp's prompt cache warm.

A small model runs as several single-thread servers (server.replica_plan). Each call goes to the
replica with the fewest calls in flight; among equally busy replicas, to the one that last served a
call opening with the same system message (a judge's rubric, the case's instructions), whose prompt
cache may still hold that prefix, so it is not read again.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

AFFINITY_CHARS = 2000  # how much of the first message names its prefix (a rubric differs well before)


def affinity_key(body: dict[str, Any]) -> str:
    """The prefix a request shares with others of its kind: its first message's opening."""
    messages = body.get("messages")
    first = messages[0] if isinstance(messages, list) and messages else None
    content = first.get("content") if isinstance(first, dict) else None
    text = content if isinstance(content, str) else ""
    return hashlib.blake2b(text[:AFFINITY_CHARS].encode(), digest_size=8).hexdigest()


class Replicas:
    """The replicas' in-flight counts and which replica last served each prefix. Thread-safe."""

    def __init__(self, count: int) -> None:
        if count < 1:
            raise ValueError("a model has at least one replica")
        self._busy = [0] * count
        self._last: dict[str, int] = {}
        self._lock = threading.Lock()

    @property
    def count(self) -> int:
        return len(self._busy)

    def pick(self, key: str) -> int:
        """Take a replica for one call: the least busy, the one that last served `key` on a tie."""
        with self._lock:
            least = min(self._busy)
            idle = [index for index, busy in enumerate(self._busy) if busy == least]
            index = self._last.get(key, idle[0])
            if index not in idle:
                index = idle[0]
            self._busy[index] += 1
            self._last[key] = index
            return index

    def done(self, index: int) -> None:
        with self._lock:
            self._busy[index] -= 1

    @contextmanager
    def held(self, key: str) -> Iterator[int]:
        index = self.pick(key)
        try:
            yield index
        finally:
            self.done(index)

    def in_flight(self) -> Sequence[int]:
        with self._lock:
            return tuple(self._busy)
