"""What the oracle models know of a benchmark: each case by its composed prompt, each rubric by its
text, and the gold verdict of every reference and calibration reply of each rubric.

Built once per process from the benchmark folder (the same confined reader and loader a session
uses), when the first oracle call needs it. A scenario that does not load is left out (it is a
collection error of its own), so its prompts are unknown to the oracles: their calls are errors.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..codes import LAYOUTS
from ..errors import BenchmarkError
from ..suite.calibration import CalibrationSet, load_calibration, scenario_rubrics
from ..suite.cases import expand
from ..suite.evaluation_spec import EvaluationTypes
from ..suite.gold import Gold
from ..suite.loader import BenchmarkLoader
from ..suite.model import Criteria, Scenario, content_hash
from ..suite.prompt import compose
from ..suite.reference_fit import check_transcripts
from ..suite.references import References, load_references

log = logging.getLogger(__name__)


def reply_key(text: str) -> str:
    """How a graded reply is recognised: its text with runs of whitespace made one space (YAML's
    folded and literal blocks differ only there)."""
    return " ".join(text.split())


def opening_key(messages: list[dict[str, str]]) -> str:
    """How a case is recognised in any layout and at any turn: its messages up to and including the
    first user message (the same for every request of one conversation)."""
    first_user = next((i for i, m in enumerate(messages) if m.get("role") == "user"), len(messages) - 1)
    opening = [[m.get("role"), m.get("content")] for m in messages[: first_user + 1]]
    return hashlib.sha256(json.dumps(opening, ensure_ascii=False).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CaseEntry:
    """A case as the answer oracles see it: its scenario, references and the user context's locale."""

    code: str
    scenario: Scenario
    references: References | None
    locale: str | None
    perturbation: str = ""  # its perturbation's code (whose transcript, if any, the oracles replay)
    scripted_replies: int = 0  # assistant turns of its script (not the model's own replies)


@dataclass(frozen=True)
class GoldEntry:
    """A gold verdict and where it comes from (shown as the oracle judge's rationale)."""

    gold: Gold = field(hash=False)
    origin: str
    source: Path


@dataclass
class RubricGold:
    """One rubric (by text): its parsed form and the gold verdict of every known reply."""

    criteria: Criteria
    replies: dict[str, list[GoldEntry]] = field(default_factory=dict)

    def add(self, reply: str, entry: GoldEntry) -> None:
        self.replies.setdefault(reply_key(reply), []).append(entry)


@dataclass
class OracleIndex:
    """Every case by prompt hash, every rubric by text; `digest` names this exact content."""

    root: Path
    cases: dict[str, list[CaseEntry]] = field(default_factory=dict)
    rubrics: dict[str, RubricGold] = field(default_factory=dict)
    # reply text (reply_key) -> the reference answers that hold it (the oracle judge's extractions)
    answers: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # a simulated perturbation's persona -> its case (whose transcript's user turns oracle/user replays)
    personas: dict[str, CaseEntry] = field(default_factory=dict)
    digest: str = ""

    def case(self, messages: list[dict[str, str]]) -> list[CaseEntry]:
        return self.cases.get(opening_key(messages), [])

    def rubric(self, text: str) -> RubricGold | None:
        return self.rubrics.get(text)


def build_index(root: Path, evaluation_types: EvaluationTypes) -> OracleIndex:
    """Load every scenario, its references and the calibration set of the benchmark at `root`."""
    loader = BenchmarkLoader(root, evaluation_types=evaluation_types)
    index = OracleIndex(root)
    parts: list[Any] = []
    scenarios: dict[str, Scenario] = {}
    for folder in loader.scenario_dirs():
        try:
            scenario = loader.load_scenario(folder)
            references = load_references(folder, loader.files)
            if references is not None:  # a transcript that does not fit its conversation: left out too
                check_transcripts(references, scenario.perturbations)
        except BenchmarkError as exc:
            log.warning("oracles: scenario %s left out: %s", folder.name, exc)
            continue
        scenarios[scenario.code] = scenario
        parts.append((scenario.code, scenario.hash, _references_part(references)))
        for case in expand(scenario, [""], LAYOUTS):
            dialogue = case.perturbation.dialogue
            scripted = sum(t.role == "assistant" for t in dialogue.script) if dialogue is not None else 0
            entry = CaseEntry(case.code, scenario, references, case.locale, case.perturbation.code, scripted)
            index.cases.setdefault(opening_key(compose(case).messages), []).append(entry)
            if dialogue is not None and dialogue.simulation is not None:
                index.personas.setdefault(dialogue.simulation.persona, entry)
        if references is not None:
            _add_references(index, scenario, references)
    try:
        calibration = load_calibration(root, loader.files)
    except BenchmarkError as exc:
        log.warning("oracles: the calibration set is left out: %s", exc)
        calibration = CalibrationSet(())
    _add_calibration(index, calibration, scenarios)
    parts.append(calibration.label_set_hash)
    index.digest = content_hash("oracles", parts)
    return index


def _references_part(references: References | None) -> Any:
    if references is None:
        return None
    return [(s.kind, s.answer, s.verdicts, list(s.replies())) for s in references.all_sides]


def _rubric(index: OracleIndex, criteria: Criteria) -> RubricGold:
    found = index.rubrics.get(criteria.text)
    if found is None:
        found = index.rubrics[criteria.text] = RubricGold(criteria)
    return found


def _add_references(index: OracleIndex, scenario: Scenario, references: References) -> None:
    origin = f"{scenario.code}/{references.path.name}"
    for side in references.all_sides:
        for _, reply in side.replies():
            index.answers.setdefault(reply_key(reply), []).append(side.answer)
    for criteria in scenario_rubrics(scenario).values():
        rubric = _rubric(index, criteria)
        for side in references.all_sides:
            gold = side.gold(criteria.name)
            if gold is None:
                continue
            for label, reply in side.replies():
                rubric.add(reply, GoldEntry(gold, f"{origin} ({side.kind}{label})", references.path))


def _add_calibration(index: OracleIndex, calibration: CalibrationSet, scenarios: dict[str, Scenario]) -> None:
    for item in calibration.items:
        scenario = scenarios.get(item.scenario)
        criteria = scenario_rubrics(scenario).get(item.rubric) if scenario is not None else None
        if criteria is None or item.response is None:
            log.warning("oracles: calibration item %s names no rubric of a loaded scenario", item.id)
            continue
        origin = f"{item.source.parent.name}/{item.source.name} item {item.id}"
        _rubric(index, criteria).add(item.response, GoldEntry(item.gold, origin, item.source))


class LazyIndex:
    """One index per benchmark folder and process, built by the first caller (others wait)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._built: dict[Path, OracleIndex] = {}

    def get(self, root: Path, evaluation_types: EvaluationTypes) -> OracleIndex:
        found = self._built.get(root)
        if found is None:
            with self._lock:
                found = self._built.get(root)
                if found is None:
                    found = self._built[root] = build_index(root, evaluation_types)
        return found
