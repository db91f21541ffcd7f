"""What a session writes besides the terminal: JUnit XML metadata and pytest-html's columns, extras
and HELMBench summary.

JUnit XML (`--junitxml`): each case's metadata where its `junit_family` allows it. pytest writes a
test's user properties as a testcase-level `<properties>` element, which the xunit1 (legacy) family
allows but xunit2, pytest's default, does not: Jenkins' junit-10.xsd, the schema CI servers read, has
no properties in a testcase. So under xunit1 a case carries `helmbench_*` properties, and under
xunit2 the same `name=value` lines go into the testcase's `<system-out>`, written by the controller
(where pytest's XML writer lives, also under xdist) just before pytest closes the testcase.

pytest-html: registered only when that plugin is active (pytest rejects hooks it does not know, and
`-p no:html` must work).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import pytest

from ..execution.outcome import Outcome
from ..reporting.html_extras import HTML_COLUMNS, html_cells
from ..reporting.html_summary import session_summary_html
from .state import HelmbenchState

PROPERTY_FAMILIES = ("xunit1", "legacy")  # the families whose testcases may hold <properties>
REPORT_ATTRIBUTE = "helmbench_junit"  # on a case's teardown report under xunit2: [[name, value], ...]


def writes_properties(config: pytest.Config) -> bool:
    """True unless this session writes JUnit XML in a family whose testcases may not hold properties.

    Asked in every process: xdist's workers run without the XML writer, but with the controller's
    options and ini, and their user properties reach the controller's XML."""
    if not getattr(config.option, "xmlpath", None):
        return True
    try:
        return config.getini("junit_family") in PROPERTY_FAMILIES
    except ValueError:  # the junitxml plugin is not loaded (-p no:junitxml)
        return True


def system_out(pairs: Iterable[tuple[str, str]]) -> str:
    """One `name=value` line per property (a value's line breaks become spaces)."""
    return "\n".join(f"{name}={' '.join(str(value).splitlines())}" for name, value in pairs)


def private_files(config: pytest.Config, mask: int | None) -> None:
    """Files this process creates from now on (the database and its lock, JUnit XML, pytest-html,
    `--out` files, the local server's log) get `mask` as their umask; the process's own is restored
    when pytest is done, after the reports were written. None keeps the process's umask."""
    if mask is None or UMASK_KEY in config.stash:
        return
    config.stash[UMASK_KEY] = previous = os.umask(mask)
    config.add_cleanup(lambda: os.umask(previous))


UMASK_KEY = pytest.StashKey[int]()


class JunitHooks:
    """Controller (or a serial run): under xunit2, a case's metadata into its testcase's <system-out>."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(tryfirst=True)  # before pytest's writer closes the testcase on the teardown report
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        pairs = getattr(report, REPORT_ATTRIBUTE, None)
        if not pairs or report.when != "teardown":
            return
        reporter = _open_testcase(self.config, report)
        if reporter is None:
            return
        import xml.etree.ElementTree as ET

        from _pytest.junitxml import bin_xml_escape

        node = ET.Element("system-out")
        node.text = bin_xml_escape(system_out((str(name), str(value)) for name, value in pairs))
        reporter.append(node)


def _open_testcase(config: pytest.Config, report: pytest.TestReport) -> Any:
    """pytest's writer's element for this case, opened by its setup or call report (None: no XML is
    written, or no testcase is open for it)."""
    try:
        from _pytest.junitxml import xml_key
    except ImportError:  # pragma: no cover - a pytest without its junitxml module
        return None
    xml = config.stash.get(xml_key, None)
    if xml is None:
        return None
    key = (getattr(report, "id", report.nodeid), getattr(report, "node", None))
    return xml.node_reporters.get(key)


class PytestHtmlHooks:
    """pytest-html's hooks, registered by the plugin only when pytest-html is active: pytest rejects
    a hook it does not know, so `pytest -p no:html` would fail if they were plain module hooks."""

    def pytest_html_results_table_header(self, cells: list[str]) -> None:
        cells[2:2] = [f"<th>{name}</th>" for name in HTML_COLUMNS]

    def pytest_html_results_table_row(self, report: Any, cells: list[str]) -> None:
        payload = getattr(report, "helmbench", None)
        cells[2:2] = html_cells(Outcome.from_dict(payload) if payload else None)


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
        notes = state.notes
        prefix.append(
            session_summary_html(state.tallies, notes.selections, notes.unpriced, state.dry_run_skips)
        )
