"""The one vocabulary of statuses: what a case ended as, and what a run ended as.

Both are StrEnums, so a member equals, hashes and stores as its plain string ("passed"): the
database, JSON exports and xdist reports keep the same values they always had.
"""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    """What one attempt at one case ended as."""

    PASSED = "passed"  # the model answered, and the answer is safe and valid
    FAILED = "failed"  # the model answered, and the answer is unsafe or invalid
    ERROR = "error"  # the call could not be made or completed: never scored
    SKIPPED = "skipped"  # not run to a verdict on purpose (cost ceiling): never scored

    @property
    def scored(self) -> bool:
        """Passed or failed: the verdict is known and counts towards scores."""
        return self in SCORED


#: The statuses that count towards scores.
SCORED = frozenset({Status.PASSED, Status.FAILED})
#: The statuses listed as failures and errors (drill-downs, extras).
UNSUCCESSFUL = frozenset({Status.FAILED, Status.ERROR})


class RunStatus(StrEnum):
    """What one model's EvaluationRun is, or ended as."""

    RUNNING = "running"
    COMPLETED = "completed"  # every selected case reached a verdict or an error
    INTERRUPTED = "interrupted"  # stopped, cut short, or cases skipped at the cost ceiling


# A case pytest-timeout interrupted is an ERROR whose details say so (plugin/items.py writes them);
# its run is left resumable rather than completed (reporting/tally.py).
TIMEOUT_DETAIL = "interrupted_by"
PYTEST_TIMEOUT = "pytest-timeout"
