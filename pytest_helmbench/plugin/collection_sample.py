"""--helmbench-sample drawn while the cases are collected (step 0 of select.py's order).

When nothing but --helmbench-select can narrow the session, the sample step 3 would draw from the
items is drawn from the benchmark's codes instead, before any item is built; step 3 then keeps it
whole. Asked once per process by the state (plugin/state.py), for ScenarioFile.collect.
"""

from __future__ import annotations

from collections.abc import Callable
from fnmatch import fnmatch
from pathlib import Path

import pytest

from ..benchmark_root import arg_paths
from ..config import Settings
from ..errors import HelmbenchError
from ..suite.cases import Case, expand
from ..suite.loader import BenchmarkLoader
from ..suite.model import Scenario
from ..suite.sampling import sample_codes

#: Plugins whose `pytest_collection_modifyitems` or `pytest_ignore_collect` drop items only through the
#: options `_only_select_narrows` checks, or never: pytest's own (-k and -m, --deselect and --ignore,
#: --lf which applies after the sample anyway, fixture order), pytest-randomly's and Hypothesis's.
_NARROWING_KNOWN = frozenset(
    {"mark", "main", "funcmanage", "lfplugin", "nfplugin", "randomly", "hypothesispytest"}
)


def sample_at_collection(
    config: pytest.Config,
    settings: Settings,
    loader: BenchmarkLoader,
    scenario: Callable[[Path], Scenario],
    selected: Callable[[Case], bool],
    may_select: Callable[[Scenario], bool],
) -> frozenset[str] | None:
    """--helmbench-sample's codes, drawn before any item is built when nothing but --helmbench-select
    narrows the session; None otherwise (the sample is then drawn from the items, step 3).

    The draw is of codes, from (behaviour, code) pairs: the benchmark's codes that the select keeps
    are exactly those step 3 would see, and step 3 then keeps all of them. What it saves is building
    every model's, layout's and repeat's item of every case only to deselect it (nine models over the
    shipped benchmark: 500,000 items, some twenty seconds). pytest's summary then counts the cases the
    sample left out as it counts --helmbench-select's: not at all."""
    if not settings.sample:
        return None
    folders = loader.scenario_dirs()
    if not _only_select_narrows(config, loader.root, folders):
        return None
    entries: list[tuple[str, str]] = []
    for folder in folders:
        try:
            loaded = scenario(folder)
        except HelmbenchError:
            return None  # its file's collection error says why; the sample is drawn from the items
        if not may_select(loaded):
            continue
        cases = expand(loaded, settings.model_ids[:1], settings.layouts[:1], keep=selected)
        entries += [(loaded.behaviour, case.code) for case in cases]
    return frozenset(sample_codes(entries, settings.sample, settings.sample_seed))


def _only_select_narrows(config: pytest.Config, root: Path, folders: list[Path]) -> bool:
    """Every argument a path holding the whole benchmark; no -k, -m, --deselect, --ignore or
    --pyargs; no folder of the benchmark's scenarios in `norecursedirs`; and no plugin or conftest
    that could drop items at collection (a hook of an unknown plugin, a `collect_ignore`)."""
    if config.option.keyword or config.option.markexpr:
        return False
    if any(config.getoption(name, None) for name in ("deselect", "ignore", "ignore_glob", "pyargs")):
        return False
    if any("::" in str(arg) for arg in config.args):
        return False
    if not any(root.is_relative_to(path) for path in arg_paths(config, given_only=False)):
        return False
    patterns = config.getini("norecursedirs")
    names = ["scenarios", *(folder.name for folder in folders)]
    if any(fnmatch(name, pattern) for name in names for pattern in patterns):
        return False
    plugins = config.pluginmanager
    for hook in (config.hook.pytest_collection_modifyitems, config.hook.pytest_ignore_collect):
        for impl in hook.get_hookimpls():
            name = plugins.get_name(impl.plugin) or ""
            known = name in _NARROWING_KNOWN or name.startswith("helmbench")
            if not known and type(impl.plugin).__name__ != "WorkerInteractor":  # xdist's: node ids only
                return False
    return not any(
        getattr(plugin, "collect_ignore", None) or getattr(plugin, "collect_ignore_glob", None)
        for plugin in plugins.get_plugins()
    )
