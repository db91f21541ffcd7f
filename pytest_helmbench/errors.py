"""User-facing errors: each names the file (and line) and says what to fix, so no traceback is needed."""

from __future__ import annotations

from pathlib import Path


class HelmbenchError(Exception):
    """Base of every error HELMBench shows to a user as a message instead of a traceback."""


class BenchmarkError(HelmbenchError):
    """A problem in the benchmark files: reported as a collection error of the scenarios it affects."""

    def __init__(self, path: Path | str, message: str, *, line: int | None = None, fix: str = "") -> None:
        self.path = Path(path)
        self.line = line
        self.message = message
        self.fix = fix
        super().__init__(self.describe())

    def describe(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else str(self.path)
        text = f"{where}: {self.message}"
        if self.fix:
            text += f"\n  fix: {self.fix}"
        return text


class ConfigError(HelmbenchError):
    """A bad option, models.yml entry or environment setting."""
