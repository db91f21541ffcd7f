"""Which benchmark a session runs: the project's own, or the one installed with the package.

One rule, used by the plugin (plugin/state.py, plugin/collect.py) and the `helmbench` command
(cli/defaults.py): ini `helmbench_root` always wins; else the project's `benchmark/` folder when it
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


def arg_paths(config: pytest.Config, *, given_only: bool = True) -> list[Path]:
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
    return shipped is not None and any(p.is_relative_to(shipped) for p in arg_paths(config))


def session_benchmark(config: pytest.Config, base_dir: Path) -> BenchmarkRoot:
    """The session's benchmark, resolved once (ini `helmbench_root` is "" when unset): a benchmark tree
    given on the command line (given_tree), else the rule of resolve_root."""
    found = config.stash.get(BENCHMARK_KEY, None)
    if found is None:
        ini = str(config.getini("helmbench_root") or "")
        tree = given_tree(config, (base_dir / ini.strip()).resolve() if ini.strip() else None)
        if tree is not None:
            found = BenchmarkRoot(tree, installed=tree == installed_benchmark())
        else:
            found = resolve_root(base_dir, ini, explicit=asked_for(config))
        config.stash[BENCHMARK_KEY] = found
    return found


def tree_of(path: Path) -> Path | None:
    """The benchmark tree a command-line path names: a folder holding `scenarios/`, or the folder
    above the `scenarios/` a path lies in; None for any other path (a test file, a project folder)."""
    if path.is_dir() and (path / "scenarios").is_dir():
        return path
    for folder in path.parents:
        if folder.name == "scenarios" and folder.is_dir():
            return folder.parent
    return None


def given_tree(config: pytest.Config, ini_root: Path | None) -> Path | None:
    """The one benchmark tree the command line's paths name (None: they name none). Two trees are a
    usage error (a session runs one benchmark), and so is a tree other than ini `helmbench_root`'s,
    with the option that runs it."""
    trees = sorted({tree for path in arg_paths(config) if (tree := tree_of(path)) is not None})
    if len(trees) > 1:
        raise pytest.UsageError(
            f"HELMBench: the paths name {len(trees)} benchmark trees ({', '.join(map(str, trees))}); "
            "a session runs one benchmark: run each in its own session"
        )
    if not trees:
        return None
    if ini_root is not None and trees[0] != ini_root:
        raise pytest.UsageError(
            f"HELMBench: {trees[0]} is another benchmark tree than ini helmbench_root ({ini_root}): "
            f"run it with `-o helmbench_root={trees[0]}`, or give paths inside {ini_root}"
        )
    return trees[0]
