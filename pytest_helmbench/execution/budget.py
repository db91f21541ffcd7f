"""A cost ceiling that holds across every process of a run (xdist workers and threads alike).

The spend is kept in one small file under an exclusive lock (fcntl), so every worker sees every
other's spend at once; a call starts only while the spend is under the ceiling, so the overshoot
is bounded by the calls already in flight.
"""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

from ..errors import HelmbenchError


class BudgetExhausted(HelmbenchError):
    """The cost ceiling was reached: the case is recorded as skipped (a resume picks it up)."""


class CostLedger:
    """Running USD spend of this session, shared through a locked file."""

    def __init__(self, path: Path, limit: float | None) -> None:
        self.path = path
        self.limit = limit
        self._lock = threading.Lock()
        path.touch(exist_ok=True)

    def _update(self, amount: float) -> float:
        with self._lock, open(self.path, "r+", encoding="ascii") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                text = handle.read().strip()
                spent = float(text) if text else 0.0
                if amount:
                    spent += amount
                    handle.seek(0)
                    handle.truncate()
                    handle.write(repr(spent))
                    handle.flush()
                    os.fsync(handle.fileno())
                return spent
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def spent(self) -> float:
        return self._update(0.0)

    def add(self, amount: float | None) -> None:
        if amount:
            self._update(amount)

    def check(self) -> None:
        """Raise BudgetExhausted when the ceiling is reached (before a call is started)."""
        if self.limit is not None and self.spent() >= self.limit:
            raise BudgetExhausted(f"cost ceiling of ${self.limit:.4f} reached (--helmbench-max-cost)")
