"""Hooks that exist only when pytest-xdist is installed: hand the session's data to the workers.

Registered by plugin.pytest_configure when the xdist plugin is present (its hookspecs, such as
`pytest_configure_node`, are unknown otherwise).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from .errors import ConfigError
from .state import HelmbenchState

CONCURRENCY_AND_WORKERS = (
    "--helmbench-concurrency and -n are alternatives: many calls in flight in one process, or one call "
    "at a time in each of N processes. Use one of them (--helmbench-concurrency is faster for model calls)."
)


class XdistHooks:
    """Registered only when pytest-xdist is present: share session data with workers."""

    def __init__(
        self, state: HelmbenchState, prepare_run: Callable[[HelmbenchState, set[str]], None]
    ) -> None:
        self.state = state
        self.prepare_run = prepare_run  # the plugin's: open storage, start what the providers need
        self._checked = False
        self._prepared = False

    def pytest_configure_node(self, node: Any) -> None:
        state = self.state
        if not self._checked:
            self._checked = True
            concurrency = state.config.getoption("helmbench_concurrency")
            if concurrency and int(concurrency) > 1:
                raise pytest.UsageError(CONCURRENCY_AND_WORKERS)
            try:
                estimate = state.option("estimate")
            except ConfigError as exc:  # e.g. HELMBENCH_ESTIMATE=maybe
                raise pytest.UsageError(f"HELMBench: {exc}") from None
            if estimate:
                raise pytest.UsageError("--helmbench-estimate runs without -n")
        node.workerinput.update(state.workerinput())

    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        """Before any case is scheduled: open the database and start local models, once."""
        state = self.state
        if (
            self._prepared
            or state.config.getoption("collectonly")
            or not any(_is_case_id(state, i) for i in ids)
        ):
            return
        self._prepared = True
        self.prepare_run(state, set(state.settings.model_ids))
        state.share_provider_data()


def _is_case_id(state: HelmbenchState, nodeid: str) -> bool:
    path = nodeid.split("::", 1)[0]
    return "::" in nodeid and state.is_scenario_file((state.config.rootpath / path).resolve())
