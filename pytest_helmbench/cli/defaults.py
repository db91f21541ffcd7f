"""The `helmbench` command's defaults, found the way pytest finds them, so that `helmbench list` and
`pytest` agree from any folder of a project.

pytest's rootdir and ini file: from the current folder upwards, the first folder holding one of
pytest.toml, .pytest.toml, pytest.ini, .pytest.ini (always a config file, even empty), pyproject.toml
with [tool.pytest] or [tool.pytest.ini_options], tox.ini with [pytest], or setup.cfg with
[tool:pytest], in that order within a folder; failing those, the nearest pyproject.toml. Its folder
is the rootdir. The plugin resolves from there (state.base_dir): without any config file, from the
current folder. This module reads those files itself (iniconfig, tomllib) rather than through
pytest's private `_pytest.config.findpaths`, which changes between releases, or a full pytest
Config, which would load every plugin and conftest.py for a listing; tests/test_cli.py checks that
it agrees with pytest.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import iniconfig

if TYPE_CHECKING:
    from ..benchmark_root import BenchmarkRoot


class ConfigFileError(Exception):
    """A config file pytest would also refuse to read (the message names it)."""


def _ini_section(path: Path, section: str) -> dict[str, str] | None:
    try:
        parsed = iniconfig.IniConfig(str(path))
    except iniconfig.ParseError as exc:
        raise ConfigFileError(str(exc)) from None
    return dict(parsed[section].items()) if section in parsed else None


def _toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigFileError(f"{path}: {exc}") from None


def _pytest_ini(path: Path) -> dict[str, Any]:
    return _ini_section(path, "pytest") or {}


def _pytest_toml(path: Path) -> dict[str, Any]:
    table = _toml(path).get("pytest")
    return dict(table) if isinstance(table, dict) else {}


def _pyproject(path: Path) -> dict[str, Any] | None:
    tool = _toml(path).get("tool")
    pytest_table = tool.get("pytest") if isinstance(tool, dict) else None
    if not isinstance(pytest_table, dict):
        return None
    native = {k: v for k, v in pytest_table.items() if k != "ini_options"}
    if native:
        return native
    ini_options = pytest_table.get("ini_options")
    return dict(ini_options) if isinstance(ini_options, dict) else None


# pytest's own order within one folder (CONFIG_LOADERS_BY_NAME in _pytest/config/findpaths.py).
_LOADERS: tuple[tuple[str, Callable[[Path], dict[str, Any] | None]], ...] = (
    ("pytest.toml", _pytest_toml),
    (".pytest.toml", _pytest_toml),
    ("pytest.ini", _pytest_ini),
    (".pytest.ini", _pytest_ini),
    ("pyproject.toml", _pyproject),
    ("tox.ini", lambda path: _ini_section(path, "pytest")),
    ("setup.cfg", lambda path: _ini_section(path, "tool:pytest")),
)


@dataclass(frozen=True)
class ProjectDefaults:
    """Where the plugin would look, seen from one folder: its base folder, ini file and values."""

    base_dir: Path
    inipath: Path | None = None
    ini: dict[str, Any] = field(default_factory=dict)

    @property
    def benchmark(self) -> BenchmarkRoot:
        """The plugin's rule (benchmark_root.py): ini helmbench_root, else the project's `benchmark/`,
        else the installed benchmark (a `helmbench` command always asks for HELMBench explicitly)."""
        from ..benchmark_root import resolve_root  # imports pytest: only when a benchmark is looked up

        return resolve_root(self.base_dir, str(self.ini.get("helmbench_root") or ""), explicit=True)

    @property
    def root(self) -> Path:
        return self.benchmark.path

    @property
    def db_url(self) -> str:
        """$HELMBENCH_DB, else ini helmbench_db, else helmbench.db in the base folder (the plugin's order)."""
        env = os.environ.get("HELMBENCH_DB", "").strip()
        if env:
            return env
        ini = str(self.ini.get("helmbench_db") or "").strip()
        return ini or f"sqlite:///{self.base_dir / 'helmbench.db'}"


def find_project(start: Path | None = None) -> ProjectDefaults:
    """pytest's config file search from `start` (default: the current folder) upwards."""
    here = (start or Path.cwd()).absolute()
    first_pyproject: Path | None = None
    for folder in (here, *here.parents):
        for name, load in _LOADERS:
            path = folder / name
            if not path.is_file():
                continue
            if name == "pyproject.toml" and first_pyproject is None:
                first_pyproject = path
            values = load(path)
            if values is not None:
                return ProjectDefaults(folder, path, values)
    if first_pyproject is not None:
        return ProjectDefaults(first_pyproject.parent, first_pyproject)
    return ProjectDefaults(here)
