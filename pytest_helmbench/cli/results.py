"""The `helmbench` commands on the results database: costs, report, export, cache prune, db upgrade, stamp.

All but `db upgrade` open an existing database only (a missing SQLite file is a one-line error, never a
new file), so a typo in --db or a command run in the wrong folder leaves no empty database behind."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ..config import parse_ttl
from ..errors import HelmbenchError
from ..reporting.safe_text import for_terminal
from .defaults import ConfigFileError, find_project

if TYPE_CHECKING:
    import sqlalchemy.engine
    from sqlmodel import Session

    from ..execution.outcome import CaseResult
    from ..reporting.compare import Comparison
    from ..reporting.items import ItemStats
    from ..storage.queries import ReportData, StoredReply
    from ..storage.tables import LLM, EvaluationRun

RunIdOption = typer.Option(None, "--run-id", help="a run id; repeat for several")
DbOption = typer.Option(
    None,
    "--db",
    help="SQLAlchemy URL (default: the plugin's: $HELMBENCH_DB, ini helmbench_db, rootdir/helmbench.db)",
)


class ExportFormat(StrEnum):
    """`helmbench export --format`: a click choice, so a bad value is a usage error listing these.

    The same names as reporting.export.FORMATS (a test checks), kept here so that the command line
    (and shell completion, which runs it on every TAB) loads no database library."""

    csv = "csv"
    json = "json"
    jsonl = "jsonl"
    parquet = "parquet"
    inspect = "inspect"


def default_db() -> str:
    """The plugin's default from here: $HELMBENCH_DB, else ini helmbench_db, else helmbench.db in the
    rootdir pytest finds (cli/defaults.py), so `helmbench costs` reads what `pytest` wrote."""
    try:
        return find_project().db_url
    except ConfigFileError as exc:
        fail(str(exc))
        raise AssertionError from None


def fail(message: str) -> None:
    typer.echo(for_terminal(f"error: {message}"), err=True)
    raise typer.Exit(1)


def db_upgrade(db: str | None = DbOption) -> None:
    """Create the database, or apply its pending Alembic migrations (the only command that creates one)."""
    from ..storage.engine import StorageError, safe_url, upgrade

    url = db or default_db()
    try:
        upgrade(url)
    except StorageError as exc:
        fail(str(exc))
    typer.echo(f"database {safe_url(url)} is at the latest schema")


def db_stamp(db: str | None = DbOption) -> None:
    """Record the newest schema revision in a database whose tables have none (after checking them)."""
    from ..storage.engine import StorageError, stamp

    try:
        typer.echo(stamp(db or default_db()))
    except StorageError as exc:
        fail(str(exc))


def open_existing_db(db: str | None) -> sqlalchemy.engine.Engine:
    """An engine on an existing, migrated database; never creates an empty SQLite file by accident."""
    from sqlalchemy.engine import make_url

    from ..storage.engine import StorageError, open_existing, safe_url

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
        return open_existing(url)  # never creates one; migrates one that is behind
    except StorageError as exc:
        fail(str(exc))
    except ImportError as exc:  # e.g. a postgresql:// URL without its driver installed
        fail(
            f"cannot open {safe_url(url)}: its database driver is not installed "
            f"({exc.name or exc}); pip install it"
        )


@contextmanager
def open_db(
    db: str | None, errors: tuple[type[Exception], ...] = (), os_error: str | None = None
) -> Iterator[sqlalchemy.engine.Engine]:
    """An existing database's engine for one command, disposed of however the command ends.

    One of `errors` raised inside is the command's one-line error (exit 1); so is an OSError when
    `os_error` says what was being done (`error: <os_error>: <reason>`). Anything else propagates."""
    engine = open_existing_db(db)
    try:
        yield engine
    except errors as exc:
        fail(str(exc))
    except OSError as exc:
        if os_error is None:
            raise
        fail(f"{os_error}: {exc.strerror or exc}")
    finally:
        engine.dispose()


@contextmanager
def db_session(
    db: str | None, errors: tuple[type[Exception], ...] = (), os_error: str | None = None
) -> Iterator[Session]:
    """A session on an existing database for one command: open_db's errors, closed and disposed of."""
    from sqlmodel import Session

    with open_db(db, errors, os_error) as engine, Session(engine) as session:
        yield session


COST_COLUMNS = (  # (heading, width) after the run id and the model, whose width is its longest id
    ("status", -11),
    ("pass", 5),
    ("fail", 5),
    ("err", 5),
    ("prompt tok", 11),
    ("compl tok", 10),
    ("model $", 10),
    ("judge $", 9),
    ("total $", 10),
)


def costs_lines(found: list[tuple[EvaluationRun, LLM]], unpriced: dict | None = None) -> list[str]:
    """The costs table, header first: the model column is as wide as the longest model id (never cut).
    A cost nobody reported is `unknown`, a sum with such calls `≥` (reporting/cost_text.py)."""
    from ..execution.unpriced import Unpriced
    from ..reporting.cost_text import usd_cell

    unpriced = unpriced or {}
    width = max([len("model"), *(len(llm.model_id) for _, llm in found)])
    header = [f"{'run':>5}", f"{'model':<{width}}"]
    header += [f"{name:<{-size}}" if size < 0 else f"{name:>{size}}" for name, size in COST_COLUMNS]
    lines = ["  ".join(header[:2]) + " " + " ".join(header[2:])]
    for run, llm in found:
        total = run.cost_usd + run.judge_cost_usd
        counts = f"{run.passed_tests:>5} {run.failed_tests:>5} {run.error_tests:>5}"
        tokens = f"{run.prompt_tokens:>11} {run.completion_tokens:>10}"
        calls = unpriced.get(run.id, Unpriced())
        model_usd = usd_cell(run.cost_usd, calls.model_calls)
        judge_usd = usd_cell(run.judge_cost_usd, calls.judge_calls)
        usd = f"{model_usd:>10} {judge_usd:>9} {usd_cell(total, calls.total):>10}"
        lines.append(f"{run.id:>5}  {llm.model_id:<{width}} {run.status:<11} {counts} {tokens} {usd}")
    return lines


def cost_rows(session: Session, run_id: int | None, model: str | None) -> list[tuple[EvaluationRun, LLM]]:
    """The runs with their model, oldest first, filtered by id and model id."""
    from sqlmodel import select

    from ..storage.tables import LLM, EvaluationRun

    query = select(EvaluationRun, LLM).where(EvaluationRun.llm_id == LLM.id).order_by(EvaluationRun.id)
    if run_id is not None:
        query = query.where(EvaluationRun.id == run_id)
    if model:
        query = query.where(LLM.model_id == model)
    return list(session.exec(query).all())


def costs(
    run_id: int | None = typer.Option(None, "--run-id", help="only this run"),
    model: str | None = typer.Option(None, "--model", help="only this model"),
    db: str | None = DbOption,
) -> None:
    """Print tokens and USD per run (model calls and judge calls apart) and the total.

    An unknown --run-id is an error (exit 1): a script asking for one run's cost must not read an
    empty table as "nothing spent"."""
    from ..storage.coverage import unpriced_calls
    from ..storage.engine import safe_url

    url = db or default_db()
    with db_session(url) as session:
        found = cost_rows(session, run_id, model)
        unpriced = unpriced_calls(session, [run.id for run, _ in found]) if found else {}
    if run_id is not None and not found:
        fail(f"no run {run_id} in {safe_url(url)}" + (f" of model {model}" if model else ""))
    if not found:
        typer.echo(f"no runs in {safe_url(url)}" + (" matching the filter" if model else ""))
        return
    from ..execution.selection import subset_label
    from ..execution.unpriced import Unpriced
    from ..reporting.cost_text import run_notes, usd

    for line in costs_lines(found, unpriced):
        typer.echo(for_terminal(line))
    for run, _ in found:
        calls = unpriced.get(run.id, Unpriced())
        subset = subset_label(run.subset, run.selected_cases, run.benchmark_cases)
        for line in run_notes(run.id, subset, calls.model_calls, calls.judge_calls):
            typer.echo(for_terminal(line))
    grand = sum(run.cost_usd + run.judge_cost_usd for run, _ in found)
    typer.echo(f"total: {usd(grand, sum(u.total for u in unpriced.values()))} over {len(found)} run(s)")


def cache_prune(
    older_than: str | None = typer.Option(
        None, "--older-than", help="only entries written longer ago than this: 30d, 12h, 45m or 90s"
    ),
    model: str | None = typer.Option(None, "--model", help="only this model's entries (judge calls too)"),
    db: str | None = DbOption,
) -> None:
    """Delete response-cache entries (older than an age and/or of one model; neither: all of them)."""
    from ..storage.cache import prune
    from ..storage.engine import safe_url

    try:
        seconds = parse_ttl(older_than)
    except ValueError:
        fail(f"--older-than: {older_than!r} is not a positive duration like 30d, 12h, 45m or 90s")
    with db_session(db) as session:
        removed = prune(session, older_than_seconds=seconds, model_id=model)
    scope = [f"older than {older_than}"] if seconds is not None else []
    scope += [f"of {model}"] if model else []
    typer.echo(
        f"removed {removed} response-cache entr{'y' if removed == 1 else 'ies'}"
        + (f" ({', '.join(scope)})" if scope else "")
        + f" from {safe_url(db or default_db())}"
    )


class ReportFormat(StrEnum):
    """`helmbench report --format`: the HTML page, or the headline as JSON (a contract, with a schema)."""

    html = "html"
    json = "json"


def report(
    run_id: list[int] | None = RunIdOption,
    fmt: ReportFormat = typer.Option(
        ReportFormat.html,
        "--format",
        case_sensitive=False,
        help="html (one self-contained page) or json (each model's headline figures as data)",
    ),
    out: str | None = typer.Option(
        None,
        "--out",
        help="file to write (default report.html; for json, - is standard output and the default)",
    ),
    baseline: Path | None = typer.Option(
        None, "--baseline", help="a baseline file: the page adds each model's comparison with it"
    ),
    db: str | None = DbOption,
) -> None:
    """Write one self-contained HTML page comparing models and runs, or their headline as JSON.

    By default the latest run of each model."""
    from ..storage.engine import safe_url
    from ..storage.queries import DatasetError, load_report_data

    target = out or ("report.html" if fmt is ReportFormat.html else "-")
    if fmt is ReportFormat.html and target == "-":
        raise typer.BadParameter(
            "the HTML report is a page: give a file with --out FILE", param_hint="'--out'"
        )
    with db_session(db, (DatasetError,)) as session:
        data = load_report_data(session, run_id or None, source=safe_url(db or default_db()))
    if fmt is ReportFormat.json:
        write_json_report(data, target)
        return
    from ..codes import layouts_differ_line
    from ..reporting.html_report import render_report, summaries, summary_line
    from ..reporting.unknown_numbers import unknown_numbers

    replies = stored_replies(db, [run.id for run in data.runs])
    try:
        stats = item_statistics(replies, None)
    except (ConfigFileError, HelmbenchError) as exc:  # the page says there are no item statistics
        typer.echo(for_terminal(f"note: no item statistics ({exc})"), err=True)
        stats = None
    comparisons = baseline_comparisons(baseline, data.results) if baseline is not None else None
    page = render_report(data, items=stats, numbers=unknown_numbers(replies), comparisons=comparisons)
    _write_text(Path(target), page)
    typer.echo(
        f"wrote {target} ({len(data.runs)} run(s), {len(data.results)} results, "
        f"{len(data.failures)} failures and errors)"
    )
    found = summaries(data)
    differ = layouts_differ_line({s.label: s.layout for s in found})
    if differ:
        typer.echo(for_terminal(f"note: {differ}"))
    width = shutil.get_terminal_size().columns
    for summary in found:
        typer.echo(for_terminal(summary_line(summary, width)))


def _write_text(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        fail(f"cannot write {path}: {exc.strerror or exc}")


def write_json_report(data: ReportData, target: str) -> None:
    """The JSON report to `target` (- is standard output, which then holds only the document; what was
    written is said on standard error)."""
    import sys

    from ..reporting.json_report import ReportContractError, report_json

    try:
        text = report_json(data)
    except ReportContractError as exc:
        fail(str(exc))
    if target == "-":
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except BrokenPipeError:  # `helmbench report --format json | head`: the reader left
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(1) from None
    else:
        _write_text(Path(target), text)
    where = "standard output" if target == "-" else target
    models = len({run.model for run in data.runs})
    typer.echo(f"wrote the JSON report of {models} model(s), {len(data.runs)} run(s) to {where}", err=True)


def export_results(
    fmt: ExportFormat = typer.Option(
        ...,
        "--format",
        case_sensitive=False,
        help="csv, json (one list), jsonl (one object per line), parquet (a file; needs pyarrow) or "
        "inspect (one Inspect AI eval log per run in the --out folder, default logs; needs inspect-ai)",
    ),
    out: str = typer.Option(
        "-", "--out", "--output", help="file to write, or - for standard output (inspect: a folder)"
    ),
    run_id: list[int] | None = RunIdOption,
    db: str | None = DbOption,
) -> None:
    """Write one row per stored Result (default: every run) for pandas and other tools."""
    if fmt is ExportFormat.parquet:
        export_parquet_file(out, run_id, db)
        return
    if fmt is ExportFormat.inspect:
        export_inspect_logs("logs" if out == "-" else out, run_id, db)
        return
    import sys

    from ..reporting.export import export
    from ..storage.queries import DatasetError, resolve_run_ids

    with db_session(db, (DatasetError,), os_error=f"cannot write {out}") as session:
        ids = resolve_run_ids(session, run_id or None, all_runs=True)  # before any file is created
        try:
            if out == "-":
                count = export(session, fmt.value, sys.stdout, ids)  # type: ignore[arg-type]
                sys.stdout.flush()
            else:
                with open(out, "w", encoding="utf-8", newline="") as handle:
                    count = export(session, fmt.value, handle, ids)  # type: ignore[arg-type]
        except BrokenPipeError:  # `helmbench export ... | head`: the reader left; stop quietly
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(1) from None
    typer.echo(
        f"exported {count} result row(s) as {fmt.value} to {'standard output' if out == '-' else out}",
        err=True,
    )


def export_parquet_file(out: str, run_id: list[int] | None, db: str | None) -> None:
    """`export --format parquet`: a binary file, never standard output (a usage error, exit 2); without
    pandas or pyarrow a one-line error naming the extra (exit 1, as a missing database driver)."""
    from ..reporting.export import export_parquet, require_parquet
    from ..reporting.frames import MissingExtra
    from ..storage.queries import DatasetError, resolve_run_ids

    if out == "-":
        raise typer.BadParameter("parquet is binary: give a file with --out FILE", param_hint="'--out'")
    try:
        require_parquet()
    except MissingExtra as exc:
        fail(f"--format parquet: {exc}")
    with db_session(db, (DatasetError,), os_error=f"cannot write {out}") as session:
        ids = resolve_run_ids(session, run_id or None, all_runs=True)  # before any file is created
        count = export_parquet(session, out, ids)
    typer.echo(f"exported {count} result row(s) as parquet to {out}", err=True)


def items(
    run_id: list[int] | None = typer.Option(None, "--run-id", help="runs to read (default: every run)"),
    root: Path | None = typer.Option(
        None, "--root", help="benchmark whose rubrics say how each item passes (default: as pytest finds it)"
    ),
    db: str | None = DbOption,
) -> None:
    """Item statistics: per scenario, check and atomic item, each model's pass rate and not_applicable
    share, the items at the ceiling or floor, and (two models or more) each item's discrimination."""
    from ..reporting.items import item_lines
    from ..storage.engine import safe_url

    try:
        stats = item_statistics(stored_replies(db, run_id or None), root)
    except ConfigFileError as exc:
        fail(str(exc))
    if stats is None:
        typer.echo(f"no scored results in {safe_url(db or default_db())}")
        return
    for line in item_lines(stats):
        typer.echo(for_terminal(line))


def baseline_comparisons(path: Path, results: list[CaseResult]) -> list[Comparison]:
    """Each model of the report that the baseline file holds, compared with it (a bad file: exit 1)."""
    from ..reporting.compare import BaselineError, compare, load_baseline, verdicts_of

    try:
        before = load_baseline(path)
    except BaselineError as exc:
        fail(str(exc))
    now = verdicts_of(results)
    return [compare(before[model], now[model]) for model in sorted(now) if model in before]


def stored_replies(db: str | None, run_ids: list[int] | None) -> list[StoredReply]:
    """The scored Results of the given runs (every run: None) with their checks' records."""
    from ..storage.queries import load_stored_replies

    with db_session(db) as session:
        return load_stored_replies(session, run_ids)


def item_statistics(replies: list[StoredReply], root: Path | None) -> ItemStats | None:
    """The item statistics of these replies (None: none); atomic items' pass rules are read from the
    benchmark at `root` (default: as pytest finds it). ConfigFileError: a config file pytest would
    refuse."""
    from ..evaluation.builtin import builtin_registry
    from ..reporting.items import item_stats, rubric_items
    from ..suite.loader import BenchmarkLoader

    if not replies:
        return None
    loader = BenchmarkLoader(root or find_project().root, evaluation_types=builtin_registry())
    scenarios = []
    for code in sorted({reply.scenario for reply in replies}):
        try:
            scenarios.append(loader.load_scenario(loader.scenarios_dir / code))
        except HelmbenchError:  # gone or broken on disk: its atomic items get no pass rate
            continue
    return item_stats(replies, rubric_items(scenarios))


def export_inspect_logs(out: str, run_id: list[int] | None, db: str | None) -> None:
    """`export --format inspect`: one Inspect eval log per run (default: every run) in the folder `out`,
    each file on its own line; without inspect-ai, a one-line error naming the extra (exit 1)."""
    from ..reporting.frames import MissingExtra
    from ..reporting.inspect_log import InspectFormatError, require_inspect, write_logs
    from ..storage.queries import DatasetError, resolve_run_ids

    try:
        require_inspect()
    except (MissingExtra, InspectFormatError) as exc:
        fail(f"--format inspect: {exc}")
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        fail(f"--out {out} is a file: inspect logs go in a folder (give --out DIR)")
    with db_session(db, (DatasetError,), os_error=f"cannot write in {out}") as session:
        ids = resolve_run_ids(session, run_id or None, all_runs=True)  # before any folder is made
        written = write_logs(session, ids, folder)
    for log in written:
        typer.echo(for_terminal(f"{log.path}\trun {log.run_id}\t{log.model}\t{log.samples} samples"))
    typer.echo(f"exported {len(written)} Inspect eval log(s) to {folder}", err=True)


def register(app: typer.Typer) -> None:
    """Add these commands to the `helmbench` application (in the order `--help` lists them)."""
    app.command()(costs)
    app.command()(report)
    app.command()(items)
    app.command("export")(export_results)
    db_app = typer.Typer(help="Database maintenance.", no_args_is_help=True)
    db_app.command("upgrade")(db_upgrade)
    db_app.command("stamp")(db_stamp)
    app.add_typer(db_app, name="db")
    cache_app = typer.Typer(help="Response cache maintenance.", no_args_is_help=True)
    cache_app.command("prune")(cache_prune)
    app.add_typer(cache_app, name="cache")
