"""Every narrowing of the collected cases, in the order it applies (one file, read top to bottom).

pytest's `pytest_collection_modifyitems` is implemented once, as a wrapper, so the order is written
here rather than decided by `tryfirst`/`trylast` flags spread over several modules:

0. `--helmbench-select` is applied at collection, as a node id is: a case it leaves out never becomes
   an item (plugin/items.py), and pytest's summary does not count it as deselected. So is
   `--helmbench-sample` when nothing else can narrow the session (collection_sample.py): drawn from
   the benchmark's codes, it is the sample step 3 would draw from the items, which then keeps it whole;
1. before every plain hook: the numeric order (or pytest-randomly's);
2. the plain hooks run: pytest's `-k` and `-m`, and other plugins';
3. after them: `--helmbench-sample`, then `--helmbench-shard`, then the resume plan (a resumed
   session with the same arguments draws the same sample and shard, and drops only what its run
   finished), then `--helmbench-changed` (its line counts only what the others left);
4. pytest's `--lf` is an outer wrapper: it applies after all of this;
5. at collection finish (tryfirst, before the terminal's "collected" line): `--helmbench-estimate`
   prices exactly what would run, then deselects it all.

--helmbench-changed's baseline (storage/prior_runs.py) is read by the process that writes: under
xdist by the controller at session start, shared as a file so every worker deselects the same cases;
in a serial run when its cases are collected. When nothing changed the session ends with exit status
0 instead of pytest's "no tests ran" (5).
"""

from __future__ import annotations

import os
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import pytest

from ..errors import ConfigError, HelmbenchError
from ..execution.changed import Baseline, CaseContent, ModelCounts, Selection, changed_lines, select_changed
from ..execution.selection import SelectedCase, codes_by_model, run_fingerprints
from ..reporting.safe_text import for_terminal
from ..suite.prompt import compose
from ..suite.sampling import sample_codes
from ..suite.shards import parse_shard, shard_codes
from .compat import randomly_reorders
from .items import CaseItem, case_items, keep_cases, sort_cases
from .state import HelmbenchState

# --- the hooks, in the order pytest calls them ----------------------------------------------------


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """The process that writes: refuse what --helmbench-changed does not combine with (before a resume
    plan is made); under xdist, read and share the baseline before any worker collects."""
    state = HelmbenchState.get(session.config)
    if state.is_worker:
        return
    try:
        wanted = _changed_requested(state)
    except ConfigError:
        return  # said once as the first scenario file's collection error
    if wanted and session.config.pluginmanager.get_plugin("dsession") is not None:
        baseline = _changed(session.config).baseline = _read_baseline(state)
        state.shared.ensure()
        baseline.save(state.shared.changed_baseline)


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> Generator[None, Any, Any]:
    """Steps 1 and 3 of the module's order, around every plain hook (step 2)."""
    order_cases(config, items)
    result = yield
    sample_shard_and_resume(config, items)
    deselect_unchanged(config, items)
    return result


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Step 5: every selection, `--lf` included, is done by now."""
    estimate_instead(session)


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    state = HelmbenchState.get(config)
    notes = _changed(config)
    if state.is_worker or notes.baseline is None:
        return
    for line in changed_lines(notes.baseline.latest_run, _changed_counts(config, state)):
        terminalreporter.write_line(for_terminal(line))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Nothing changed: the session did what was asked (exit 0), not pytest's "no tests ran" (5)."""
    config = session.config
    state = HelmbenchState.get(config)
    if (
        state.is_worker
        or _changed(config).baseline is None
        or exitstatus != pytest.ExitCode.NO_TESTS_COLLECTED
    ):
        return
    counts = _changed_counts(config, state).values()
    if counts and not any(c.to_run for c in counts) and any(c.unchanged for c in counts):
        session.exitstatus = pytest.ExitCode.OK


# --- 1. order ----------------------------------------------------------------------------------------


def order_cases(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Numeric order (or pytest-randomly's). --helmbench-select applied at collection already: the
    cases it leaves out were never collected (items.py)."""
    sort_cases(items, keep_order=randomly_reorders(config))


# --- 3. sample, shard, resume plan -------------------------------------------------------------------


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


def apply_shard(state: HelmbenchState, config: pytest.Config, items: list[pytest.Item]) -> None:
    """--helmbench-shard K/N, after the sample: this process runs its 1/N of what is left (the split
    itself: suite/shards.py; the run the shards share: storage/fleet.py)."""
    try:
        shard = parse_shard(state.option("shard"))
    except ValueError as exc:
        raise pytest.UsageError(f"--helmbench-shard / HELMBENCH_SHARD: {exc}") from None
    cases = case_items(items)
    if state.fleet is not None:
        note_run_selection(state, cases)
    if shard is None:
        return
    # The run every shard joins selected what they select together. An xdist worker saves it for its
    # controller, which sees only the node ids left after the split.
    unsharded = state.notes.unsharded = codes_by_model((it.case.model, it.case.code) for it in cases)
    if state.is_worker:
        state.shared.save_unsharded(unsharded)
    chosen = shard_codes([(it.case.scenario.behaviour, it.case.code) for it in cases], shard)
    keep_cases(config, items, lambda it: it.case.code in chosen)


def note_run_selection(state: HelmbenchState, cases: list[CaseItem]) -> None:
    """A keyed process's whole selection (before its shard), which every process of the key must
    share (storage/fleet.py refuses one that differs); an xdist worker saves it for its controller."""
    chosen = run_fingerprints(
        SelectedCase(
            it.case.model,
            it.case.code,
            it.case.layout,
            it.repeat,
            tuple(
                part.hash if part is not None else ""
                for part in (it.case.scenario, it.case.condition, it.case.user_context, it.case.perturbation)
            ),
        )
        for it in cases
    )
    state.notes.run_selection = chosen
    if state.is_worker:
        state.shared.save_run_selection(chosen)


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


# --- 3. --helmbench-changed ------------------------------------------------------------------------------


@dataclass
class ChangedNotes:
    """This process's --helmbench-changed baseline and the counts of its decision."""

    baseline: Baseline | None = None
    counts: dict[str, ModelCounts] = field(default_factory=dict)


CHANGED_KEY = pytest.StashKey[ChangedNotes]()


def _changed(config: pytest.Config) -> ChangedNotes:
    found = config.stash.get(CHANGED_KEY, None)
    if found is None:
        found = config.stash[CHANGED_KEY] = ChangedNotes()
    return found


def _changed_requested(state: HelmbenchState) -> bool:
    """--helmbench-changed (or its ini twin, or HELMBENCH_CHANGED); a usage error with what it excludes."""
    if not state.option("changed"):
        return False
    if state.option("estimate"):
        raise pytest.UsageError(
            "HELMBench: --helmbench-changed does not combine with --helmbench-estimate (the estimate covers "
            "the selection before it); `--helmbench-changed --collect-only -q` lists the cases that would run"
        )
    if state.option("resume") or state.option("retry-errors"):
        raise pytest.UsageError(
            "HELMBench: --helmbench-changed does not combine with --helmbench-resume or "
            "--helmbench-retry-errors: a resume already runs what changed in the run it completes"
        )
    return True


def _read_baseline(state: HelmbenchState) -> Baseline:
    from ..storage.prior_runs import changed_baseline

    try:
        return changed_baseline(state.settings.db_url, list(state.settings.model_ids))
    except HelmbenchError as exc:
        raise pytest.UsageError(f"HELMBench: --helmbench-changed: {exc}") from None


def deselect_unchanged(config: pytest.Config, items: list[pytest.Item]) -> None:
    """--helmbench-changed: deselect the cases whose content and layout did not change."""
    cases = case_items(items)
    if not cases:
        return
    state = HelmbenchState.get(config)
    if not _changed_requested(state):
        return
    notes = _changed(config)
    if state.is_worker:
        if not state.shared.changed_baseline.is_file():
            raise pytest.UsageError("HELMBench: --helmbench-changed: the controller shared no baseline")
        notes.baseline = Baseline.load(state.shared.changed_baseline)
    elif notes.baseline is None:
        notes.baseline = _read_baseline(state)
    contents = (
        CaseContent(
            it.case.model,
            it.case.code,
            it.repeat,
            compose(it.case).hash,
            it.case.scenario.hash,
            it.case.layout,
        )
        for it in cases
    )
    selection = select_changed(notes.baseline, contents)
    notes.counts = selection.counts
    if state.is_worker:  # every worker decides the same: any one's counts are the session's
        path = state.shared.changed_counts
        temporary = path.with_name(f"{path.name}.{os.getpid()}")
        temporary.write_text(selection.to_json(), encoding="utf-8")
        os.replace(temporary, path)
    unchanged = {id(it) for it, keep in zip(cases, selection.keep, strict=True) if not keep}
    keep_cases(config, items, lambda it: id(it) not in unchanged)


def _changed_counts(config: pytest.Config, state: HelmbenchState) -> dict[str, ModelCounts]:
    """The decision's counts: this process's, or (under xdist) the workers'."""
    notes = _changed(config)
    if not notes.counts and state.shared.changed_counts.is_file():
        notes.counts = Selection.counts_from_json(state.shared.changed_counts.read_text(encoding="utf-8"))
    return notes.counts


# --- 5. --helmbench-estimate -------------------------------------------------------------------------------


def estimate_instead(session: pytest.Session) -> None:
    """--helmbench-estimate prices exactly what would run, then deselects it all: nothing runs."""
    if not case_items(session.items):
        return
    state = HelmbenchState.get(session.config)
    if state.option("estimate"):
        _write_estimate(state, session.config, case_items(session.items))
        keep_cases(session.config, session.items, lambda it: False)


def _write_estimate(state: HelmbenchState, config: pytest.Config, items: list[CaseItem]) -> None:
    from ..execution.estimate import EstimateSettings, write_estimate

    settings = state.settings
    write_estimate(
        config.pluginmanager.get_plugin("terminalreporter"),
        (it.case for it in items),
        EstimateSettings(
            max_tokens=settings.max_tokens,
            marking_model=settings.judge_ids,
            critical_votes=settings.critical_votes,
            user_model=settings.user_agent.id if settings.user_agent else None,
            pricing=state.clients.pricing,  # each model's provider prices it (local models: free)
            price_problems=state.clients.pricing_problems,
            evaluators=state.evaluators,
        ),
    )
