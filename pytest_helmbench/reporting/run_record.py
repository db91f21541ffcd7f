"""After a run, and on `helmbench rescore`: what each run was scored with, stored on its row.

Glue between storage (the Results, the calibrations) and reporting (the headline figures): the
scoring version and figures, the benchmark version, the panel of judges and its policy, and the
newest calibration of the (first) judge that covers every rubric the run judged with.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..config import Settings
from ..evaluation.registry import EvaluatorRegistry
from ..suite.loader import BenchmarkLoader
from .calibration_figures import calibration_line
from .headline import SCORING_VERSION, headline
from .tally import Tally

if TYPE_CHECKING:
    from ..execution.outcome import CaseResult
    from ..storage.recorder import Recorder
    from ..suite.model import ScenarioOf
    from .backfill import Backfilled

log = logging.getLogger(__name__)


def judged_rubric_hashes(
    loader: BenchmarkLoader,
    scenarios: Iterable[str],
    evaluators: EvaluatorRegistry,
    scenario_of: ScenarioOf | None = None,
) -> list[str]:
    """The hashes of every rubric a judge applied to these scenarios' cases: as `scenario_of` gives
    them (a session's, parsed once for collection), else as they are on disk now."""
    load = scenario_of or loader.load_scenario
    found: set[str] = set()
    for code in sorted(set(scenarios)):
        try:
            scenario = load(loader.scenarios_dir / code)
        except Exception as exc:  # noqa: BLE001 - a scenario that no longer loads judged nothing we can name
            log.debug("rubrics of %s unknown: %s", code, exc)
            continue
        for check in scenario.checks:
            if check.criteria is not None and evaluators.get(check.spec.type).needs_judge:
                found.add(check.criteria.hash)
    return sorted(found)


@dataclass(frozen=True)
class Recorded:
    """What the terminal summary says about the judges after the figures are stored."""

    judge_lines: list[str]


def record_figures(
    db_url: str,
    runs: dict[str, int],
    settings: Settings,
    benchmark_version: str | None,
    rubric_hashes: Sequence[str],
    loaded: Mapping[int, list[CaseResult]] | None = None,
) -> Recorded:
    """Store every run's figures and provenance; returns each panel's agreement line (with its judges'
    own pass rates) and a calibration line per judge (none when the runs judged nothing). `loaded`:
    runs whose Results the caller has read already (a whole keyed run: 6,000 of them take ~0.2 s to
    read again). A database failure is a StorageError."""
    from sqlmodel import Session

    from ..storage.calibration_store import covering_calibration
    from ..storage.engine import make_engine
    from ..storage.queries import load_case_results
    from ..storage.run_scores import RunScores, write_run_scores

    engine = make_engine(db_url)
    lines: list[str] = []
    try:
        with Session(engine) as session:
            calibrations = {
                judge: covering_calibration(session, judge, rubric_hashes) if rubric_hashes else None
                for judge in settings.judge_ids
            }
            first = calibrations.get(settings.judge_ids[0]) if settings.judge_ids else None
            panels = []
            for model, run_id in sorted(runs.items()):
                results = (loaded or {}).get(run_id)
                figures = headline(results if results is not None else load_case_results(session, [run_id]))
                if figures["panel"] is not None:
                    panels.append(panel_line(model, figures["panel"]))
                found = RunScores(
                    SCORING_VERSION,
                    figures,
                    benchmark_version,
                    settings.judge_ids,
                    settings.judge_policy if settings.judge_ids else None,
                    first.id if first is not None else None,
                )
                write_run_scores(session, run_id, found)
            session.commit()
            if rubric_hashes:
                for judge, calibration in calibrations.items():
                    figures = calibration.figures if calibration is not None else None
                    lines.append(
                        calibration_line(judge, figures, calibration.labeller if calibration else None)
                    )
    finally:
        engine.dispose()
    return Recorded(
        panels + lines
    )  # each panel's agreement and its judges' own pass rates, then calibrations


def panel_line(model: str, panel: dict) -> str:
    """`judges agree on M: Cohen's κ 0.81 (AC1 0.90) over 120 judged checks, 2 judges; each passed:
    a 92.0%, b 85.0%`."""
    name = "Cohen's" if panel["kind"] == "cohen" else "Fleiss'"
    kappa = "n/a (every vote the same)" if panel["kappa"] is None else f"{panel['kappa']:.2f}"
    rates = panel.get("pass_rates") or {}
    each = "; each passed: " + ", ".join(f"{j} {r:.1%}" for j, r in rates.items()) if rates else ""
    return (
        f"judges agree on {model}: {name} κ {kappa} (AC1 {panel['ac1']:.2f}) over {panel['items']} judged "
        f"checks, {panel['judges']} judges{each}"
    )


@dataclass(frozen=True)
class Rescored:
    """One run brought to the current scoring: its figures before and after, and the sheets added to
    its Results stored before scoring version 3 (reporting/backfill.py)."""

    run_id: int
    model: str
    previous_version: int | None  # None: scored before versioning (version 1), or never scored
    previous: dict | None  # the figures it held before (still stored, as their version's RunScore)
    figures: dict
    backfilled: Backfilled | None = None


def rescore(
    db_url: str, run_ids: Sequence[int] | None, loader: BenchmarkLoader | None = None
) -> list[Rescored]:
    """Recompute the selected runs' figures (default: every run) with the current scoring, keeping
    every earlier version's figures readable; with `loader` (the benchmark on disk), Results stored
    before version 3 first get their score sheets where the scenario is unchanged."""
    from sqlmodel import Session, select

    from ..storage.engine import make_engine
    from ..storage.queries import load_case_results, load_runs
    from ..storage.run_scores import RunScores, write_run_scores
    from ..storage.tables import EvaluationRun
    from .backfill import backfill_sheets

    engine = make_engine(db_url)
    done = []
    try:
        with Session(engine) as session:
            ids = list(run_ids) if run_ids else list(session.exec(select(EvaluationRun.id)))
            for run in load_runs(session, ids):
                backfilled = backfill_sheets(session, run.id, loader) if loader is not None else None
                session.flush()
                figures = headline(load_case_results(session, [run.id]))
                write_run_scores(session, run.id, RunScores(SCORING_VERSION, figures), provenance=False)
                done.append(Rescored(run.id, run.model, run.scoring_version, run.scores, figures, backfilled))
            session.commit()
    finally:
        engine.dispose()
    return done


def end_session(  # noqa: PLR0913
    recorder: Recorder,
    settings: Settings,
    loader: BenchmarkLoader,
    evaluators: EvaluatorRegistry,
    tallies: dict[str, Tally],
    *,
    store_figures: bool,
    scenario_of: ScenarioOf | None = None,
) -> list[str]:
    """After the recorder closed the runs: the shard that completed a keyed run shows the whole run
    (its tallies replace this shard's in `tallies`), and the figures of the runs this session ends are
    stored unless told not to (after a storage failure). Returns the judges' calibration lines;
    `scenario_of` gives the session's scenarios (the rubrics it judged, parsed once for collection)."""
    whole = whole_run_tallies(recorder)
    tallies.update(whole)
    if not store_figures or not recorder.runs:
        return []
    scenarios = {result.scenario for tally in tallies.values() for result in tally.results}
    loaded = {tally.run_id: tally.results for tally in whole.values() if tally.run_id}  # read once
    try:
        version = loader.info().version
    except Exception:  # noqa: BLE001 - a broken benchmark.yml already failed the session's scenarios
        version = None
    hashes = judged_rubric_hashes(loader, scenarios, evaluators, scenario_of)
    return record_figures(
        settings.db_url, runs_to_score(recorder), settings, version, hashes, loaded
    ).judge_lines


def runs_to_score(recorder: Recorder) -> dict[str, int]:
    """The runs whose figures this session stores: not a keyed run that other shards are still adding
    to (the shard that completes it stores the whole run's figures; partial ones would mislead)."""
    return {m: run_id for m, run_id in recorder.runs.items() if recorder.run_statuses.get(m) != "running"}


def whole_run_tallies(recorder: Recorder) -> dict[str, Tally]:
    """The keyed runs this shard completed (it finished last), each as a tally of every shard's Results:
    the summary of the last shard shows the whole run."""
    from sqlmodel import Session

    from ..storage.queries import load_case_results
    from ..storage.records import call_latencies
    from ..storage.tables import EvaluationRun

    fleet = recorder.fleet
    if fleet is None or fleet.shard is None:
        return {}
    done = {m: r for m, r in recorder.runs.items() if recorder.run_statuses.get(m) == "completed"}
    found = {}
    with Session(recorder.engine) as session:
        for model, run_id in done.items():
            run = session.get(EvaluationRun, run_id)
            tally = found[model] = Tally(results=load_case_results(session, [run_id]), run_id=run_id)
            if run is not None:
                tally.cost_usd, tally.judge_cost_usd = run.cost_usd, run.judge_cost_usd
                tally.prompt_tokens, tally.completion_tokens = run.prompt_tokens, run.completion_tokens
            tally.latencies, tally.cached = call_latencies(session, run_id)
    return found
