"""--helmbench-shard K/N applied to the collected items (the split itself: suite/shards.py; the run
the shards share: storage/fleet.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from .execution.selection import codes_by_model
from .items import case_items, keep_cases
from .report_hooks import session_notes
from .suite.shards import parse_shard, shard_codes

if TYPE_CHECKING:
    from .state import HelmbenchState


def apply_shard(state: HelmbenchState, config: pytest.Config, items: list[pytest.Item]) -> None:
    """--helmbench-shard K/N, after the sample: this process runs its 1/N of what is left."""
    try:
        shard = parse_shard(state.option("shard"))
    except ValueError as exc:
        raise pytest.UsageError(f"--helmbench-shard / HELMBENCH_SHARD: {exc}") from None
    if shard is not None:
        cases = case_items(items)
        # The run every shard joins selected what they select together (serial shards: xdist
        # workers' selection reaches the controller only as node ids, after the split).
        session_notes(config).unsharded = codes_by_model((it.case.model, it.case.code) for it in cases)
        entries = [(it.case.scenario.behaviour, it.case.code) for it in cases]
        chosen = shard_codes(entries, shard)
        keep_cases(config, items, lambda it: it.case.code in chosen)
