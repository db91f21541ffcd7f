"""The calibration set: replies with gold verdicts, to measure a judge against (benchmark/calibration/).

One file per scenario, `calibration/<scenario code>.yml`: who labelled it (`labeller`) and its
`items`, each a reply (or a whole answer) to one case, the rubric it is judged on, whether it is a
realistic near miss (`borderline`) and its gold verdict (suite/references.py: `check_gold`).
`load_calibration` reads and checks the files' shape; `check_calibration` holds every item against
its scenario (the case exists, the rubric is one the scenario uses, the gold fits the rubric);
`label_set_hash` names one exact version of the labels (stored with a judge's calibration figures).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..codes import SCENARIO_DIR, code_sort_key
from ..errors import BenchmarkError
from .cases import expand
from .evaluation_spec import JudgedView, valid_rubric
from .files import BenchmarkFiles
from .gold import Gold, check_gold, normalise_gold
from .markdown import load_yaml
from .model import Criteria, Scenario, content_hash

CALIBRATION_DIR = "calibration"
CASE_CODE = re.compile(r"^(P[1-9]\d*-B[1-9]\d*-S[1-9]\d*)-C[1-9]\d*(-U[1-9]\d*)?-PT[1-9]\d*$")
ITEM_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,79}$")
_FILE_KEYS = {"labeller", "items"}
_ITEM_KEYS = {"id", "case", "rubric", "borderline", "reply", "answer", "gold", "note"}
_REQUIRED = ("id", "case", "rubric", "gold")


@dataclass(frozen=True)
class CalibrationItem:
    """One labelled reply. `text` is what the judge is shown: the reply, or the answer as one line of
    JSON; `response` is the reply text either way (what the oracle judge recognises)."""

    id: str
    scenario: str
    case: str
    rubric: str
    borderline: bool
    text: str
    gold: Gold = field(hash=False)
    labeller: str
    note: str
    source: Path
    answer: dict[str, Any] | None = field(default=None, hash=False)

    @property
    def response(self) -> str | None:
        if self.answer is None:
            return self.text
        value = self.answer.get("response")
        return value if isinstance(value, str) else None


@dataclass(frozen=True)
class CalibrationSet:
    """Every item of the benchmark's calibration folder, in file then item order."""

    items: tuple[CalibrationItem, ...]

    @property
    def label_set_hash(self) -> str:
        return label_set_hash(self.items)

    def for_rubric(self, scenario: str, rubric: str) -> list[CalibrationItem]:
        return [i for i in self.items if i.scenario == scenario and i.rubric == rubric]


def label_set_hash(items: Iterable[CalibrationItem]) -> str:
    """A stable hash of the labels (ids, cases, rubrics, texts, gold, labellers; not file paths or
    notes), independent of item order: a judge's calibration figures name the labels they used."""
    rows = sorted((i.id, i.case, i.rubric, i.borderline, i.text, i.gold, i.labeller) for i in items)
    return content_hash("calibration", rows)


def load_calibration(root: Path, files: BenchmarkFiles) -> CalibrationSet:
    """Read `<root>/calibration/*.yml` (none: an empty set); raises BenchmarkError naming the file."""
    folder = root / CALIBRATION_DIR
    if not files.is_dir(folder):
        return CalibrationSet(())
    with os.scandir(folder) as entries:
        names = sorted((e.name for e in entries if e.name.endswith((".yml", ".yaml"))), key=code_sort_key)
    items: list[CalibrationItem] = []
    seen: dict[str, Path] = {}
    for name in names:
        path = folder / name
        for item in parse_calibration_file(load_yaml(files.read_text(path), path), path):
            if item.id in seen:
                raise BenchmarkError(
                    path,
                    f"item id {item.id} is also used in {seen[item.id]}",
                    fix="ids are unique across the whole calibration set: give one a new id",
                )
            seen[item.id] = path
            items.append(item)
    return CalibrationSet(tuple(items))


def parse_calibration_file(data: Any, path: Path) -> list[CalibrationItem]:
    """One `<scenario code>.yml`: its labeller and items, checked for shape (not against the scenario)."""
    stem = path.name.rsplit(".", 1)[0]
    if not SCENARIO_DIR.match(stem):
        raise BenchmarkError(
            path, "a calibration file is named after its scenario", fix="rename it, e.g. P1-B1-S1.yml"
        )
    if not isinstance(data, dict):
        raise BenchmarkError(
            path, "must be a mapping with 'labeller' and 'items'", fix="see docs/reference/benchmark-files.md"
        )
    unknown = sorted(set(map(str, data)) - _FILE_KEYS)
    if unknown:
        raise BenchmarkError(
            path, f"unknown top-level key(s) {', '.join(unknown)}", fix="use only 'labeller' and 'items'"
        )
    labeller = data.get("labeller")
    if not isinstance(labeller, str) or not labeller.strip():
        raise BenchmarkError(
            path, "'labeller' must say who gave the gold verdicts", fix="e.g. labeller: authors"
        )
    raw = data.get("items")
    if not isinstance(raw, list) or not raw:
        raise BenchmarkError(path, "'items' must be a non-empty list", fix="add '- id: …' items")
    found: list[CalibrationItem] = []
    for index, item in enumerate(raw, 1):
        parsed = _item(item, index, stem, labeller.strip(), path)
        if parsed.id in {i.id for i in found}:
            raise BenchmarkError(path, f"item id {parsed.id} is used twice", fix="give each item its own id")
        found.append(parsed)
    return found


def _item(data: Any, index: int, scenario: str, labeller: str, path: Path) -> CalibrationItem:
    where = f"item {index}"
    if not isinstance(data, dict):
        raise BenchmarkError(path, f"{where} must be a mapping", fix="write '- id: …' then its keys")
    unknown = sorted(set(map(str, data)) - _ITEM_KEYS)
    if unknown:
        raise BenchmarkError(
            path, f"{where}: unknown key(s) {', '.join(unknown)}", fix=f"use {', '.join(sorted(_ITEM_KEYS))}"
        )
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise BenchmarkError(path, f"{where}: '{missing[0]}' is missing", fix=f"add {missing[0]}: …")
    item_id = data["id"]
    if not isinstance(item_id, str) or not ITEM_ID.match(item_id):
        raise BenchmarkError(path, f"{where}: id {item_id!r} is not a plain name", fix=f"e.g. {scenario}-01")
    where = f"item {item_id}"
    case = data["case"]
    match = CASE_CODE.match(case) if isinstance(case, str) else None
    if match is None or match.group(1) != scenario:
        raise BenchmarkError(
            path,
            f"{where}: case {case!r} is not a case code of {scenario}",
            fix=f"e.g. case: {scenario}-C2-PT1 (the case whose prompt the reply answers)",
        )
    rubric = data["rubric"]
    if not valid_rubric(rubric):
        raise BenchmarkError(
            path, f"{where}: rubric {rubric!r} is not a rubric file name", fix="e.g. criteria.md"
        )
    borderline = data.get("borderline", False)
    if not isinstance(borderline, bool):
        raise BenchmarkError(path, f"{where}: borderline must be true or false", fix="write borderline: true")
    text, answer = _judged(data, where, path)
    gold = data["gold"]
    if not isinstance(gold, dict) or not gold:
        raise BenchmarkError(
            path, f"{where}: 'gold' must be a non-empty mapping", fix='e.g. gold: {asks_safety: "yes"}'
        )
    note = data.get("note", "")
    if not isinstance(note, str):
        raise BenchmarkError(path, f"{where}: note must be a text", fix="quote it")
    return CalibrationItem(
        item_id, scenario, case, rubric, borderline, text, normalise_gold(gold), labeller, note, path, answer
    )


def _judged(data: Mapping[str, Any], where: str, path: Path) -> tuple[str, dict[str, Any] | None]:
    """The judged text: `reply` (a text), or `answer` (a mapping, shown as one line of JSON)."""
    if ("reply" in data) == ("answer" in data):
        raise BenchmarkError(
            path,
            f"{where}: give exactly one of 'reply' and 'answer'",
            fix="reply: for a rubric judged on the reply; answer: for one that grades label fields",
        )
    if "reply" in data:
        reply = data["reply"]
        if not isinstance(reply, str) or not reply.strip():
            raise BenchmarkError(path, f"{where}: 'reply' must be a non-empty text", fix="quote the reply")
        return reply, None
    answer = data["answer"]
    if not isinstance(answer, dict) or not isinstance(answer.get("response"), str):
        raise BenchmarkError(
            path,
            f"{where}: 'answer' must be a mapping with a 'response' text",
            fix="write answer: {response: …, category: …}",
        )
    return json.dumps(answer, ensure_ascii=False), dict(answer)


def scenario_rubrics(scenario: Scenario) -> dict[str, Criteria]:
    """The rubrics a scenario's checks read, by file name."""
    return {c.criteria.name: c.criteria for c in scenario.checks if c.criteria is not None}


def rubric_views(scenario: Scenario) -> dict[str, JudgedView | None]:
    """What a judge is shown of an answer under each rubric of the scenario, by file name."""
    return {c.criteria.name: c.spec.view for c in scenario.checks if c.criteria is not None}


def judged_text(item: CalibrationItem, view: JudgedView | None) -> str:
    """What the judge is shown of an item, as in a run: its reply, or its answer through the view of
    the check that reads its rubric (only the fields that rubric grades)."""
    if item.answer is None or view is None:
        return item.text
    return view.text(item.answer)


def check_calibration(calibration: CalibrationSet, scenarios: Mapping[str, Scenario]) -> None:
    """Hold every item against its scenario (`scenarios`: code -> loaded Scenario): the scenario and
    the case exist, the rubric is one of the scenario's and the gold verdict is complete for it."""
    cases: dict[str, set[str]] = {}
    for item in calibration.items:
        scenario = scenarios.get(item.scenario)
        if scenario is None:
            raise BenchmarkError(
                item.source,
                f"item {item.id}: the benchmark has no scenario {item.scenario}",
                fix="name the file after a scenario folder, or remove it",
            )
        if item.scenario not in cases:
            cases[item.scenario] = {case.code for case in expand(scenario, [""])}
        if item.case not in cases[item.scenario]:
            raise BenchmarkError(
                item.source,
                f"item {item.id}: {scenario.code} has no case {item.case}",
                fix="use a case code that `helmbench list` shows for the scenario",
            )
        rubrics = scenario_rubrics(scenario)
        criteria = rubrics.get(item.rubric)
        if criteria is None:
            raise BenchmarkError(
                item.source,
                f"item {item.id}: {scenario.code} judges nothing with {item.rubric}",
                fix=f"use one of {', '.join(sorted(rubrics)) or 'none (the scenario has no rubric)'}",
            )
        check_gold(item.gold, criteria, item.source, f"item {item.id}")
        view = rubric_views(scenario)[item.rubric]
        if item.answer is None and view is not None and not view.reply_only:
            raise BenchmarkError(
                item.source,
                f"item {item.id}: {item.rubric} grades the answer's {', '.join(view.fields)}, "
                "so a reply alone cannot be judged with it",
                fix="give the whole answer: answer: {response: …, category: …}",
            )
