"""The `helmbench` command: thin layers over the same code and defaults as the pytest plugin.

This module holds the app, its `--version` and `main` (__main__.py: `python -m
pytest_helmbench.cli`); one module per group of commands adds them: benchmark.py the benchmark
commands (list, show, run-single, run-batch, run-all, estimate, coverage); benchmark_dataset.py
`helmbench export-benchmark` (the benchmark as a Hugging Face dataset); results.py the commands
on the results database (costs, report, items, export, cache, db); calibrate.py `helmbench
calibrate` and `rescore`; compare.py `helmbench compare` and `baseline save`; init.py `helmbench
init`; local.py `helmbench local-server`; review.py `helmbench serve` and `helmbench review` (the
workbench); defaults.py the defaults found the way pytest finds them. May import every stage and
the plugin's option table; nothing imports it."""

from __future__ import annotations

import os

import typer

from ..errors import ConfigError
from ..plugin.options import parse_umask
from . import benchmark as cli_benchmark
from . import benchmark_dataset as cli_benchmark_dataset
from . import calibrate as cli_calibrate
from . import compare as cli_compare
from . import init as cli_init
from . import local as cli_local
from . import results as cli_results
from . import review as cli_review

app = typer.Typer(
    help="HELMBench: mental-health safety evaluation of LLMs (a pytest plugin).",
    no_args_is_help=True,
)


def package_version() -> str:
    """The installed distribution's version (what pip and the wheel say), else the source tree's."""
    from importlib.metadata import PackageNotFoundError, version  # only for --version: a faster start

    try:
        return version("pytest-helmbench")
    except PackageNotFoundError:  # run from a source tree that is not installed
        from .. import __version__

        return __version__


def show_version(value: bool) -> None:
    if value:
        typer.echo(f"helmbench {package_version()}")
        raise typer.Exit()


@app.callback()
def main_options(
    _version: bool = typer.Option(
        False,
        "--version",
        callback=show_version,
        is_eager=True,
        help="Print `helmbench <version>` and exit.",
    ),
) -> None:
    """HELMBench: mental-health safety evaluation of LLMs (a pytest plugin)."""


cli_benchmark.register(app)
cli_benchmark_dataset.register(app)
cli_results.register(app)
cli_calibrate.register(app)
cli_compare.register(app)
cli_init.register(app)
cli_local.register(app)
cli_review.register(app)


def main() -> None:
    """The console script: files the command writes (a database, `--out` reports and exports) are
    readable by the user only, as a run's are, unless HELMBENCH_UMASK says otherwise."""
    try:
        mask = parse_umask(os.environ.get("HELMBENCH_UMASK", "077"), "HELMBENCH_UMASK")
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from None
    if mask is not None:
        os.umask(mask)
    app()
