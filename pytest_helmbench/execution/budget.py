"""What stops spending across every process of a run (xdist workers and threads alike).

CostLedger: the spend is kept in one small file under an exclusive lock (fcntl), so every worker sees
every other's spend at once; a call starts only while the spend is under the ceiling, so the
overshoot is bounded by the calls already in flight. StopBoard: a model rejected once (bad key, no
credit, model or parameters refused) is stopped for every process, one file per model.
"""

from __future__ import annotations

import fcntl
import hashlib
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


class StopBoard:
    """Models stopped for the rest of the session, kept as files so every xdist worker sees them.

    `cross_process=False` (a run without xdist: every call is made in this process) answers the check
    made before every call from memory, without touching the file system."""

    def __init__(self, folder: Path, *, cross_process: bool = True) -> None:
        self.folder = folder
        self.cross_process = cross_process
        folder.mkdir(parents=True, exist_ok=True)
        self._paths: dict[str, str] = {}
        self._here: dict[str, str] = {}  # stopped by this process

    def _path(self, model: str) -> Path:
        return Path(self._file(model))

    def _file(self, model: str) -> str:
        """Asked before every call: the file name is worked out once per model."""
        found = self._paths.get(model)
        if found is None:
            found = self._paths[model] = os.path.join(
                self.folder, hashlib.sha256(model.encode()).hexdigest()[:16] + ".stop"
            )
        return found

    def stop(self, model: str, message: str) -> None:
        # Write then rename: another worker reading mid-write must never see a half-written file.
        path = self._path(model)
        temp = path.with_name(f"{path.stem}.{os.getpid()}.{threading.get_ident()}.tmp")
        temp.write_text(f"{model}\n{message}", encoding="utf-8")
        os.replace(temp, path)
        self._here[model] = message

    def reason(self, model: str) -> str | None:
        found = self._here.get(model)
        if found is not None or not self.cross_process:
            return found
        try:
            with open(self._file(model), encoding="utf-8") as file:
                return file.read().split("\n", 1)[1]
        except FileNotFoundError:
            return None

    def stopped(self) -> dict[str, str]:
        found = {}
        for path in sorted(self.folder.glob("*.stop")):
            model, message = path.read_text(encoding="utf-8").split("\n", 1)
            found[model] = message
        return found
