"""Keep what lives all session out of the garbage collector's view (large runs spend less time in gc).

Collection builds thousands of items and the parsed benchmark, and they live until the session
ends: every full collection during the run, and pytest's own at exit, would otherwise scan them all
again. They are frozen (`gc.freeze`) after each scenario file, released when pytest is done (a
process running pytest in-process gets its memory back), and frozen again when the process exits:
the interpreter's final collections over a large run took 0.3-0.7 s of every command.

The run then keeps what it reports (pytest's reports, the outcomes of the summary) until it ends too:
each full collection, due whenever the heap has grown by a quarter, scanned all of it again. Frozen
every RUN_FREEZE_EVERY reports, after a collection of the young generations (so the short-lived
cycles are freed, not frozen), garbage collection took 0.8 s instead of 3.7 s of a 9,000-case oracle
run (24 s in all before, 21 s after, the same peak memory).
"""

from __future__ import annotations

import atexit
import gc

import pytest

FROZEN_KEY = pytest.StashKey[bool]()
REPORTS_KEY = pytest.StashKey[int]()
#: Reports between two freezes during the run: a freeze costs one young collection.
RUN_FREEZE_EVERY = 500
_exit_freeze_registered = False


def freeze_collected(config: pytest.Config) -> None:
    """Freeze what collection built so far; from now on, freeze again at process exit."""
    gc.freeze()
    config.stash[FROZEN_KEY] = True
    global _exit_freeze_registered
    if not _exit_freeze_registered:
        _exit_freeze_registered = True
        atexit.register(gc.freeze)


def freeze_as_the_run_grows(config: pytest.Config) -> None:
    """Count a report; every RUN_FREEZE_EVERY of them, freeze what the run has kept so far."""
    if not config.stash.get(FROZEN_KEY, False):
        return
    count = config.stash[REPORTS_KEY] = config.stash.get(REPORTS_KEY, 0) + 1
    if count % RUN_FREEZE_EVERY == 0:
        gc.collect(1)
        gc.freeze()


def refreeze_after_run(config: pytest.Config) -> None:
    """The run's reports and outcomes now live until exit too: pytest's final collections skip them."""
    if config.stash.get(FROZEN_KEY, False):
        gc.freeze()


def unfreeze(config: pytest.Config) -> None:
    """pytest is done with this config: hand the frozen objects back to the collector."""
    if config.stash.get(FROZEN_KEY, False):
        config.stash[FROZEN_KEY] = False
        gc.unfreeze()
