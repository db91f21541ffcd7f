"""--helmbench-shard K/N applied to the collected items (the split itself: suite/shards.py; the run
the shards share: storage/fleet.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pytest

from ..execution.selection import codes_by_model
from ..suite.cases import Case
from ..suite.shards import parse_shard, shard_codes
from .items import case_items, keep_cases
from .notes import session_notes

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
        # The run every shard joins selected what they select together. An xdist worker saves it
        # for its controller, which sees only the node ids left after the split.
        unsharded = session_notes(config).unsharded = codes_by_model(
            (it.case.model, it.case.code) for it in cases
        )
        if state.is_worker:
            state.shared.save_unsharded(unsharded)
        entries = [(it.case.scenario.behaviour, it.case.code) for it in cases]
        chosen = shard_codes(entries, shard)
        keep_cases(config, items, lambda it: it.case.code in chosen)


def join_key_runs(state: HelmbenchState, cases: Sequence[Case]) -> None:
    """With --helmbench-run-key, join the key's run of every model before the first call
    (Recorder.join_runs): a process whose shard count, benchmark or settings differ from the run's
    stops here, having paid for nothing. Under xdist the first Result joins (the controller holds no
    case to write the benchmark's rows from)."""
    if state.fleet is None or state.recorder is None or not cases:
        return
    state.prepare_content(cases[:1])  # the benchmark's row, which a run points at
    models = [m for m in state.settings.model_ids if not state.is_dry_run(m)]
    state.recorder.join_runs(models, {m: state.run_options(m) for m in models})
