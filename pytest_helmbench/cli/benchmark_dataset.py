"""`helmbench export-benchmark --format hf OUT`: the benchmark as a Hugging Face dataset folder.

Reads the benchmark as `helmbench list` does (the same root, loader and cases) and hands the scenarios
to reporting/benchmark_dataset.py. Nothing is written unless every scenario loads and the folder is
new, empty or given with --force; every refusal is one `error:` line naming the file and the fix.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import typer

from ..reporting.safe_text import for_terminal
from .benchmark import RootOption, benchmark_root, load_all
from .results import fail


class DatasetFormat(StrEnum):
    """`export-benchmark --format`: a click choice (a bad value is a usage error listing these)."""

    hf = "hf"


def one_line(problem: str) -> str:
    """A load error (`file:line: message`, then `  fix: …` on its own line) as one line."""
    return problem.replace("\n  fix: ", "; fix: ").replace("\n", " ")


def export_benchmark(
    out: Path = typer.Argument(..., help="folder to write: new or empty (see --force)"),
    fmt: DatasetFormat = typer.Option(
        ..., "--format", case_sensitive=False, help="hf: parquet rows and a dataset card (needs pyarrow)"
    ),
    root: Path | None = RootOption,
    force: bool = typer.Option(
        False, "--force", help="write into a folder that is not empty (its README.md and data file replaced)"
    ),
) -> None:
    """Write every case of the benchmark as a dataset: one parquet row per case and a dataset card."""
    from ..errors import HelmbenchError
    from ..evaluation.builtin import builtin_registry
    from ..reporting.benchmark_dataset import (
        DatasetTargetError,
        check_target,
        helmbench_licence,
        require_pyarrow,
        write_dataset,
    )
    from ..reporting.frames import MissingExtra
    from ..suite.loader import BenchmarkLoader

    try:
        require_pyarrow()
        check_target(out, force)
    except MissingExtra as exc:
        fail(f"--format {fmt.value}: {exc}")
    except DatasetTargetError as exc:
        fail(str(exc))
    folder = benchmark_root(root)
    scenarios, problems = load_all(folder)
    for problem in problems:
        typer.echo(for_terminal(f"error: {one_line(problem)}"), err=True)
    if problems:
        fail(f"nothing written: {len(problems)} scenario(s) failed to load (fix them, then export again)")
    try:
        info = BenchmarkLoader(folder, evaluation_types=builtin_registry()).info()
        written = write_dataset(scenarios, info, out, helmbench_licence(), force)
    except HelmbenchError as exc:
        fail(one_line(str(exc)))
    except OSError as exc:
        fail(f"cannot write {exc.filename or out}: {exc.strerror or exc} (choose a folder you can write to)")
    typer.echo(
        f"wrote {written.rows} case(s) from {written.scenarios} scenario(s) of {folder} to "
        f"{written.data} and the dataset card {written.card}"
    )


def register(app: typer.Typer) -> None:
    app.command("export-benchmark")(export_benchmark)
