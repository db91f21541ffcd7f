"""What stops spending across every process of a run (xdist workers and threads alike).

CostLedger: the spend is kept in one small file under an exclusive lock, so every worker sees
every other's spend at once; a call starts only while the spend is under the ceiling, so the
overshoot is bounded by the calls already in flight. StopBoard: a model rejected once (bad key, no
credit, model or parameters refused), or every model once results cannot be stored, is stopped for
every process, one file per model. The locks are filelock's (fcntl on POSIX, msvcrt on Windows): the
plugin loads in every pytest session, so nothing here may need a POSIX-only module.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..errors import HelmbenchError

if TYPE_CHECKING:
    from filelock import BaseFileLock


def _file_lock(path: Path) -> BaseFileLock:
    """An exclusive lock on `path`, for processes (the caller's threading lock orders its threads).

    filelock (~40 ms to import, with asyncio) is imported here: this module loads in every pytest
    session, and only a run with a cost ceiling or a stopped model takes a lock."""
    from filelock import FileLock

    return FileLock(str(path), thread_local=False)


class SharedSpend(Protocol):
    """Spend shared beyond this session (every process of a run key: storage/fleet.py)."""

    def add(self, amount: float) -> None: ...

    def spent(self) -> float: ...


class SharedStops(Protocol):
    """Stops shared beyond this session (every process of a run key: storage/fleet.py)."""

    def stop(self, model: str, reason: str) -> None: ...

    def reason(self, model: str) -> str | None: ...

    def stopped(self, *, fresh: bool = False) -> dict[str, str]: ...


class BudgetExhausted(HelmbenchError):
    """The cost ceiling was reached: the case is recorded as skipped (a resume picks it up)."""


class CostLedger:
    """Running USD spend of this session, shared through a locked file; with `shared` (a run key in a
    shared database), the spend of every process of the key instead, kept in the database."""

    def __init__(self, path: Path, limit: float | None, shared: SharedSpend | None = None) -> None:
        self.path = path
        self.limit = limit
        self.shared = shared
        self._lock = threading.Lock()  # the threads of this process; the file lock, other processes
        self._file_lock = _file_lock(path.with_name(f"{path.name}.lock"))
        path.touch(exist_ok=True)

    def _update(self, amount: float) -> float:
        with self._lock, self._file_lock, open(self.path, "r+", encoding="ascii") as handle:
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

    def spent(self) -> float:
        return self.shared.spent() if self.shared is not None else self._update(0.0)

    def add(self, amount: float | None) -> None:
        if amount and self.shared is not None:
            self.shared.add(amount)
        elif amount:
            self._update(amount)

    def check(self) -> None:
        """Raise BudgetExhausted when the ceiling is reached (before a call is started)."""
        if self.limit is not None and self.spent() >= self.limit:
            raise BudgetExhausted(f"cost ceiling of ${self.limit:.4f} reached (--helmbench-max-cost)")


class StopBoard:
    """Models stopped for the rest of the session, kept as files so every xdist worker sees them.

    `cross_process=False` (a run without xdist: every call is made in this process) answers the check
    made before every call from memory, without touching the file system. Writers and the listing
    hold the board's file lock; the check before each call reads one file without it (each is
    written whole, then renamed into place), so it stays cheap."""

    def __init__(
        self, folder: Path, *, cross_process: bool = True, shared: SharedStops | None = None
    ) -> None:
        self.folder = folder
        self.cross_process = cross_process
        self.shared = shared  # a run key's stops, in the database: a model stopped anywhere stops here
        folder.mkdir(parents=True, exist_ok=True)
        self._thread_lock = threading.Lock()
        self._paths: dict[str, str] = {}
        self._here: dict[str, str] = {}  # stopped by this process

    @cached_property
    def _file_lock(self) -> BaseFileLock:
        """Beside the folder, not in it: the folder holds only the stops."""
        return _file_lock(self.folder.with_name(f"{self.folder.name}.lock"))

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

    def stop(self, model: str, message: str, *, fleet: bool = True) -> None:
        """Stop `model` for every process of the session (and of the run key unless `fleet` is False:
        a session stopping is its own business)."""
        # Write then rename: another worker reading mid-write must never see a half-written file.
        self._here[model] = message  # this process's own calls stop at once
        if fleet and self.shared is not None:
            self.shared.stop(model, message)
        path = self._path(model)
        temp = path.with_name(f"{path.stem}.{os.getpid()}.{threading.get_ident()}.tmp")
        with self._thread_lock, self._file_lock:
            temp.write_text(f"{model}\n{message}", encoding="utf-8")
            os.replace(temp, path)

    def stop_all(self, models: Iterable[str], message: str) -> None:
        """Stop every model given (results cannot be stored): no process starts another call."""
        for model in dict.fromkeys(models):
            self.stop(model, message, fleet=False)

    def reason(self, model: str) -> str | None:
        found = self._here.get(model)
        if found is None and self.shared is not None:
            found = self.shared.reason(model)
        if found is not None or not self.cross_process:
            return found
        try:
            with open(self._file(model), encoding="utf-8") as file:
                return file.read().split("\n", 1)[1]
        except FileNotFoundError:
            return None

    def stopped(self) -> dict[str, str]:
        found = {}
        with self._thread_lock, self._file_lock:
            for path in sorted(self.folder.glob("*.stop")):
                model, message = path.read_text(encoding="utf-8").split("\n", 1)
                found[model] = message
        if self.shared is not None:
            found = {**self.shared.stopped(fresh=True), **found}
        return found
