"""Which benchmark a session runs: the project's own, or the one installed with the package.

One rule, used by the plugin (state.py, and the hooks below) and the `helmbench` command
(cli_defaults.py): ini `helmbench_root` always wins; else the project's `benchmark/` folder when it
exists; else, when HELMBench is asked for explicitly (a `--helmbench-*` option on the command line, a
path inside the installed benchmark, or any `helmbench` command), the benchmark shipped in the wheel.
A bare `pytest` in a project without a benchmark stays inert (the plugin loads in every session).

The installed copy is package data (pyproject maps the top-level `benchmark/` in, as it does
`migrations/`); in a source checkout (an editable install) it is that top-level folder itself. It is
read through the same confined reader as any benchmark (suite/files.py): it is not trusted more.
"""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

DEFAULT_ROOT = "benchmark"
OPTION_PREFIX = "--helmbench-"


@dataclass(frozen=True)
class BenchmarkRoot:
    """The benchmark a session or command uses, and whether it is the copy installed with the package."""

    path: Path
    installed: bool = False

    def describe(self) -> str:
        if self.installed:
            return f"the installed benchmark ({self.path}; `helmbench init` copies it out for editing)"
        return f"the project's benchmark ({self.path})"


def installed_benchmark() -> Path | None:
    """The benchmark shipped with the package: its package data in a wheel install, the checkout's
    top-level benchmark/ in a source (editable) install; None when neither is on disk."""
    package = importlib.resources.files(__package__ or "pytest_helmbench")
    if not isinstance(package, Path):  # e.g. a zip import: no folder pytest could collect
        return None
    checkout = package.parent / DEFAULT_ROOT if (package.parent / "pyproject.toml").is_file() else None
    for candidate in (package / DEFAULT_ROOT, checkout):
        if candidate is not None and (candidate / "scenarios").is_dir():
            return candidate.resolve()
    return None


def resolve_root(base_dir: Path, ini_root: str | None, *, explicit: bool) -> BenchmarkRoot:
    """The rule: ini helmbench_root, else `<base_dir>/benchmark` if it exists, else the installed
    benchmark when HELMBench was asked for explicitly, else the (missing) project folder: inert."""
    if ini_root and ini_root.strip():
        return BenchmarkRoot((base_dir / ini_root.strip()).resolve())
    project = (base_dir / DEFAULT_ROOT).resolve()
    shipped = installed_benchmark() if explicit and not project.exists() else None
    if shipped is None:
        return BenchmarkRoot(project)
    return BenchmarkRoot(shipped, installed=True)


# --- the plugin's side ------------------------------------------------------------------------------

BENCHMARK_KEY = pytest.StashKey[BenchmarkRoot]()


def _arg_paths(config: pytest.Config, *, given_only: bool = True) -> list[Path]:
    """The paths pytest collects (node ids cut at `::`), absolute; by default only those given on the
    command line (not testpaths, not the current folder)."""
    if given_only and config.args_source != pytest.Config.ArgsSource.ARGS:
        return []
    here = config.invocation_params.dir
    return [(here / arg.split("::")[0]).resolve() for arg in config.args]


def asked_for(config: pytest.Config) -> bool:
    """HELMBench was asked for on the command line: a --helmbench-* option (never one from addopts or
    PYTEST_ADDOPTS, which a project sets once for every session) or a path inside the installed
    benchmark (what `helmbench run-all` passes)."""
    if any(str(arg).startswith(OPTION_PREFIX) for arg in config.invocation_params.args):
        return True
    shipped = installed_benchmark()
    return shipped is not None and any(p.is_relative_to(shipped) for p in _arg_paths(config))


def session_benchmark(config: pytest.Config, base_dir: Path) -> BenchmarkRoot:
    """The session's benchmark, resolved once (ini `helmbench_root` is "" when unset)."""
    found = config.stash.get(BENCHMARK_KEY, None)
    if found is None:
        ini = str(config.getini("helmbench_root") or "")
        found = config.stash[BENCHMARK_KEY] = resolve_root(base_dir, ini, explicit=asked_for(config))
    return found


def _covers(config: pytest.Config, root: Path) -> bool:
    """A path pytest will collect holds the benchmark, or lies inside it."""
    return any(root.is_relative_to(p) or p.is_relative_to(root) for p in _arg_paths(config, given_only=False))


class BenchmarkHooks:
    """Collects the installed benchmark when it is the session's, and says which benchmark ran."""

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
        line = nothing_ran_line(
            config, self.benchmark(config), bool(terminalreporter.stats.get("deselected"))
        )
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
        f"HELMBench: {root / 'scenarios'} holds no scenario (P<n>-B<n>-S<n>/S<n>.md, see the README's "
        "'The benchmark files'): `helmbench init DIR` copies the installed benchmark for a start"
    )
