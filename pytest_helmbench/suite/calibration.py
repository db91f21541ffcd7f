"""The calibration set: replies with gold verdicts, to measure a judge against (benchmark/calibration/).

One file per scenario, `calibration/<scenario code>.yml`: who labelled it (`labeller`) and its
`items`, each a reply (or a whole answer) to one case, the rubric it is judged on, whether it is a
realistic near miss (`borderline`) and its gold verdict (suite/references.py: `check_gold`), or
instead several raters' verdicts (`ratings`), the gold then being their majority per check (a tie:
that check has no majority, and the item no gold). `load_calibration` reads the benchmark's folder,
`load_calibration_set` a folder (or one file) anywhere, confined to itself the way a benchmark is
(`helmbench calibrate --set`: its files may hold several scenarios, each item's scenario read from
its case code); both check the files' shape. `check_calibration` holds every item against its
scenario (the case exists, the rubric is one the scenario uses, the gold fits the rubric);
`label_set_hash` names one exact version of the labels (stored with a judge's calibration figures).
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..codes import SCENARIO_DIR, code_sort_key
from ..errors import BenchmarkError
from .cases import expand
from .evaluation_spec import JudgedView, valid_rubric
from .files import BenchmarkFiles
from .gold import Gold, check_gold, normalise_gold
from .markdown import DEFAULT_MAX_FILE_SIZE, load_yaml_node
from .model import Criteria, Scenario, content_hash

CALIBRATION_DIR = "calibration"
CASE_CODE = re.compile(r"^(P[1-9]\d*-B[1-9]\d*-S[1-9]\d*)-C[1-9]\d*(-U[1-9]\d*)?-PT[1-9]\d*$")
ITEM_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,79}$")
_FILE_KEYS = {"labeller", "items"}
_ITEM_KEYS = {"id", "case", "rubric", "borderline", "reply", "answer", "gold", "ratings", "note"}
_REQUIRED = ("id", "case", "rubric")
_RATING_KEYS = {"rater", "verdict"}
MAX_LISTED = 10  # problems named in one error; the rest are counted
Lines = dict[int, int]  # item index (from 1) -> the line of the file it starts on


@dataclass(frozen=True)
class RaterVerdict:
    """One rater's verdict on one item, in the gold verdict's form (suite/gold.py)."""

    rater: str
    verdict: Gold = field(hash=False)


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
    ratings: tuple[RaterVerdict, ...] = field(default=(), hash=False)
    no_majority: tuple[str, ...] = ()  # checks whose raters tied: the item has no gold on them
    line: int | None = field(default=None, compare=False)

    @property
    def has_gold(self) -> bool:
        """False when raters tied on a check: the item then has no gold verdict to judge against."""
        return not self.no_majority

    @property
    def labellers(self) -> tuple[str, ...]:
        """Who gave the gold: the raters of a rated item, else the file's labeller."""
        return tuple(sorted({r.rater for r in self.ratings})) or (self.labeller,)

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
    rows = sorted(_hash_row(i) for i in items)
    return content_hash("calibration", rows)


def _hash_row(item: CalibrationItem) -> tuple[Any, ...]:
    row: tuple[Any, ...] = (
        item.id,
        item.case,
        item.rubric,
        item.borderline,
        item.text,
        item.gold,
        item.labeller,
    )
    if item.ratings:  # only then: the hash of a gold-only set is what it was before ratings existed
        row += (sorted((r.rater, json.dumps(r.verdict, sort_keys=True)) for r in item.ratings),)
    return row


def load_calibration(root: Path, files: BenchmarkFiles) -> CalibrationSet:
    """Read `<root>/calibration/*.yml` (none: an empty set); raises BenchmarkError naming the file."""
    folder = root / CALIBRATION_DIR
    if not files.is_dir(folder):
        return CalibrationSet(())
    return _read_set(folder, _yaml_names(folder), files, free_names=False)


def load_calibration_set(path: Path, max_file_size: int = DEFAULT_MAX_FILE_SIZE) -> CalibrationSet:
    """A calibration set outside the benchmark (`--set`): a folder's `*.yml`, or one file. Read as a
    benchmark is (nothing outside the folder, regular files under the size limit, guarded YAML); a
    file may be named anything and hold several scenarios' items (each item's from its case code)."""
    if not path.exists():
        raise BenchmarkError(path, "does not exist", fix="give a folder of calibration files, or one file")
    folder, names = (path, None) if path.is_dir() else (path.parent, [path.name])
    files = BenchmarkFiles(folder, max_file_size)
    if names is None:
        names = _yaml_names(folder)
        if not names:
            raise BenchmarkError(
                path, "holds no *.yml calibration file", fix="see docs/reference/benchmark-files.md"
            )
    return _read_set(folder, names, files, free_names=True)


def _yaml_names(folder: Path) -> list[str]:
    with os.scandir(folder) as entries:
        return sorted((e.name for e in entries if e.name.endswith((".yml", ".yaml"))), key=code_sort_key)


def _read_set(folder: Path, names: list[str], files: BenchmarkFiles, free_names: bool) -> CalibrationSet:
    items: list[CalibrationItem] = []
    seen: dict[str, Path] = {}
    for name in names:
        path = folder / name
        data, node = load_yaml_node(files.read_text(path), path)
        for item in parse_calibration_file(data, path, _item_lines(node), free_names):
            if item.id in seen:
                raise BenchmarkError(
                    path,
                    f"item id {item.id} is also used in {seen[item.id]}",
                    line=item.line,
                    fix="ids are unique across the whole calibration set: give one a new id",
                )
            seen[item.id] = path
            items.append(item)
    return CalibrationSet(tuple(items))


def _item_lines(root: yaml.Node | None) -> Lines:
    """The line each item starts on, from the node the file's data was built from (a repeated `items`
    key: the last one's, the one loading keeps)."""
    if not isinstance(root, yaml.MappingNode):
        return {}
    found = [value for key, value in root.value if key.value == "items"]
    if not found or not isinstance(found[-1], yaml.SequenceNode):
        return {}
    return {index: item.start_mark.line + 1 for index, item in enumerate(found[-1].value, 1)}


def parse_calibration_file(
    data: Any, path: Path, lines: Lines | None = None, free_names: bool = False
) -> list[CalibrationItem]:
    """One `<scenario code>.yml`: its labeller and items, checked for shape (not against the scenario).
    With `free_names` (a set outside the benchmark) a file not named after a scenario may hold items of
    any scenario; `lines` gives each item's line for the errors."""
    stem = path.name.rsplit(".", 1)[0]
    scenario: str | None = stem if SCENARIO_DIR.match(stem) else None
    if scenario is None and not free_names:
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
    raw = data.get("items")
    if not isinstance(raw, list) or not raw:
        raise BenchmarkError(path, "'items' must be a non-empty list", fix="add '- id: …' items")
    labeller = data.get("labeller")
    rated_only = not any(isinstance(i, dict) and "gold" in i for i in raw)  # no item needs a labeller
    if (not isinstance(labeller, str) or not labeller.strip()) and not (labeller is None and rated_only):
        raise BenchmarkError(
            path,
            "'labeller' must say who gave the gold verdicts",
            fix="e.g. labeller: authors (it may be left out when every item has 'ratings')",
        )
    found: list[CalibrationItem] = []
    for index, item in enumerate(raw, 1):
        at = _At(path, (lines or {}).get(index))
        parsed = _item(item, index, scenario, (labeller or "").strip(), at)
        if parsed.id in {i.id for i in found}:
            at.fail(f"item id {parsed.id} is used twice", "give each item its own id")
        found.append(parsed)
    return found


@dataclass(frozen=True)
class _At:
    """Where an item is (file and line), to raise its errors there."""

    path: Path
    line: int | None

    def fail(self, message: str, fix: str) -> BenchmarkError:
        raise BenchmarkError(self.path, message, line=self.line, fix=fix)


def _item(data: Any, index: int, scenario: str | None, labeller: str, at: _At) -> CalibrationItem:
    where = f"item {index}"
    if not isinstance(data, dict):
        at.fail(f"{where} must be a mapping", "write '- id: …' then its keys")
    unknown = sorted(set(map(str, data)) - _ITEM_KEYS)
    if unknown:
        at.fail(f"{where}: unknown key(s) {', '.join(unknown)}", f"use {', '.join(sorted(_ITEM_KEYS))}")
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        at.fail(f"{where}: '{missing[0]}' is missing", f"add {missing[0]}: …")
    item_id = data["id"]
    if not isinstance(item_id, str) or not ITEM_ID.match(item_id):
        at.fail(f"{where}: id {item_id!r} is not a plain name", f"e.g. {scenario or 'P1-B1-S1'}-01")
    where = f"item {item_id}"
    scenario, case = _case_of(data["case"], scenario, where, at)
    rubric = data["rubric"]
    if not valid_rubric(rubric):
        at.fail(f"{where}: rubric {rubric!r} is not a rubric file name", "e.g. criteria.md")
    borderline = data.get("borderline", False)
    if not isinstance(borderline, bool):
        at.fail(f"{where}: borderline must be true or false", "write borderline: true")
    text, answer = _judged(data, where, at)
    gold, ratings, tied = _gold(data, where, at)
    note = data.get("note", "")
    if not isinstance(note, str):
        at.fail(f"{where}: note must be a text", "quote it")
    labeller = labeller or ",".join(sorted({r.rater for r in ratings}))
    return CalibrationItem(
        item_id, scenario, case, rubric, borderline, text, gold, labeller, note, at.path, answer, ratings,
        tied, at.line,
    )  # fmt: skip


def _case_of(case: Any, scenario: str | None, where: str, at: _At) -> tuple[str, str]:
    """The item's scenario and case: the file's scenario, else (a set's free-named file) the case's."""
    match = CASE_CODE.match(case) if isinstance(case, str) else None
    if match is None or (scenario is not None and match.group(1) != scenario):
        example = scenario or "P1-B1-S1"
        at.fail(
            f"{where}: case {case!r} is not a case code" + (f" of {scenario}" if scenario else ""),
            f"e.g. case: {example}-C2-PT1 (the case whose prompt the reply answers)",
        )
    assert match is not None
    return match.group(1), case


def _gold(
    data: Mapping[str, Any], where: str, at: _At
) -> tuple[Gold, tuple[RaterVerdict, ...], tuple[str, ...]]:
    """The item's gold verdict: `gold` as written, or the majority of its `ratings` (exactly one)."""
    if ("gold" in data) == ("ratings" in data):
        both = "gold" in data
        at.fail(
            f"{where}: " + ("give exactly one of 'gold' and 'ratings'" if both else "'gold' is missing"),
            "gold: {check: …} for one verdict; ratings: [{rater: …, verdict: {check: …}}] for raters'",
        )
    if "gold" in data:
        gold = data["gold"]
        if not isinstance(gold, dict) or not gold:
            at.fail(f"{where}: 'gold' must be a non-empty mapping", 'e.g. gold: {asks_safety: "yes"}')
        return normalise_gold(gold), (), ()
    ratings = _ratings(data["ratings"], where, at)
    gold, tied = majority(ratings)
    return gold, ratings, tied


def _ratings(raw: Any, where: str, at: _At) -> tuple[RaterVerdict, ...]:
    fix = 'ratings: [{rater: ann, verdict: {asks_safety: "yes"}}, {rater: bob, verdict: …}]'
    if not isinstance(raw, list) or not raw:
        at.fail(f"{where}: 'ratings' must be a non-empty list", fix)
    found: list[RaterVerdict] = []
    for number, rating in enumerate(raw, 1):
        if not isinstance(rating, dict) or set(map(str, rating)) != _RATING_KEYS:
            at.fail(f"{where}: rating {number} must have exactly 'rater' and 'verdict'", fix)
        rater, verdict = rating["rater"], rating["verdict"]
        if not isinstance(rater, str) or not rater.strip():
            at.fail(f"{where}: rating {number}: 'rater' must name the rater", "e.g. rater: ann")
        if rater.strip() in {r.rater for r in found}:
            at.fail(f"{where}: {rater.strip()} rated the item twice", "keep one rating per rater")
        if not isinstance(verdict, dict) or not verdict:
            at.fail(f"{where}: {rater.strip()}'s 'verdict' must be a non-empty mapping", fix)
        found.append(RaterVerdict(rater.strip(), normalise_gold(verdict)))
    return tuple(found)


def majority(ratings: Iterable[RaterVerdict]) -> tuple[Gold, tuple[str, ...]]:
    """Per check (every key but `rationale`), the value most raters gave; a tie is no majority: the
    check is left out of the gold and named in the second value. A list (several options) counts as
    one value, whatever its order."""
    ratings = list(ratings)
    keys = sorted({k for r in ratings for k in r.verdict if k != "rationale"})
    gold: Gold = {}
    tied: list[str] = []
    for key in keys:
        votes = [r.verdict[key] for r in ratings if key in r.verdict]
        counts = Counter(_canonical(v) for v in votes)
        ranked = counts.most_common()
        if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
            tied.append(key)
            continue
        gold[key] = next(v for v in votes if _canonical(v) == ranked[0][0])
    return gold, tuple(tied)


def _canonical(value: Any) -> str:
    return json.dumps(
        sorted(value, key=str) if isinstance(value, list) else value, sort_keys=True, default=str
    )


def _judged(data: Mapping[str, Any], where: str, at: _At) -> tuple[str, dict[str, Any] | None]:
    """The judged text: `reply` (a text), or `answer` (a mapping, shown as one line of JSON)."""
    if ("reply" in data) == ("answer" in data):
        at.fail(
            f"{where}: give exactly one of 'reply' and 'answer'",
            "reply: for a rubric judged on the reply; answer: for one that grades label fields",
        )
    if "reply" in data:
        reply = data["reply"]
        if not isinstance(reply, str) or not reply.strip():
            at.fail(f"{where}: 'reply' must be a non-empty text", "quote the reply")
        return reply, None
    answer = data["answer"]
    if not isinstance(answer, dict) or not isinstance(answer.get("response"), str):
        at.fail(
            f"{where}: 'answer' must be a mapping with a 'response' text",
            "write answer: {response: …, category: …}",
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
    the case exist, the rubric is one of the scenario's (every item naming an unknown one is listed in
    one error), and the gold verdict (each rater's verdict, for a rated item) is complete for it."""
    cases: dict[str, set[str]] = {}
    unknown = [(i, problem) for i in calibration.items if (problem := _unknown(i, scenarios, cases))]
    if unknown:
        first = unknown[0][0]
        listed = [f"item {i.id} ({_where(i)}): {problem}" for i, problem in unknown[:MAX_LISTED]]
        more = f"; and {len(unknown) - MAX_LISTED} more" if len(unknown) > MAX_LISTED else ""
        raise BenchmarkError(
            first.source,
            f"{len(unknown)} item(s) name a scenario, case or rubric the benchmark does not have: "
            + "; ".join(listed)
            + more,
            line=first.line,
            fix="use case codes `helmbench list` shows and rubric files of their scenarios (right --root?)",
        )
    for item in calibration.items:
        scenario = scenarios[item.scenario]
        criteria = scenario_rubrics(scenario)[item.rubric]
        for rating in item.ratings:
            check_gold(rating.verdict, criteria, item.source, f"item {item.id}, {rating.rater}'s verdict")
        if not item.ratings:
            check_gold(item.gold, criteria, item.source, f"item {item.id}")
        view = rubric_views(scenario)[item.rubric]
        if item.answer is None and view is not None and not view.reply_only:
            raise BenchmarkError(
                item.source,
                f"item {item.id}: {item.rubric} grades the answer's {', '.join(view.fields)}, "
                "so a reply alone cannot be judged with it",
                line=item.line,
                fix="give the whole answer: answer: {response: …, category: …}",
            )


def _where(item: CalibrationItem) -> str:
    return f"{item.source.name}:{item.line}" if item.line else item.source.name


def _unknown(
    item: CalibrationItem, scenarios: Mapping[str, Scenario], cases: dict[str, set[str]]
) -> str | None:
    """What the benchmark lacks for the item (its scenario, case or rubric), or None; `cases` caches
    each scenario's case codes."""
    scenario = scenarios.get(item.scenario)
    if scenario is None:
        return f"the benchmark has no scenario {item.scenario}"
    if item.scenario not in cases:
        cases[item.scenario] = {case.code for case in expand(scenario, [""])}
    if item.case not in cases[item.scenario]:
        return f"{scenario.code} has no case {item.case}"
    rubrics = scenario_rubrics(scenario)
    if item.rubric not in rubrics:
        known = ", ".join(sorted(rubrics)) or "no rubric"
        return f"{scenario.code} judges nothing with {item.rubric} (it has {known})"
    return None
