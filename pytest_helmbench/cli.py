"""The `helmbench` command: thin layers over the same code and defaults as the pytest plugin."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import typer
from sqlmodel import Session, select

from .errors import HelmbenchError
from .storage.recorder import StorageError, make_engine, safe_url, upgrade
from .storage.tables import LLM, EvaluationRun
from .suite.cases import Case, expand, parse_selectors
from .suite.loader import BenchmarkLoader, Scenario
from .suite.prompt import compose

if TYPE_CHECKING:
    import sqlalchemy.engine

app = typer.Typer(
    help="HELMBench: mental-health safety evaluation of LLMs (a pytest plugin).",
    no_args_is_help=True,
    add_completion=False,
)
db_app = typer.Typer(help="Database maintenance.", no_args_is_help=True)
app.add_typer(db_app, name="db")

RootOption = typer.Option(Path("benchmark"), "--root", help="benchmark root folder")
PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}


def default_db() -> str:
    """Same default as the plugin: $HELMBENCH_DB, else helmbench.db in the current folder (the rootdir)."""
    return os.environ.get("HELMBENCH_DB") or f"sqlite:///{Path.cwd() / 'helmbench.db'}"


def fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


def load_all(root: Path) -> tuple[list[Scenario], list[str]]:
    """Every scenario that loads, plus one message per scenario that does not."""
    if not (root / "scenarios").is_dir():
        fail(f"{root}: no scenarios/ folder here (use --root)")
    loader = BenchmarkLoader(root)
    scenarios, problems = [], []
    for folder in loader.scenario_dirs():
        try:
            scenarios.append(loader.load_scenario(folder))
        except HelmbenchError as exc:
            problems.append(str(exc))
    return scenarios, problems


@app.command("list")
def list_cases(
    prefix: str | None = typer.Argument(
        None, help="segment-aware code filter, e.g. P1-B1 or P1-B1-S1-C2 (never S10 for S1)"
    ),
    root: Path = RootOption,
    scenarios_only: bool = typer.Option(
        False, "--scenarios", help="one line per scenario with its case count"
    ),
) -> None:
    """List the cases (one code per line), optionally filtered by code prefix."""
    scenarios, problems = load_all(root)
    try:
        selectors = parse_selectors([prefix]) if prefix else []
    except ValueError as exc:
        fail(str(exc))
    total = 0
    for scenario in scenarios:
        cases = [
            c
            for c in expand(scenario, [""])
            if not selectors or any(s.matches(c.segments) for s in selectors)
        ]
        total += len(cases)
        if scenarios_only and cases:
            typer.echo(f"{scenario.code}\t{len(cases)} cases\t{scenario.evaluation.type}\t{scenario.title}")
        elif not scenarios_only:
            for case in cases:
                typer.echo(case.code)
    typer.echo(
        f"{total} cases in {len(scenarios)} scenarios"
        + (f"; {len(problems)} scenario(s) failed to load" if problems else ""),
        err=True,
    )
    for problem in problems:
        typer.echo(f"error: {problem}", err=True)
    if problems:
        raise typer.Exit(1)


def find_case(root: Path, code: str) -> Case:
    """Locate one case by its full code (P1-B1-S1-C1[-U1]-PT1)."""
    parts = code.strip().split("-")
    if len(parts) not in (5, 6):
        fail(f"{code!r} is not a full case code like P1-B1-S1-C1-PT1 or P1-B1-S1-C1-U1-PT1")
    loader = BenchmarkLoader(root)
    folder = root / "scenarios" / "-".join(parts[:3])
    if not folder.is_dir():
        fail(f"no scenario folder {folder}")
    try:
        scenario = loader.load_scenario(folder)
    except HelmbenchError as exc:
        fail(str(exc))
    for case in expand(scenario, [""]):
        if case.code == code.strip():
            return case
    fail(f"{code} is not a case of {scenario.code} (see: helmbench list {scenario.code})")
    raise AssertionError


@app.command()
def show(
    code: str = typer.Argument(..., help="full case code, e.g. P1-B1-S1-C1-PT1"), root: Path = RootOption
) -> None:
    """Print the exact composed prompt and response_format of one case."""
    prompt = compose(find_case(root, code))
    typer.echo(f"=== prompt ({len(prompt.text)} characters, sha256 {prompt.hash[:12]}) ===")
    typer.echo(prompt.text)
    typer.echo("=== response_format ===")
    typer.echo(json.dumps(prompt.response_format, indent=2, ensure_ascii=False))


def run_pytest(args: list[str], extra: list[str]) -> None:
    """Invoke pytest in-process with the plugin's options; exit with pytest's status."""
    typer.echo("pytest " + " ".join(args + extra), err=True)
    raise typer.Exit(int(pytest.main(args + extra)))


def model_args(models: str | None) -> list[str]:
    return [f"--helmbench-model={models}"] if models else []


@app.command("run-single", context_settings=PASS_THROUGH)
def run_single(
    ctx: typer.Context,
    case: str | None = typer.Option(
        None, "--case", help="full case code (default: the benchmark's first case)"
    ),
    models: str | None = typer.Option(
        None, "--models", help="comma-separated model ids (default: models.yml)"
    ),
    root: Path = RootOption,
) -> None:
    """Run one case against each model (a quick demonstration); extra arguments go to pytest."""
    if case is None:
        scenarios, _ = load_all(root)
        if not scenarios:
            fail("no scenario loads; run `helmbench list` to see why")
        case = expand(scenarios[0], [""])[0].code
    found = find_case(root, case)
    run_pytest(
        [
            str(found.scenario.path),
            f"--helmbench-select={found.code}" + ("" if found.user_context else "-U0"),
            *model_args(models),
        ],
        ctx.args,
    )


@app.command("run-batch", context_settings=PASS_THROUGH)
def run_batch(
    ctx: typer.Context,
    scenario: str | None = typer.Option(
        None, "--scenario", help="scenario code(s), comma-separated, e.g. P1-B1-S1"
    ),
    all_scenarios: bool = typer.Option(False, "--all-scenarios", help="run every scenario"),
    models: str | None = typer.Option(
        None, "--models", help="comma-separated model ids (default: models.yml)"
    ),
    root: Path = RootOption,
) -> None:
    """Run every case of some scenarios (or all); extra arguments go to pytest (e.g. -n 4)."""
    if bool(scenario) == all_scenarios:
        fail("give exactly one of --scenario CODE or --all-scenarios")
    selection = [f"--helmbench-select={scenario}"] if scenario else []
    run_pytest([str(root), *selection, *model_args(models)], ctx.args)


@app.command("run-all", context_settings=PASS_THROUGH)
def run_all(
    ctx: typer.Context,
    models: str | None = typer.Option(
        None, "--models", help="comma-separated model ids (default: models.yml)"
    ),
    root: Path = RootOption,
) -> None:
    """List the scenarios, then run the whole benchmark; extra arguments go to pytest."""
    scenarios, problems = load_all(root)
    typer.echo(
        f"{len(scenarios)} scenarios load"
        + (f", {len(problems)} do not (pytest will report them)" if problems else "")
    )
    run_pytest([str(root), *model_args(models)], ctx.args)


@app.command(context_settings=PASS_THROUGH)
def estimate(
    ctx: typer.Context,
    models: str | None = typer.Option(
        None, "--models", help="comma-separated model ids (default: models.yml)"
    ),
    root: Path = RootOption,
) -> None:
    """Print expected tokens and USD for the selected cases (pytest selection arguments pass through); nothing is sent."""
    run_pytest([str(root), "--helmbench-estimate", "-q", *model_args(models)], ctx.args)


@app.command()
def costs(
    run_id: int | None = typer.Option(None, "--run-id", help="only this run"),
    model: str | None = typer.Option(None, "--model", help="only this model"),
    db: str = typer.Option(None, "--db", help="SQLAlchemy URL (default: $HELMBENCH_DB or ./helmbench.db)"),
) -> None:
    """Print tokens and USD per run (model calls and judge calls apart) and the total."""
    url = db or default_db()
    try:
        upgrade(url)
        engine = make_engine(url)
    except StorageError as exc:
        fail(str(exc))
    with Session(engine) as session:
        query = select(EvaluationRun, LLM).where(EvaluationRun.llm_id == LLM.id).order_by(EvaluationRun.id)
        if run_id is not None:
            query = query.where(EvaluationRun.id == run_id)
        if model:
            query = query.where(LLM.model_id == model)
        found = session.exec(query).all()
    if not found:
        typer.echo(f"no runs in {safe_url(url)}" + (" matching the filter" if run_id or model else ""))
        return
    header = f"{'run':>5}  {'model':<32} {'status':<11} {'pass':>5} {'fail':>5} {'err':>5} {'prompt tok':>11} {'compl tok':>10} {'model $':>10} {'judge $':>9} {'total $':>10}"
    typer.echo(header)
    grand = 0.0
    for run, llm in found:
        total = run.cost_usd + run.judge_cost_usd
        grand += total
        typer.echo(
            f"{run.id:>5}  {llm.model_id[:32]:<32} {run.status:<11} {run.passed_tests:>5} {run.failed_tests:>5} {run.error_tests:>5} "
            f"{run.prompt_tokens:>11} {run.completion_tokens:>10} {run.cost_usd:>10.4f} {run.judge_cost_usd:>9.4f} {total:>10.4f}"
        )
    typer.echo(f"total: ${grand:.4f} over {len(found)} run(s)")


@db_app.command("upgrade")
def db_upgrade(
    db: str = typer.Option(None, "--db", help="SQLAlchemy URL (default: $HELMBENCH_DB or ./helmbench.db)"),
) -> None:
    """Apply every pending Alembic migration."""
    url = db or default_db()
    try:
        upgrade(url)
    except StorageError as exc:
        fail(str(exc))
    typer.echo(f"database {safe_url(url)} is at the latest schema")


# --- reports and exports (issue 6) ------------------------------------------------------------

RunIdOption = typer.Option(None, "--run-id", help="a run id; repeat for several")
DbOption = typer.Option(None, "--db", help="SQLAlchemy URL (default: $HELMBENCH_DB or ./helmbench.db)")


def open_existing_db(db: str | None) -> sqlalchemy.engine.Engine:
    """An engine on an existing, migrated database; never creates an empty SQLite file by accident."""
    from sqlalchemy.engine import make_url

    url = db or default_db()
    try:
        parsed = make_url(url)
    except Exception:
        fail(f"--db: {url!r} is not a valid SQLAlchemy URL")
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        if not Path(parsed.database).expanduser().is_file():
            fail(
                f"no database at {parsed.database} (run the benchmark first, or pass --db / set HELMBENCH_DB)"
            )
    try:
        upgrade(url)
        return make_engine(url)
    except StorageError as exc:
        fail(str(exc))
    except ImportError as exc:  # e.g. a postgresql:// URL without its driver installed
        fail(
            f"cannot open {safe_url(url)}: its database driver is not installed ({exc.name or exc}); pip install it"
        )


@app.command()
def report(
    run_id: list[int] | None = RunIdOption,
    out: Path = typer.Option(Path("report.html"), "--out", help="HTML file to write"),
    db: str | None = DbOption,
) -> None:
    """Write one self-contained HTML page comparing models and runs (default: the latest run of each model)."""
    from .reporting.html_report import render_report, summaries, summary_line
    from .storage.queries import DatasetError, load_report_data

    engine = open_existing_db(db)
    try:
        with Session(engine) as session:
            data = load_report_data(session, run_id or None, source=safe_url(db or default_db()))
    except DatasetError as exc:
        fail(str(exc))
    finally:
        engine.dispose()
    page = render_report(data)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(page, encoding="utf-8")
    except OSError as exc:
        fail(f"cannot write {out}: {exc.strerror or exc}")
    typer.echo(
        f"wrote {out} ({len(data.runs)} run(s), {len(data.results)} results, {len(data.failures)} failures and errors)"
    )
    for summary in summaries(data):
        typer.echo(summary_line(summary))


@app.command("export")
def export_results(
    fmt: str = typer.Option(..., "--format", help="csv, json (one list) or jsonl (one object per line)"),
    out: str = typer.Option("-", "--out", help="file to write, or - for standard output"),
    run_id: list[int] | None = RunIdOption,
    db: str | None = DbOption,
) -> None:
    """Write one row per stored Result (default: every run) for pandas and other tools."""
    import sys

    from .reporting.export import FORMATS, export
    from .storage.queries import DatasetError, resolve_run_ids

    if fmt not in FORMATS:
        fail(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    engine = open_existing_db(db)
    try:
        with Session(engine) as session:
            ids = resolve_run_ids(session, run_id or None, all_runs=True)  # before any file is created
            if out == "-":
                count = export(session, fmt, sys.stdout, ids)  # type: ignore[arg-type]
                sys.stdout.flush()
            else:
                with open(out, "w", encoding="utf-8", newline="") as handle:
                    count = export(session, fmt, handle, ids)  # type: ignore[arg-type]
    except DatasetError as exc:
        fail(str(exc))
    except BrokenPipeError:  # `helmbench export ... | head`: the reader left; stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise typer.Exit(1)
    except OSError as exc:
        fail(f"cannot write {out}: {exc.strerror or exc}")
    finally:
        engine.dispose()
    typer.echo(
        f"exported {count} result row(s) as {fmt} to {'standard output' if out == '-' else out}", err=True
    )


def main() -> None:
    app()


if __name__ == "__main__":
    main()
