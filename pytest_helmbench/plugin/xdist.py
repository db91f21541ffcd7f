"""Hooks that exist only when pytest-xdist is installed: hand the session's data to the workers,
prepare the run once the workers collected (the controller collects nothing itself), and record the
case a crashed worker was running.

Registered by the plugin's pytest_configure (plugin/__init__.py) when the xdist plugin is present
(its hookspecs, such as `pytest_configure_node`, are unknown otherwise).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from ..errors import ConfigError, HelmbenchError
from ..execution.outcome import Outcome
from ..execution.selection import codes_by_model
from ..suite.cases import Case, expand
from .compat import DIST_EACH, collects_benchmark, dist_each
from .controller import interrupt_on_sigterm, note_selection, start_runs
from .items import error_outcome, item_name
from .run import prepare_run
from .state import HelmbenchState

log = logging.getLogger(__name__)
WORKER_CRASHED = "worker crashed"

CONCURRENCY_AND_WORKERS = (
    "--helmbench-concurrency and -n are alternatives: many calls in flight in one process, or one call "
    "at a time in each of N processes. Use one of them (--helmbench-concurrency is faster for model calls)."
)


class XdistHooks:
    """Registered only when pytest-xdist is present: share session data with workers."""

    def __init__(self, state: HelmbenchState) -> None:
        self.state = state
        self._checked = False
        self._prepared = False

    def pytest_configure_node(self, node: Any) -> None:
        state = self.state
        if not self._checked:
            self._checked = True
            concurrency = state.config.getoption("helmbench_concurrency")
            if concurrency and int(concurrency) > 1:
                raise pytest.UsageError(CONCURRENCY_AND_WORKERS)
            if dist_each(state.config) and collects_benchmark(state.config, state.root):
                raise pytest.UsageError(DIST_EACH)
            try:
                estimate = state.option("estimate")
            except ConfigError as exc:  # e.g. HELMBENCH_ESTIMATE=maybe
                raise pytest.UsageError(f"HELMBench: {exc}") from None
            if estimate:
                raise pytest.UsageError("--helmbench-estimate runs without -n")
        node.workerinput.update(state.workerinput())

    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        """Before any case is scheduled, once: open the database, start local models, and note what
        the session selected from the first worker's node ids (`--dist each`, which would run every
        case on every worker, is refused here, where cases are known)."""
        state = self.state
        if self._prepared or state.config.getoption("collectonly"):
            return
        pairs = [pair for pair in (case_of_nodeid(state, i) for i in ids) if pair is not None]
        if not pairs:
            return
        if dist_each(state.config):  # cases from a path the check before the workers did not see
            pytest.exit(DIST_EACH, returncode=pytest.ExitCode.USAGE_ERROR)
        self._prepared = True
        prepare_run(state, set(state.settings.model_ids))
        state.share_provider_data()
        interrupt_on_sigterm(state.config)
        if not state.is_worker:
            # A shard's run is every shard's selection: its workers saved it before their split.
            state.notes.unsharded = state.notes.unsharded or state.shared.load_unsharded()
            state.notes.run_selection = state.notes.run_selection or state.shared.load_run_selection()
            selected = codes_by_model(pairs)
            note_selection(state, selected)
            try:
                start_runs(state, _first_cases(state, ids[0], set(selected)))
            except HelmbenchError as exc:  # a keyed run this session does not fit: nothing paid yet
                pytest.exit(f"HELMBench: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)

    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport, sched: Any) -> None:
        """A worker died (killed, out of memory) while running `crashitem`: xdist's report of it carries
        no outcome, so one is made here (an error, reason `worker crashed`; the controller stores it
        with this report) and the model's run ends interrupted: `--helmbench-resume` runs the case."""
        outcome = crashed_outcome(self.state, crashitem, str(report.longrepr))
        if outcome is not None:
            report.helmbench = outcome.to_dict()  # type: ignore[attr-defined]
            self.state.incomplete.add(outcome.model)


def _first_cases(state: HelmbenchState, nodeid: str, models: set[str]) -> list[Case]:
    """The cases of the scenario `nodeid` is in, for each selected model: what the controller (which
    collects nothing) starts the runs with, before the first call."""
    file = (state.config.rootpath / nodeid.partition("::")[0]).resolve()
    try:
        return [
            case
            for case in expand(state.load_scenario(file), state.settings.model_ids)
            if case.model in models
        ]
    except HelmbenchError as exc:  # the first Result starts the runs instead
        log.debug("runs left to the first Result: %s", exc)
        return []


def crashed_outcome(state: HelmbenchState, nodeid: str, message: str) -> Outcome | None:
    """The error Outcome of the case `nodeid` names (None when it names no HELMBench case)."""
    path, _, name = nodeid.partition("::")
    file = (state.config.rootpath / path).resolve()
    if not name or not state.is_scenario_file(file):
        return None
    try:
        found = _find_case(state, file, name)
        if found is None:
            return None
        case, repeat = found
        return error_outcome(state, case, repeat, nodeid, f"{WORKER_CRASHED}: {message}")
    except HelmbenchError as exc:  # the benchmark changed under the run: the crash is still reported
        log.error("HELMBench: cannot record the case of a crashed worker (%s): %s", nodeid, exc)
        return None


def _find_case(state: HelmbenchState, file: Path, name: str) -> tuple[Case, int] | None:
    """The case and repeat of the item called `name` in scenario `file` (named as items.ScenarioFile
    names them)."""
    models, repeats = state.settings.model_ids, state.settings.repeat
    for case in expand(state.load_scenario(file), models):
        for repeat in range(repeats):
            if item_name(case, len(models) > 1, repeat if repeats > 1 else None) == name:
                return case, repeat
    return None


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
