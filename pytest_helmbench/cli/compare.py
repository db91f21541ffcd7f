"""`helmbench compare BASE NEW` and `helmbench baseline save`: did a change make a model less safe?

BASE and NEW are each a run id of the results database or a baseline file (`helmbench baseline save
--run-id N FILE`, JSON a repository can commit). The comparison (reporting/compare.py) is printed as
text or JSON; it exits 13 when it regressed (a critical case newly fails, or the harm rate rose
beyond its interval), 0 otherwise, as `pytest --helmbench-fail-on-regression` does.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path

import typer

from ..errors import HelmbenchError
from ..reporting.safe_text import for_terminal
from .results import DbOption, db_session, fail

EXIT_REGRESSED = 13


class CompareFormat(StrEnum):
    text = "text"
    json = "json"


def _verdicts(source: str, db: str | None) -> dict:
    """A run id's per-model verdicts from the database, or a baseline file's."""
    from ..reporting.compare import load_baseline, verdicts_of

    if not source.isdigit():
        return load_baseline(Path(source))
    from ..storage.queries import load_case_results

    with db_session(db) as session:
        found = verdicts_of(load_case_results(session, [int(source)]))
    if not found:
        raise HelmbenchError(f"no run {source} with results in the database (see `helmbench costs`)")
    return found


def compare(
    base: str = typer.Argument(..., help="the baseline: a run id or a baseline file"),
    new: str = typer.Argument(..., help="the new run: a run id or a baseline file"),
    fmt: CompareFormat = typer.Option(CompareFormat.text, "--format", case_sensitive=False),
    db: str | None = DbOption,
) -> None:
    """Compare each model's new run with its baseline over the cases both scored; exit 13 if it regressed."""
    from ..reporting.compare import compare as compare_runs
    from ..reporting.compare import comparison_json, comparison_lines

    try:
        before, after = _verdicts(base, db), _verdicts(new, db)
    except HelmbenchError as exc:
        fail(str(exc))
    models = sorted(set(before) & set(after))
    if not models:
        fail(
            f"no model is in both ({', '.join(sorted(before))} against {', '.join(sorted(after))}): "
            "compare runs of the same model"
        )
    found = [compare_runs(before[m], after[m]) for m in models]
    if fmt is CompareFormat.json:
        typer.echo(json.dumps({"comparisons": [comparison_json(c) for c in found]}, indent=1))
    else:
        for comparison in found:
            for line in comparison_lines(comparison):
                typer.echo(for_terminal(line))
    if any(c.regressed for c in found):
        raise typer.Exit(EXIT_REGRESSED)


def baseline_save(
    out: Path = typer.Argument(..., help="the baseline file to write (JSON)"),
    run_id: list[int] = typer.Option(..., "--run-id", help="the run(s) whose verdicts become the baseline"),
    db: str | None = DbOption,
) -> None:
    """Write the per-case verdicts of the given run(s) as a baseline file a repository can commit."""
    from ..reporting.compare import save_baseline, verdicts_of
    from ..storage.queries import load_case_results

    with db_session(db) as session:
        found = verdicts_of(load_case_results(session, run_id))
    if not found:
        fail(f"no results for run(s) {', '.join(map(str, run_id))} (see `helmbench costs`)")
    try:
        save_baseline(out, found)
    except OSError as exc:
        fail(f"{out}: cannot be written ({exc.strerror or exc})")
    cases = sum(len(v.cases) for v in found.values())
    typer.echo(f"wrote the baseline of {', '.join(sorted(found))} ({cases} scored case(s)) to {out}")


def register(app: typer.Typer) -> None:
    app.command()(compare)
    baseline_app = typer.Typer(
        help="Baselines for `helmbench compare` and --helmbench-baseline.", no_args_is_help=True
    )
    baseline_app.command("save")(baseline_save)
    app.add_typer(baseline_app, name="baseline")
