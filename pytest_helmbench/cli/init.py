"""`helmbench init [DIR]`: copy the installed benchmark out for editing.

Someone who installed the package from an index has the benchmark only inside site-packages; this
gives them a copy of their own (default `benchmark/`, where the plugin looks). It never writes into
a folder that already holds something, so an edited benchmark is never overwritten.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import typer

from .defaults import ConfigFileError, find_project
from .results import fail


class InitError(Exception):
    """Nothing was copied; the message says why and what to do instead."""


@dataclass(frozen=True)
class Copied:
    """What `init` wrote."""

    source: Path
    target: Path
    files: int
    scenarios: int


def copy_benchmark(target: Path, source: Path | None = None) -> Copied:
    """Copy the installed benchmark (or `source`) to `target`, which must not exist or be empty."""
    from .. import benchmark_root  # imports pytest: only when the command runs

    source = source or benchmark_root.installed_benchmark()
    if source is None:
        raise InitError("this installation has no benchmark to copy (reinstall pytest-helmbench)")
    inside = target.resolve()
    if inside.is_relative_to(source.resolve()):  # copytree would copy the copy into itself, forever
        raise InitError(
            f"{target} lies inside the benchmark it would copy ({source}): nothing was copied; give a "
            "folder outside it"
        )
    if target.exists() and not target.is_dir():
        raise InitError(f"{target} exists and is not a folder: nothing was copied; give another DIR")
    if target.is_dir() and any(target.iterdir()):
        raise InitError(
            f"{target} already exists and is not empty: nothing was copied (an edited benchmark is never "
            "overwritten); give another DIR, or move that folder away first"
        )
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(source, target, symlinks=True, ignore=ignore, dirs_exist_ok=True)
    files = sum(1 for path in target.rglob("*") if path.is_file())
    scenarios = sum(1 for path in (target / "scenarios").glob("*/S*.md"))
    return Copied(source, target, files, scenarios)


def next_steps(copied: Copied, cwd: Path) -> list[str]:
    """How to run the copy: from the project root, and where the plugin must be told about it."""
    try:
        project = find_project(cwd)
        expected = project.root.resolve()
    except ConfigFileError:
        project, expected = None, None
    shown = _shown(copied.target, cwd)
    lines = [
        f"run it:  pytest {shown} --helmbench-dry-run       # composes and checks every case, sends nothing",
        f"         pytest {shown} --helmbench-model=openai/gpt-4o-mini   # with OPENROUTER_API_KEY set",
        "         helmbench list --scenarios                   # what is in it",
    ]
    if project is not None and expected != copied.target.resolve():
        where = project.inipath or project.base_dir / "pytest.ini"
        relative = _shown(copied.target.resolve(), project.base_dir)
        lines.append(
            f"the plugin looks for {expected}: set `helmbench_root = {relative}` in {where} "
            "([pytest], or [tool.pytest.ini_options] in pyproject.toml) so it collects this copy"
        )
    return lines


def _shown(path: Path, base: Path) -> str:
    try:
        return str(path.resolve().relative_to(base.resolve()))
    except ValueError:
        return str(path)


def init(
    directory: Path = typer.Argument(
        Path("benchmark"), help="where to copy the benchmark (default: benchmark)"
    ),
) -> None:
    """Copy the installed benchmark into DIR (default benchmark/) for editing; never overwrites."""
    try:
        copied = copy_benchmark(directory)
    except (InitError, OSError) as exc:
        fail(str(exc))
        raise AssertionError from None
    typer.echo(
        f"copied the installed HELMBench benchmark ({copied.scenarios} scenarios, {copied.files} files) "
        f"from {copied.source} to {copied.target.resolve()}"
    )
    for line in next_steps(copied, Path.cwd()):
        typer.echo(line)


def register(app: typer.Typer) -> None:
    app.command("init")(init)
