"""The files every process of one pytest session shares (the controller and its xdist workers).

One folder per session, named by the session id: the controller creates it when a run first
needs it and removes it at the end; workers receive its path through `workerinput`. Nothing is
created for a session that never asks (a plain pytest run touches no file).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SESSION_KEY = "helmbench_session_id"
FOLDER_KEY = "helmbench_shared"


@dataclass(frozen=True)
class SharedFiles:
    """Where the session's shared files live: one typed name for each, one folder for all."""

    session_id: str
    folder: Path

    @classmethod
    def new(cls) -> SharedFiles:
        """The controller's (or a serial run's): a fresh session id and a folder not yet created."""
        session_id = uuid.uuid4().hex
        return cls(session_id, Path(tempfile.gettempdir()) / f"helmbench-{session_id}")

    @classmethod
    def from_workerinput(cls, workerinput: dict[str, Any]) -> SharedFiles:
        """An xdist worker's: the controller's session id and folder."""
        return cls(str(workerinput[SESSION_KEY]), Path(str(workerinput[FOLDER_KEY])))

    def to_workerinput(self) -> dict[str, str]:
        """Handed to each xdist worker; the folder exists from then on (workers write into it)."""
        self.ensure()
        return {SESSION_KEY: self.session_id, FOLDER_KEY: str(self.folder)}

    def exists(self) -> bool:
        return self.folder.is_dir()

    def ensure(self) -> Path:
        """Create the folder (readable by this user only) when a run first needs it."""
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        return self.folder

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    @property
    def stops(self) -> Path:
        """StopBoard: one file per stopped model."""
        return self.folder / "stops"

    @property
    def spend(self) -> Path:
        """CostLedger: the session's USD spend under a file lock."""
        return self.folder / "spend.txt"

    @property
    def resume_plan(self) -> Path:
        """ResumePlan, written by the controller before any worker collects."""
        return self.folder / "resume.json"

    @property
    def resume_counts(self) -> Path:
        """How the resume plan decided, for the controller's summary."""
        return self.folder / "resume-counts.json"

    def save_resume_counts(self, counts: dict[str, int]) -> None:
        self.ensure()
        self.resume_counts.write_text(json.dumps(counts), encoding="utf-8")

    def load_resume_counts(self) -> dict[str, int] | None:
        """None when no process of the session wrote any."""
        path = self.resume_counts
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None

    @property
    def changed_baseline(self) -> Path:
        """--helmbench-changed's Baseline, written by the controller before any worker collects."""
        return self.folder / "changed.json"

    @property
    def changed_counts(self) -> Path:
        """How --helmbench-changed decided, for the controller's line and exit status."""
        return self.folder / "changed-counts.json"

    @property
    def providers(self) -> Path:
        """What the controller's providers share with workers (where local model servers listen)."""
        return self.folder / "providers.json"

    @property
    def unsharded(self) -> Path:
        """What a worker's --helmbench-shard split: the whole selection of the keyed run, for the
        controller, which sees only the node ids left after the split."""
        return self.folder / "unsharded.json"

    def save_unsharded(self, codes: dict[str, set[str]]) -> None:
        """A worker's whole selection per model (every worker writes the same; atomically)."""
        partial = self.unsharded.with_name(f"{self.unsharded.name}.{os.getpid()}")
        partial.write_text(json.dumps({model: sorted(found) for model, found in codes.items()}))
        os.replace(partial, self.unsharded)

    @property
    def run_selection(self) -> Path:
        """A worker's selection.run_fingerprints (a keyed run's), for the controller."""
        return self.folder / "run_selection.json"

    def save_run_selection(self, fingerprints: dict[str, dict[str, Any]]) -> None:
        partial = self.run_selection.with_name(f"{self.run_selection.name}.{os.getpid()}")
        partial.write_text(json.dumps(fingerprints))
        os.replace(partial, self.run_selection)

    def load_run_selection(self) -> dict[str, dict[str, Any]]:
        try:
            return dict(json.loads(self.run_selection.read_text()))
        except (OSError, ValueError):
            return {}

    def load_unsharded(self) -> dict[str, set[str]]:
        """The controller's copy ({} when no worker split anything)."""
        try:
            found = json.loads(self.unsharded.read_text())
        except (OSError, ValueError):
            return {}
        return {model: set(codes) for model, codes in found.items()}
