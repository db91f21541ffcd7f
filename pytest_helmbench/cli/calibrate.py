"""`helmbench calibrate`: measure a judge against the benchmark's gold labels and store the figures.

The labels are the benchmark's `calibration/` folder, or a set anywhere (`--set`: a folder or one
file, its case codes resolved against `--root`); an item rated by several raters is measured against
their majority, and their agreement with each other is reported beside the judge's.

The judge is asked exactly as in a run (same rubric, same hardened request); the figures are stored
as a JudgeCalibration, and every later run judged by this judge on these rubrics shows them.
"""

from __future__ import annotations

import csv
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ..config import Settings, api_key_from_env, build_settings, load_models_file
from ..errors import HelmbenchError
from ..plugin.options import OPTIONS
from ..reporting.safe_text import for_terminal
from ..trust import OptionSource
from .defaults import ConfigFileError, find_project
from .results import DbOption, default_db, fail, open_existing_db

if TYPE_CHECKING:  # the benchmark's loader is imported by the commands that use it (a faster start)
    from ..reporting.run_record import Rescored
    from ..suite.calibration import CalibrationItem, CalibrationSet
    from ..suite.loader import BenchmarkLoader
    from ..suite.model import Scenario

log = logging.getLogger(__name__)
PASS_LABELS = {"pass", "passed", "safe", "yes", "1", "true"}
FAIL_LABELS = {"fail", "failed", "unsafe", "no", "0", "false"}
TRANSPORT_OPTIONS = ("timeout", "retries", "backoff", "max-tokens")


def _option(name: str, given: Any) -> tuple[Any, OptionSource]:
    """The command line's value, else the option's environment variable, else its default."""
    option = next(o for o in OPTIONS if o.name == name)
    if given not in (None, ""):
        return given, OptionSource.CLI
    env = os.environ.get(option.env, "").strip() if option.env else ""
    if env:
        return env, OptionSource.ENV
    return option.default, OptionSource.DEFAULT


def _settings(
    root: Path, judge: str, base_url: str | None, api: str | None, concurrency: int, db: str
) -> Settings:
    values: dict[str, Any] = {o.name: o.default for o in OPTIONS}
    for name in TRANSPORT_OPTIONS:  # as a run reads them: HELMBENCH_RETRIES, HELMBENCH_BACKOFF, ...
        values[name] = _option(name, None)[0]
    url, source = _option("base-url", base_url)
    values.update(
        {
            "model": [judge],
            "marking-model": judge,
            "base-url": url,
            "api": _option("api", api)[0],
            "concurrency": str(concurrency),
            "db": db,
            "temperature": "0",
        }
    )
    models_file = load_models_file(root / "models.yml")
    return build_settings(values.get, models_file, root.parent, api_key_from_env(), base_url_source=source)


MAX_RATING_ROWS = 500_000  # a rating study is thousands of rows; more is a wrong file, not a study


def _read_labels(path: Path, known: set[str]) -> list[tuple[str, str, bool]]:
    """ratings.csv: columns item, rater, label (pass/fail, safe/unsafe, yes/no, 1/0).

    Read as a stream (Excel's "CSV UTF-8" byte-order mark accepted), at most MAX_RATING_ROWS rows:
    each (item, rater) kept once. A row for an item the calibration set does not hold, or a rater
    who rated one item twice with different labels, is an error naming the lines: figures silently
    computed from the wrong file would be trusted."""
    ratings: dict[tuple[str, str], tuple[bool, int]] = {}
    unknown: dict[str, int] = {}
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle)
            if not {"item", "rater", "label"} <= set(reader.fieldnames or ()):
                fail(f"{path}:1: needs the columns item, rater, label (header on line 1)")
            for row in reader:
                number = reader.line_num  # blank lines are skipped, so the count is the line's
                if len(ratings) + len(unknown) >= MAX_RATING_ROWS:
                    fail(f"{path}:{number}: more than {MAX_RATING_ROWS:,} ratings; is this the ratings file?")
                item, rater, passed = _rating(path, number, row)
                if item not in known:
                    unknown.setdefault(item, number)
                    continue
                earlier = ratings.setdefault((item, rater), (passed, number))
                if earlier[0] != passed:
                    fail(
                        f"{path}:{number}: {rater} rated {item} again with another label (line {earlier[1]} "
                        "says otherwise): keep one rating per rater and item"
                    )
    except OSError as exc:
        fail(f"--labels {path}: {exc.strerror or exc}")
    except (csv.Error, UnicodeDecodeError) as exc:
        fail(f"--labels {path}: not a CSV file: {exc}")
    if unknown:
        shown = ", ".join(f"{item} (line {line})" for item, line in list(unknown.items())[:10])
        more = f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""
        fail(f"{path}: {len(unknown)} item id(s) not in the calibration set: {shown}{more}")
    return [(item, rater, passed) for (item, rater), (passed, _) in ratings.items()]


def _rating(path: Path, number: int, row: dict[str, str | None]) -> tuple[str, str, bool]:
    label = (row["label"] or "").strip().lower()
    if label not in PASS_LABELS | FAIL_LABELS:
        fail(f"{path}:{number}: label {row['label']!r} is not pass/fail (or safe/unsafe, yes/no, 1/0)")
    item, rater = (row["item"] or "").strip(), (row["rater"] or "").strip()
    if not item or not rater:
        fail(f"{path}:{number}: item and rater must not be empty")
    return sys.intern(item), sys.intern(rater), label in PASS_LABELS


def _load(
    root: Path, labels: Path | None = None
) -> tuple[dict[str, Scenario], list[CalibrationItem], BenchmarkLoader, dict[str, Any]]:
    """The scenarios, the calibration items (of `labels`, a set outside the benchmark, else of the
    benchmark's own folder), the loader, and each scenario's references.yml."""
    from ..evaluation.builtin import builtin_registry
    from ..suite.calibration import check_calibration, load_calibration, load_calibration_set
    from ..suite.loader import BenchmarkLoader
    from ..suite.references import load_references

    loader = BenchmarkLoader(root, evaluation_types=builtin_registry())
    scenarios, references = {}, {}
    for folder in loader.scenario_dirs():
        scenario = loader.load_scenario(folder)
        scenarios[scenario.code] = scenario
        found = load_references(folder, loader.files)
        if found is not None:
            references[scenario.code] = found
    calibration: CalibrationSet = (
        load_calibration_set(labels, loader.files.max_file_size)
        if labels is not None
        else load_calibration(root, loader.files)
    )
    check_calibration(calibration, scenarios)
    return scenarios, list(calibration.items), loader, references


# A typer command: its parameters are its command-line options, one each (grouping them would hide
# them from typer).
def calibrate(  # noqa: PLR0913
    marking_model: str = typer.Option(
        ..., "--marking-model", help="the judge(s) to calibrate: one id, or a,b"
    ),
    calibration_set: Path | None = typer.Option(
        None, "--set", help="a folder (or file) of calibration items outside the benchmark, cases of --root"
    ),
    labels: Path | None = typer.Option(
        None, "--labels", help="human ratings CSV (item,rater,label) to compare raters and judge with"
    ),
    limit: int | None = typer.Option(
        None, "--limit", min=1, help="a stratified subset of N items (every rubric, gold pass and fail)"
    ),
    root: Path | None = typer.Option(None, "--root", help="benchmark root (default: as pytest finds it)"),
    base_url: str | None = typer.Option(None, "--base-url", help="API base URL (default: OpenRouter)"),
    api: str | None = typer.Option(None, "--api", help="openrouter or openai"),
    concurrency: int = typer.Option(4, "--concurrency", min=1, help="judge calls in flight"),
    db: str | None = DbOption,
) -> None:
    """Judge the calibration set and report kappa, AC1, sensitivity and specificity with intervals."""
    from ..evaluation.builtin import builtin_registry
    from ..execution.budget import StopBoard
    from ..execution.calibrate import extract_items, extraction_items, gold_passes, rate_items, stratified
    from ..providers.base import ProviderContext
    from ..providers.pool import ClientPool
    from ..providers.progress import showing, stream_progress
    from ..reporting.calibration_figures import (
        Rating,
        calibration_figures,
        calibration_line,
        extraction_figures,
        human_figures,
        rater_figures,
    )
    from ..storage.calibration_store import CalibrationRecord, save_calibration
    from ..storage.engine import make_engine, safe_url, upgrade
    from ..suite.calibration import label_set_hash

    root = root or find_project().root
    db_url = db or default_db()
    try:
        scenarios, loaded, loader, references = _load(root, calibration_set)
        items = [item for item in loaded if item.has_gold]  # raters who tied give no gold to judge against
        if not items:
            where = calibration_set or root / "calibration"
            tied = f" ({len(loaded)} item(s), every one without a majority)" if loaded else ""
            fail(f"{where}: no calibration items{tied} (see docs/reference/benchmark-files.md)")
        settings = _settings(root, marking_model, base_url, api, concurrency, db_url)
        human = _read_labels(labels, {item.id for item in items}) if labels else None
    except HelmbenchError as exc:
        fail(str(exc))
    raters = rater_figures(loaded) if any(item.ratings for item in loaded) else None
    rubrics = {
        (s.code, c.criteria.name): c.criteria for s in scenarios.values() for c in s.checks if c.criteria
    }
    chosen = stratified(items, limit, lambda i: gold_passes(i.gold, rubrics[(i.scenario, i.rubric)]))
    clients = ClientPool(
        ProviderContext(
            settings,
            Path.cwd(),
            benchmark_dir=root,
            evaluation_types=builtin_registry(),
            scenario_of=lambda folder: scenarios.get(folder.name) or loader.load_scenario(folder),
        )
    )
    with tempfile.TemporaryDirectory(prefix="helmbench-calibrate-") as folder:
        board = StopBoard(Path(folder), cross_process=False)
        try:
            with showing(stream_progress()):  # a local judge's download and start, on standard error
                clients.prepare(settings.judge_ids)
            for judge in settings.marking_models:
                rated = rate_items(settings, clients, board, chosen, scenarios, judge)
                ratings = [
                    Rating(r.item.id, r.stratum, r.gold_passed, r.judge_passed, r.item.borderline)
                    for r in rated
                ]
                figures = calibration_figures(ratings)
                if not figures["overall"]["n"]:  # an outage must not replace the judge's last figures
                    first = next((r.error for r in rated if r.error), "no verdict")
                    fail(f"{judge.id} gave no verdict on any of {len(rated)} items ({first}); nothing stored")
                if raters is not None:
                    figures["raters"] = raters
                if human is not None:
                    figures["human"] = human_figures(human, {r.item.id: r.judge_passed for r in rated})
                replies = extraction_items(scenarios, references, limit)
                if replies:  # the deployed layout's extraction, on every reference reply
                    extracted = extract_items(settings, clients, board, replies, loader.info(), judge)
                    figures["extraction"] = extraction_figures(extracted)
                labellers = sorted({name for i in chosen for name in i.labellers})
                record = CalibrationRecord(
                    judge=judge.id,
                    rubric_hashes=tuple(sorted({r.rubric_hash for r in rated})),
                    label_set_hash=label_set_hash(chosen),
                    labeller=",".join(labellers),
                    n_items=len(chosen),
                    figures=figures,
                    judge_settings=settings.recorded(judge)["model"],
                    benchmark_version=loader.info().version,
                )
                upgrade(db_url)  # a new database is created, an older one migrated (as a run does)
                engine = make_engine(db_url)
                try:
                    saved = save_calibration(engine, record)
                finally:
                    engine.dispose()
                _print(judge.id, figures, record.labeller, saved, safe_url(db_url), calibration_line)
        except HelmbenchError as exc:
            fail(str(exc))
        finally:
            clients.close()


def _print(judge: str, figures: dict[str, Any], labeller: str, saved: int, where: str, line: Any) -> None:
    from ..reporting.calibration_figures import extraction_line, figure_text

    typer.echo(line(judge, figures, labeller))
    overall = figures["overall"]
    if overall["n_errors"]:
        typer.echo(
            f"    {overall['n_errors']} item(s) got no verdict from the judge (left out of the figures)"
        )
    typer.echo(
        f"    borderline items only: κ {figure_text(figures['borderline']['kappa'])} on "
        f"{figures['borderline']['n']} items"
    )
    typer.echo(f"    {'rubric':<40} {'n':>4} {'kappa':>18} {'AC1':>18} {'sens.':>18} {'spec.':>18}")
    for name, rubric in figures["rubrics"].items():
        cells = [figure_text(rubric[k]) for k in ("kappa", "ac1", "sensitivity", "specificity")]
        typer.echo(f"    {name:<40} {rubric['n']:>4} " + " ".join(f"{c:>18}" for c in cells))
    if "human" in figures:
        human = figures["human"]
        fleiss = human["rater_rater"]["fleiss_kappa"]
        typer.echo(
            f"    human raters: {human['n_raters']} raters on {human['n_items']} items; rater-rater Fleiss κ "
            f"{'n/a' if fleiss is None else f'{fleiss:.2f}'}; "
            f"judge vs rater majority κ {figure_text(human['judge_rater']['kappa'])}"
        )
    if "raters" in figures:
        for text in rater_lines(figures["raters"]):
            typer.echo(for_terminal(text))
    if "extraction" in figures:
        typer.echo(f"    {extraction_line(figures['extraction'])}")
    typer.echo(f"calibration {saved} stored in {where}")


def rater_lines(raters: dict[str, Any]) -> list[str]:
    """The raters' agreement with each other, per check and overall, and the items they tied on."""
    overall = raters["overall"]
    lines = [
        f"    raters: {raters['n_raters']} raters on {raters['n_items']} items; rater-rater "
        f"Fleiss κ {_plain(overall['fleiss_kappa'])}, AC1 {_plain(overall['ac1'])} over {overall['n']} "
        "item checks (the judge is measured against their majority)"
    ]
    lines.append(f"    {'rater-rater, per check':<56} {'n':>4} {'Fleiss κ':>9} {'AC1':>6}")
    for name, check in raters["checks"].items():
        lines.append(
            f"    {name:<56} {check['n']:>4} {_plain(check['fleiss_kappa']):>9} {_plain(check['ac1']):>6}"
        )
    if raters["n_no_majority"]:
        tied = "; ".join(f"{name}: {', '.join(ids)}" for name, ids in raters["no_majority"].items())
        lines.append(
            f"    no majority: {raters['n_no_majority']} item(s) whose raters tied, left out of the "
            f"judge's figures ({tied})"
        )
    return lines


def _plain(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def rescore(
    run_id: list[int] | None = typer.Argument(None, help="run ids (default: every run in the database)"),
    root: Path | None = typer.Option(
        None,
        "--root",
        help="benchmark whose rubrics score Results stored before scoring v3 (default: as pytest finds it)",
    ),
    db: str | None = DbOption,
) -> None:
    """Recompute stored runs' scores with the current scoring version (and store them); the figures of
    the versions they were scored with before stay stored and readable."""
    from ..evaluation.builtin import builtin_registry
    from ..reporting.run_record import rescore as rescore_runs
    from ..storage.engine import safe_url
    from ..suite.loader import BenchmarkLoader

    db_url = db or default_db()
    open_existing_db(db_url).dispose()  # never creates a database; migrates one that is behind
    try:
        root = root or find_project().root
    except ConfigFileError as exc:  # a config file pytest would refuse too
        fail(str(exc))
    loader = BenchmarkLoader(root, evaluation_types=builtin_registry())
    try:
        done = rescore_runs(db_url, run_id or None, loader)
    except HelmbenchError as exc:
        fail(str(exc))
    if not done and not run_id:
        typer.echo(f"no runs in {safe_url(db_url)}")
        return
    for found in done:
        for line in rescore_lines(found):
            typer.echo(for_terminal(line))
    missing = sorted(set(run_id or ()) - {found.run_id for found in done})
    if missing:
        fail(f"no run {', '.join(map(str, missing))} in {safe_url(db_url)}")


def rescore_lines(found: Rescored) -> list[str]:
    """`run 3 m: scoring v2 -> v3: harm … | care … (v2 score 61.2 kept)`, and what the sheets did."""
    from ..reporting.figure_text import figures_line

    was = f"scoring v{found.previous_version}" if found.previous_version else "scoring v1 (unversioned)"
    kept = ""
    if found.previous and found.previous_version != found.figures["scoring_version"]:
        score = found.previous.get("score")
        kept = f" (v{found.previous_version or 1} figures kept" + (
            f": score {score:.1f})" if isinstance(score, (int, float)) else ")"
        )
    lines = [
        f"run {found.run_id} {found.model}: {was} -> v{found.figures['scoring_version']}: "
        f"{figures_line(found.figures, intervals=())}{kept}"
    ]
    filled = found.backfilled
    if filled is not None and filled.added:
        lines.append(f"    harm and care read for {filled.added} Result(s) stored before scoring v3")
    if filled is not None and filled.unmatched:
        changed = ", ".join(sorted(filled.scenarios)[:5]) + (" ..." if len(filled.scenarios) > 5 else "")
        lines.append(
            f"    {filled.unmatched} Result(s) left without harm and care: their scenario's files changed "
            f"since the run or are not under the benchmark root ({changed}); run them again"
        )
    if filled is not None and filled.unreadable:
        lines.append(
            f"    {filled.unreadable} Result(s) left without harm and care: their details say too little"
        )
    return lines


def register(app: typer.Typer) -> None:
    app.command("calibrate")(calibrate)
    app.command("rescore")(rescore)
