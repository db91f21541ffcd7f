"""HELMBench's own narrowing of the collected cases, in the order the plugin's hooks apply it.

First (a plain hook, before pytest's `-k`/`-m`): the numeric order and --helmbench-select. Then (a
trylast hook, after them): the sample, the shard and a resume plan, so a resumed session with the same
arguments draws the same sample and shard and only drops what its run already finished. Last (at
collection finish, after `--lf` too): the estimate, which deselects everything it priced.
"""

from __future__ import annotations

import pytest

from ..suite.cases import parse_selectors
from ..suite.prompt import compose
from ..suite.sampling import sample_codes
from .compat import randomly_reorders
from .fleet import apply_shard
from .items import CaseItem, case_items, keep_cases, sort_cases
from .state import HelmbenchState


def order_and_select(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Numeric order (or pytest-randomly's), then --helmbench-select."""
    if not sort_cases(items, keep_order=randomly_reorders(config)):
        return
    state = HelmbenchState.get(config)
    try:
        selectors = parse_selectors(state.option("select") or [])
    except ValueError as exc:
        raise pytest.UsageError(f"--helmbench-select: {exc}") from None
    if selectors:
        keep_cases(config, items, lambda it: any(s.matches(it.case.segments) for s in selectors))


def sample_shard_and_resume(config: pytest.Config, items: list[pytest.Item]) -> None:
    """--helmbench-sample from what every other selection kept, --helmbench-shard of that, then the
    resume plan (last: the same arguments must draw the same sample and shard again)."""
    if not case_items(items):  # also when collection failed on a bad setting: nothing to read
        return
    state = HelmbenchState.get(config)
    if state.settings.sample:
        entries = ((it.case.scenario.behaviour, it.case.code) for it in case_items(items))
        chosen = sample_codes(entries, state.settings.sample, state.settings.sample_seed)
        keep_cases(config, items, lambda it: it.case.code in chosen)
    apply_shard(state, config, items)
    _apply_resume_plan(state, config, items)


def estimate_instead(session: pytest.Session) -> None:
    """--helmbench-estimate prices exactly what would run, then deselects it all: nothing runs."""
    if not case_items(session.items):
        return
    state = HelmbenchState.get(session.config)
    if state.option("estimate"):
        _write_estimate(state, session.config, case_items(session.items))
        keep_cases(session.config, session.items, lambda it: False)


def _apply_resume_plan(state: HelmbenchState, config: pytest.Config, items: list[pytest.Item]) -> None:
    plan = state.load_plan()
    if plan is None:
        return
    from ..execution.resume import PlannedCase, apply_plan

    cases = case_items(items)
    planned = (
        PlannedCase(
            it.case.model,
            it.case.code,
            it.repeat,
            state.executor.request_for(it.case, compose(it.case), it.repeat)[2],
            it.case.layout,
        )
        for it in cases
    )
    decided = apply_plan(plan, planned)
    state.save_resume_counts(decided.counts)
    done = {id(it) for it, keep in zip(cases, decided.keep, strict=True) if not keep}
    keep_cases(config, items, lambda it: id(it) not in done)


def _write_estimate(state: HelmbenchState, config: pytest.Config, items: list[CaseItem]) -> None:
    from ..execution.estimate import write_estimate

    settings = state.settings
    write_estimate(
        config.pluginmanager.get_plugin("terminalreporter"),
        (it.case for it in items),
        max_tokens=settings.max_tokens,
        marking_model=settings.judge_ids,
        rejudge=settings.rejudge,
        user_model=settings.user_agent.id if settings.user_agent else None,
        pricing=state.clients.pricing,  # each model's provider prices it (local models: free)
        evaluators=state.evaluators,
    )
