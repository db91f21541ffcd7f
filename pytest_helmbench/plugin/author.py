"""Hooks for a benchmark author's loop, kept out of plugin.py (which registers this module):
--helmbench-changed (run only what changed since the last completed runs) and the terminal lines
of the local model's slow first steps (weights download, server start).

--helmbench-changed, in every process: the baseline (storage/prior_runs.py) is read by the process
that writes — under xdist by the controller at session start, shared as a file so every worker
deselects the same cases; in a serial run when its cases are collected. The decision
(execution/changed.py) runs after every other selection (-k, -m, --helmbench-select, resume,
sample), so its line counts only what they left. The controller prints that line and, when nothing
changed, ends with exit status 0 instead of pytest's "no tests ran" (5).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import pytest

from ..errors import ConfigError, HelmbenchError
from ..execution.changed import Baseline, CaseContent, ModelCounts, Selection, changed_lines, select_changed
from ..providers.progress import TerminalProgress, attach, detach
from ..suite.prompt import compose
from .items import case_items, keep_cases
from .state import HelmbenchState


@dataclass
class AuthorNotes:
    """This process's --helmbench-changed baseline and counts, and its progress handler."""

    baseline: Baseline | None = None
    counts: dict[str, ModelCounts] = field(default_factory=dict)
    progress: TerminalProgress | None = None


NOTES_KEY = pytest.StashKey[AuthorNotes]()


def _notes(config: pytest.Config) -> AuthorNotes:
    found = config.stash.get(NOTES_KEY, None)
    if found is None:
        found = config.stash[NOTES_KEY] = AuthorNotes()
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


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """The process that writes: refuse what --helmbench-changed does not combine with (before a resume
    plan is made); under xdist, read and share the baseline before any worker collects, and show the
    progress lines of the providers the controller prepares once workers collected."""
    config = session.config
    state = HelmbenchState.get(config)
    if state.is_worker:
        return
    xdist = config.pluginmanager.get_plugin("dsession") is not None
    if xdist:
        _show_progress(config)
    try:
        wanted = _changed_requested(state)
    except ConfigError:
        return  # said once as the first scenario file's collection error
    if wanted and xdist:  # a serial run reads it once its cases are collected
        baseline = _notes(config).baseline = _read_baseline(state)
        state.shared.ensure()
        baseline.save(state.shared.changed_baseline)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """A serial run with HELMBench cases: its providers are prepared next (plugin.py), so from here the
    terminal shows their progress lines (not in a session without cases: a test calling a provider)."""
    state = HelmbenchState.get(session.config)
    if not state.is_worker and case_items(session.items):
        _show_progress(session.config)


def _show_progress(config: pytest.Config) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or _notes(config).progress is not None:
        return
    redraw = (lambda line: reporter.rewrite(line, erase=True)) if reporter.isatty() else None
    handler = _notes(config).progress = TerminalProgress(reporter.write_line, redraw)
    attach(handler)


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> Any:
    """After every other selection (a wrapper: every plain hook, `-k` and the sample included, has
    run; `--lf`'s outer wrapper applies after this): deselect the cases that did not change."""
    result = yield
    _deselect_unchanged(config, items)
    return result


def _deselect_unchanged(config: pytest.Config, items: list[pytest.Item]) -> None:
    cases = case_items(items)
    if not cases:
        return
    state = HelmbenchState.get(config)
    if not _changed_requested(state):
        return
    notes = _notes(config)
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


def _counts(config: pytest.Config, state: HelmbenchState) -> dict[str, ModelCounts]:
    """The decision's counts: this process's, or (under xdist) the workers'."""
    notes = _notes(config)
    if not notes.counts and state.shared.changed_counts.is_file():
        notes.counts = Selection.counts_from_json(state.shared.changed_counts.read_text(encoding="utf-8"))
    return notes.counts


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    state = HelmbenchState.get(config)
    notes = _notes(config)
    if state.is_worker or notes.baseline is None:
        return
    for line in changed_lines(notes.baseline.latest_run, _counts(config, state)):
        terminalreporter.write_line(line)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Nothing changed: the session did what was asked (exit 0), not pytest's "no tests ran" (5)."""
    config = session.config
    state = HelmbenchState.get(config)
    if state.is_worker or _notes(config).baseline is None or exitstatus != pytest.ExitCode.NO_TESTS_COLLECTED:
        return
    counts = _counts(config, state).values()
    if counts and not any(c.to_run for c in counts) and any(c.unchanged for c in counts):
        session.exitstatus = pytest.ExitCode.OK


def pytest_unconfigure(config: pytest.Config) -> None:
    handler = _notes(config).progress
    if handler is not None:
        detach(handler)
