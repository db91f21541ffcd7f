"""Collection: which benchmark the session collects, one File per scenario, and why nothing ran.

pytest walks the benchmark's `scenarios/` folder; each `S<n>.md` becomes a ScenarioFile (items.py)
whose items are its cases. A folder link that leads out of the benchmark is an error, never walked.
After each scenario file, what collection built is frozen out of the garbage collector's view
(gc_tuning.py). The rule for which benchmark a session runs is benchmark_root.py's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ..benchmark_root import BenchmarkRoot, arg_paths, asked_for, session_benchmark
from ..errors import ConfigError, HelmbenchError
from ..reporting.safe_text import for_terminal
from ..suite.files import leads_outside
from . import gc_tuning
from .items import CaseItem, OutsideLink, ScenarioFile
from .options import check_options, parse_umask
from .outputs import private_files
from .state import HelmbenchState


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Before anything else (and, under xdist, before any worker starts): a bad option value, from
    the command line, the environment or the ini file, is a usage error (exit 4) said once, when this
    session asks for HELMBench or collects its benchmark. A problem in a benchmark file stays a
    collection error of the files it affects."""
    config = session.config
    state = HelmbenchState.get(config)
    state.session = session
    if (
        state.is_worker
        or not _has_scenarios(state.root)
        or not (asked_for(config) or _covers(config, state.root))
    ):
        return
    try:
        check_usage(state)
        private_files(config, parse_umask(state.option("umask")))
    except ConfigError as exc:
        raise pytest.UsageError(for_terminal(f"HELMBench: {exc}")) from None


def _has_scenarios(root: Path) -> bool:
    """A scenario folder exists (else there is nothing to check, and nothing_ran_line says why)."""
    scenarios = root / "scenarios"
    return scenarios.is_dir() and any(entry.is_dir() for entry in scenarios.iterdir())


def check_usage(state: HelmbenchState) -> None:
    """Read every option and build the settings once (a bad value raises ConfigError); any other
    problem (a benchmark file, a conflicting evaluator) is left to collection, which names the file."""
    check_options(state.config)
    if state.option("mlflow"):
        from ..reporting.mlflow_log import missing_mlflow

        missing = missing_mlflow()  # said before anything is sent, not when the results are in
        if missing:
            raise ConfigError(missing)
    try:
        _ = state.settings, state.loader
        if state.settings.prices_file is not None:
            from ..providers.prices import read_price_file

            read_price_file(state.settings.prices_file)
        state.baseline()  # a baseline file that cannot be read: a usage error before anything is sent
    except ConfigError:
        raise
    except HelmbenchError:  # a benchmark file, or two evaluators under one name: said at collection
        pass


def pytest_collect_directory(path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """A folder link under the benchmark root that leads out of it: an error, never walked."""
    if leads_outside(HelmbenchState.get(parent.config).root, path):
        return OutsideLink.from_parent(parent, path=path)
    return None


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if HelmbenchState.get(parent.config).is_scenario_file(file_path):
        return ScenarioFile.from_parent(parent, path=file_path)
    return None


def pytest_collectreport(report: pytest.CollectReport) -> None:
    """After each scenario file: freeze what collection built so far (see gc_tuning)."""
    if report.result and isinstance(report.result[0], CaseItem):
        gc_tuning.freeze_collected(report.result[0].config)


def _covers(config: pytest.Config, root: Path) -> bool:
    """A path pytest will collect holds the benchmark, or lies inside it."""
    return any(root.is_relative_to(p) or p.is_relative_to(root) for p in arg_paths(config, given_only=False))


class BenchmarkHooks:
    """Collects the installed benchmark when it is the session's, and says which benchmark ran
    (registered under its own name: `pytest_configure` here runs for this session only)."""

    def __init__(self, base_dir: Path) -> None:
        self.base_dir = base_dir

    def benchmark(self, config: pytest.Config) -> BenchmarkRoot:
        return session_benchmark(config, self.base_dir)

    def pytest_configure(self, config: pytest.Config) -> None:
        """Without paths on the command line pytest would walk the current folder (or testpaths):
        the installed benchmark lives in site-packages, so it becomes what is collected."""
        benchmark = self.benchmark(config)
        if benchmark.installed and config.args_source != pytest.Config.ArgsSource.ARGS:
            config.args = [str(benchmark.path)]

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        benchmark = self.benchmark(config)
        covered = benchmark.path.is_dir() and _covers(config, benchmark.path)
        if not (benchmark.installed or asked_for(config) or covered):
            return []
        return [f"helmbench: {benchmark.describe()}"]

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        """Never a bare "no tests ran": one line saying why no HELMBench case ran and what to do."""
        if exitstatus != pytest.ExitCode.NO_TESTS_COLLECTED or config.getoption("helmbench_estimate", None):
            return
        # --helmbench-select leaves cases out at collection (plugin/items.py): pytest never counts them
        # as deselected, yet that is why nothing ran when the benchmark has scenarios.
        benchmark = self.benchmark(config)
        deselected = bool(terminalreporter.stats.get("deselected")) or (
            _has_scenarios(benchmark.path) and bool(HelmbenchState.get(config).option("select"))
        )
        line = nothing_ran_line(config, benchmark, deselected)
        if line:
            terminalreporter.write_line(line, yellow=True)


def nothing_ran_line(config: pytest.Config, benchmark: BenchmarkRoot, deselected: bool) -> str | None:
    """Why a session that asked for HELMBench (or ran bare in an unconfigured folder) ran no case."""
    bare = config.args_source == pytest.Config.ArgsSource.INVOCATION_DIR
    if not (asked_for(config) or bare or _covers(config, benchmark.path)):
        return None  # another project's session that found no tests: none of HELMBench's business
    root = benchmark.path
    if deselected:
        return (
            f"HELMBench: every collected case of {root} was deselected (-k, -m, --helmbench-select, --lf, "
            "--helmbench-resume or --helmbench-changed): `helmbench list PREFIX` shows which codes exist"
        )
    if not (root / "scenarios").is_dir():
        if not asked_for(config) and not benchmark.installed:
            return (
                f"HELMBench: no benchmark here ({root} does not exist): `pytest --helmbench-dry-run` checks "
                "the installed one, `helmbench init` copies it here for editing"
            )
        return (
            f"HELMBench: no benchmark at {root} (no scenarios/ folder): `helmbench init` copies the "
            "installed one there, or point ini helmbench_root at yours"
        )
    if not _covers(config, root):
        return f"HELMBench: the paths given hold no scenario of {root}: give that folder, or no path"
    return (
        f"HELMBench: {root / 'scenarios'} holds no scenario (P<n>-B<n>-S<n>/S<n>.md, see "
        "docs/reference/benchmark-files.md): `helmbench init DIR` copies the installed benchmark for a start"
    )
