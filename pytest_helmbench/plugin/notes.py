"""What the session says about itself besides pass and fail: is each model's run a subset of the
benchmark, which calls had no price, and the HELMBench summary in pytest-html's summary section.

Registered by plugin.pytest_configure on the process that writes (the controller, or a serial run);
the xdist and pytest-html parts only when those plugins are active (pytest rejects hooks it does not
know). Nothing here imports SQLAlchemy: the figures go to the recorder as plain data.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import pytest

from ..errors import HelmbenchError
from ..execution.outcome import Outcome
from ..execution.selection import RunSelection, codes_by_model, selections
from ..execution.unpriced import Unpriced, unpriced_of
from ..reporting.html_extras import PytestHtmlHooks
from ..reporting.html_summary import session_summary_html
from ..suite.loader import BenchmarkLoader
from .items import case_items
from .state import HelmbenchState

log = logging.getLogger(__name__)


@dataclass
class SessionNotes:
    """Per model: what the session selected, and its calls without a price (controller only)."""

    selections: dict[str, RunSelection] = field(default_factory=dict)
    unpriced: dict[str, Unpriced] = field(default_factory=dict)
    # --helmbench-shard: what every shard selected together (the keyed run's selection), per model.
    unsharded: dict[str, set[str]] = field(default_factory=dict)


NOTES_KEY = pytest.StashKey[SessionNotes]()


def session_notes(config: pytest.Config) -> SessionNotes:
    """This session's notes (empty in a session that selected no HELMBench case)."""
    found = config.stash.get(NOTES_KEY, None)
    if found is None:
        found = config.stash[NOTES_KEY] = SessionNotes()
    return found


def benchmark_cases(loader: BenchmarkLoader) -> tuple[int, bool]:
    """The case codes the benchmark holds per model, and whether every scenario loaded."""
    total, complete = 0, True
    for folder in loader.scenario_dirs():
        try:
            scenario = loader.load_scenario(folder)
        except HelmbenchError:
            complete = False
            continue
        total += len(scenario.conditions) * (1 + len(scenario.user_contexts)) * len(scenario.perturbations)
    return total, complete


class SelectionHooks:
    """The selection of a serial run (under xdist, XdistSelectionHooks), and unpriced calls."""

    def __init__(self, state: HelmbenchState) -> None:
        self.state = state

    def note(self, selected: dict[str, set[str]]) -> None:
        """Count the benchmark, keep the figures and hand them to the recorder for its new runs."""
        state = self.state
        try:
            if state.all_dry_run():  # nothing is recorded: no run to describe
                return
            total, complete = benchmark_cases(state.loader)
        except (HelmbenchError, OSError) as exc:  # said at collection already
            log.debug("benchmark size unknown: %s", exc)
            total, complete = None, False
        notes = session_notes(state.config)
        # A resumed run (adopted before collection) keeps the selection it started with: what this
        # session selected is only what was left to do.
        adopted = set(state.recorder.runs) if state.recorder is not None else set()
        selected = notes.unsharded or selected  # a shard's run is the whole run of every shard
        fresh = {model: codes for model, codes in selected.items() if model not in adopted}
        notes.selections = selections(fresh, total, every_scenario_loaded=complete)
        if state.recorder is not None:
            state.recorder.selection = dict(notes.selections)

    @pytest.hookimpl(trylast=True)  # after the plugin opened the database
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        items = case_items(session.items)
        if items and not session.config.getoption("collectonly"):
            self.note(codes_by_model((it.case.model, it.case.code) for it in items))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        payload = getattr(report, "helmbench", None)
        if payload:
            outcome = Outcome.from_dict(payload)
            notes = session_notes(self.state.config)
            before = notes.unpriced.get(outcome.model, Unpriced())
            notes.unpriced[outcome.model] = before + unpriced_of(outcome)


class XdistSelectionHooks:
    """Under xdist the controller collects nothing: the selection comes from a worker's node ids."""

    def __init__(self, selection: SelectionHooks) -> None:
        self.selection = selection
        self._noted = False

    @pytest.hookimpl(trylast=True)  # after XdistHooks opened the database
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        state = self.selection.state
        if self._noted or state.config.getoption("collectonly"):
            return
        pairs = [pair for pair in (case_of_nodeid(state, i) for i in ids) if pair is not None]
        if pairs:
            self._noted = True
            notes = session_notes(state.config)
            # A shard's run is every shard's selection: its workers saved it before their split.
            notes.unsharded = notes.unsharded or state.shared.load_unsharded()
            self.selection.note(codes_by_model(pairs))


def case_of_nodeid(state: HelmbenchState, nodeid: str) -> tuple[str, str] | None:
    """(model, case code) of a case's node id: `…/S1.md::CODE`, `CODE[model]`, `CODE[r0]`,
    `CODE[model,r0]` (items.item_name); None for anything else."""
    path, sep, name = nodeid.rpartition("::")
    if not sep or not state.is_scenario_file((state.config.rootpath / path).resolve()):
        return None
    code, _, inside = name.partition("[")
    models = state.settings.model_ids
    if len(models) == 1:
        return models[0], code
    model = inside.removesuffix("]")
    if state.settings.repeat > 1:
        model = model.rpartition(",")[0]
    return model, code


class HtmlSummaryHooks(PytestHtmlHooks):
    """pytest-html's columns and extras, plus the HELMBench summary in its summary section."""

    def __init__(self, state: HelmbenchState) -> None:
        self.state = state

    def pytest_html_results_summary(
        self, prefix: list[str], summary: list[str], postfix: list[str], session: pytest.Session
    ) -> None:
        """pytest-html calls this on the controller only (workers write no report), at the session's
        end: every case has been counted by then."""
        state = self.state
        if state.is_worker or not (state.tallies or state.dry_run_skips):
            return
        notes = session_notes(state.config)
        prefix.append(
            session_summary_html(state.tallies, notes.selections, notes.unpriced, state.dry_run_skips)
        )


def register_report_hooks(config: pytest.Config, state: HelmbenchState) -> None:
    """Register these hooks where they apply (called by plugin.pytest_configure)."""
    manager = config.pluginmanager
    if not state.is_worker:
        selection = SelectionHooks(state)
        manager.register(selection, "helmbench-selection")
        if manager.hasplugin("xdist"):
            manager.register(XdistSelectionHooks(selection), "helmbench-xdist-selection")
    if manager.hasplugin("html"):  # its hooks exist only then: `-p no:html` must work
        manager.register(HtmlSummaryHooks(state), "helmbench-html")
