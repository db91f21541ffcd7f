"""`helmbench rescore`: score sheets for Results stored before scoring version 3.

A Result stored since version 3 carries its sheet (execution/sheet.py): whether the reply harmed and
the care points it earned, read from its judges' answers when it was judged. An older Result has the
judges' answers but not which checks were harm checks or what they were worth: those are in the
rubrics. So its sheet is worked out from the benchmark on disk, only when the scenario there is the
exact content the Result was run with (the same content hash, which covers its rubrics): otherwise the
Result is left without a sheet and counted, never scored against a rubric it was not judged with.

A resource_check stored only its verdict, so the numbers of the stored answer are looked up again in
resources.yml (wrong numbers are a harm). The sheet is added to the Result's evaluation details with
`"derived": "rescore"`; nothing else of the Result changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import update
from sqlmodel import Session, select

from ..errors import HelmbenchError
from ..evaluation.resource_check import WRONG, assess, resource_index
from ..execution.sheet import CheckRecord, ReplySheet, combined, sheet_of
from ..status import SCORED
from ..storage.tables import Result, Scenario
from ..suite.cases import Case, case_by_code
from ..suite.loader import BenchmarkLoader
from ..suite.model import Scenario as LoadedScenario

DERIVED = "rescore"


@dataclass
class Backfilled:
    """What a backfill did: sheets added, and Results left without one (the scenario changed since, or
    it no longer loads, or the stored details say too little)."""

    added: int = 0
    unmatched: int = 0
    unreadable: int = 0
    scenarios: set[str] = field(default_factory=set)  # scenarios whose files differ from the run's


@dataclass
class _Benchmark:
    """The benchmark on disk, loaded lazily: each scenario once."""

    loader: BenchmarkLoader
    scenarios: dict[str, LoadedScenario | None] = field(default_factory=dict)

    def scenario(self, code: str) -> LoadedScenario | None:
        if code not in self.scenarios:
            try:
                self.scenarios[code] = self.loader.load_scenario(self.loader.scenarios_dir / code)
            except HelmbenchError:
                self.scenarios[code] = None
        return self.scenarios[code]

    def case(self, scenario: LoadedScenario, code: str) -> Case | None:
        return case_by_code(scenario, code, "-")

    def weight(self, scenario: LoadedScenario) -> float:
        return self.loader.info().scenario_weight(scenario)


def _wrong(
    loader: BenchmarkLoader, scenario: LoadedScenario, case: Case | None, answer: Any
) -> dict[str, int]:
    """Per resource_check: how many numbers of the stored answer are wrong for the case's locale."""
    found: dict[str, int] = {}
    checks = [c for c in scenario.checks if c.spec.type == "resource_check"]
    resources = loader.resources() if checks else None
    if resources is None:
        return found
    index = resource_index(resources)
    for check in checks:
        reply = answer.get(check.spec.field) if isinstance(answer, Mapping) else None
        findings = assess(reply if isinstance(reply, str) else "", case.locale if case else None, index)
        found[check.name] = sum(1 for f in findings if f.status == WRONG)
    return found


def _reply_sheet(
    bench: _Benchmark, scenario: LoadedScenario, case: Case | None, reply: Mapping[str, Any]
) -> ReplySheet | None:
    """One reply's sheet from its stored `checks` and answer (None: the details say too little)."""
    weight = bench.weight(scenario)
    checks = reply.get("checks")
    answer = reply.get("answer")
    if not isinstance(checks, list):
        return None
    if not checks:  # no check ran: refused, not JSON, or outside the schema
        return sheet_of(scenario, None, weight=weight)
    wrong = _wrong(bench.loader, scenario, case, answer)
    records = [
        CheckRecord.from_stored(c, wrong.get(str(c.get("name")), 0)) for c in checks if isinstance(c, Mapping)
    ]
    label = answer.get(scenario.evaluation.field) if isinstance(answer, Mapping) else None
    return sheet_of(scenario, records, label, weight)


def _sheets(
    bench: _Benchmark, scenario: LoadedScenario, case: Case | None, details: Mapping[str, Any], answer: Any
) -> tuple[ReplySheet | None, list[dict[str, Any]] | None]:
    """The case's sheet and, for a multi-turn case, its turns with their sheets added."""
    turns = details.get("turns")
    if isinstance(turns, list) and turns:
        found, sheets = [], []
        for turn in turns:
            if not isinstance(turn, Mapping):
                return None, None
            sheet = _reply_sheet(bench, scenario, case, turn)
            if sheet is None:
                return None, None
            sheets.append(sheet)
            found.append({**turn, "sheet": {**sheet.to_dict(), "derived": DERIVED}})
        return combined(sheets), found
    checks = details.get("checks")
    if checks is None and "type" not in details and "judge" not in details:
        checks = []  # a verdict before any check ran stores none (refusal, not JSON, schema)
    return _reply_sheet(bench, scenario, case, {"checks": checks, "answer": answer}), None


def backfill_sheets(session: Session, run_id: int, loader: BenchmarkLoader) -> Backfilled:
    """Give every scored Result of the run stored without a sheet one worked out from the benchmark on
    disk (module docstring); the caller commits."""
    done = Backfilled()
    bench = _Benchmark(loader)
    query = (
        select(Result.id, Result.case_code, Result.status, Result.evaluation_details, Result.parsed_answer)
        .add_columns(Scenario.full_code, Scenario.content_hash)
        .join(Scenario, Scenario.id == Result.scenario_id)
        .where(Result.run_id == run_id)
        .order_by(Result.id)
    )
    for result_id, case_code, status, details, answer, code, content_hash in session.exec(query).all():
        details = details if isinstance(details, dict) else {}
        if status not in SCORED or isinstance(details.get("sheet"), dict):
            continue
        scenario = bench.scenario(code)
        if scenario is None or scenario.hash != content_hash:
            done.unmatched += 1
            done.scenarios.add(code)
            continue
        sheet, turns = _sheets(bench, scenario, bench.case(scenario, case_code), details, answer)
        if sheet is None:
            done.unreadable += 1
            continue
        added = {**details, "sheet": {**sheet.to_dict(), "derived": DERIVED}}
        if turns is not None:
            added["turns"] = turns
        session.exec(update(Result).where(Result.id == result_id).values(evaluation_details=added))  # type: ignore[call-overload]
        done.added += 1
    return done
