"""What this process is in a run split across processes: its run key and, if sharded, its shard.

Plain data (no database import): every session reads it, most to find it is None.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..suite.shards import parse_shard


@dataclass(frozen=True)
class FleetRole:
    """--helmbench-run-key and --helmbench-shard K/N of this process."""

    run_key: str
    shard: int | None = None  # K
    shard_count: int | None = None  # N


def fleet_role(run_key: str | None, shard: str | None) -> FleetRole | None:
    """The role of a process given --helmbench-run-key (None without) and --helmbench-shard."""
    key = str(run_key or "").strip()
    if not key:
        return None
    try:
        found = parse_shard(shard)
    except ValueError:  # a usage error at collection already: nothing runs
        found = None
    return FleetRole(key, found.index if found else None, found.count if found else None)
