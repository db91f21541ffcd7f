"""Keep what lives all session out of the garbage collector's view (large runs spend less time in gc).

Collection builds thousands of items and the parsed benchmark, and they live until the session
ends: every full collection during the run, and pytest's own at exit, would otherwise scan them all
again. They are frozen (`gc.freeze`) after each scenario file, released when pytest is done (a
process running pytest in-process gets its memory back), and frozen again when the process exits:
the interpreter's final collections over a large run took 0.3-0.7 s of every command.
"""

from __future__ import annotations

import atexit
import gc

import pytest

FROZEN_KEY = pytest.StashKey[bool]()
_exit_freeze_registered = False


def freeze_collected(config: pytest.Config) -> None:
    """Freeze what collection built so far; from now on, freeze again at process exit."""
    gc.freeze()
    config.stash[FROZEN_KEY] = True
    global _exit_freeze_registered
    if not _exit_freeze_registered:
        _exit_freeze_registered = True
        atexit.register(gc.freeze)


def refreeze_after_run(config: pytest.Config) -> None:
    """The run's reports and outcomes now live until exit too: pytest's final collections skip them."""
    if config.stash.get(FROZEN_KEY, False):
        gc.freeze()


def unfreeze(config: pytest.Config) -> None:
    """pytest is done with this config: hand the frozen objects back to the collector."""
    if config.stash.get(FROZEN_KEY, False):
        config.stash[FROZEN_KEY] = False
        gc.unfreeze()
