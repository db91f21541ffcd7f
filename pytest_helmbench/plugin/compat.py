"""HELMBench next to the pytest plugins that change how often, in which order or how long a case runs.

- pytest-rerunfailures: an errored case raises `CaseError` (so `--only-rerun CaseError` selects it);
  a failed case (an unsafe answer) is never asked again: a rerun replays its failed outcome, so its
  status stays failed (items.CaseItem.setup); each case counts once, by its last attempt (tally.py).
- pytest-timeout: its timeout (signal method) interrupting a case's call is an error Outcome, reason
  `timeout: …`, and the run is left resumable (not completed).
- pytest-xdist `--dist each`: every worker would run (and pay for) every case: refused.
- pytest-randomly: its shuffled order is kept instead of HELMBench's numeric order.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ..status import PYTEST_TIMEOUT

TIMEOUT_REASON = "timeout"

DIST_EACH = (
    "HELMBench: --dist each runs every case on every worker, paying for each case once per worker and "
    "counting it as many times. Use -n N with the default --dist load (or --dist loadscope/loadfile), "
    "or --helmbench-concurrency for many calls in flight."
)


def is_timeout(exc: BaseException) -> bool:
    """pytest-timeout's signal method ends a test with pytest.fail("Timeout (>Ns) from pytest-timeout.")."""
    return isinstance(exc, pytest.fail.Exception) and PYTEST_TIMEOUT in str(exc)


def timeout_reason(exc: BaseException) -> str:
    return f"{TIMEOUT_REASON}: {exc}"


def randomly_reorders(config: pytest.Config) -> bool:
    """pytest-randomly is loaded (not `-p no:randomly`) and shuffles (no --randomly-dont-reorganize)."""
    return config.pluginmanager.hasplugin("randomly") and bool(config.getoption("randomly_reorganize", False))


def dist_each(config: pytest.Config) -> bool:
    return config.getoption("dist", None) == "each"


def collects_benchmark(config: pytest.Config, root: Path) -> bool:
    """Whether this session's paths (its arguments, else testpaths) hold the benchmark or lie inside it:
    known before any worker starts, so `--dist each` is refused there (other suites keep it)."""
    if not root.is_dir():
        return False
    for arg in config.args:
        path = (config.invocation_params.dir / arg.split("::", 1)[0]).resolve()
        if path == root or root in path.parents or path in root.parents:
            return True
    return False
