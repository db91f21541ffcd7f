"""Put the calibration set to a judge: each labelled reply judged exactly as in a run.

Each item's case prompt is composed from the benchmark as a run would compose it, and the judge gets
the same hardened request (rubric in the system message, the reply as nonce-delimited data). Calls go
out `concurrency` at a time; a call that fails is recorded as no verdict (never as a disagreement).
The extraction of the deployed layout is measured too: every reference reply (references.yml), as
plain text, against the labels of its reference answer.
"""

from __future__ import annotations

import hashlib
import logging
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from ..codes import DEPLOYED
from ..config import ModelConfig, Settings
from ..evaluation.extraction import RESPONSE_FIELD
from ..evaluation.judge import JudgeVerdict
from ..providers.base import ModelClient
from ..providers.chat import CallError, ChatRequest, ChatResponse
from ..providers.pool import ClientPool
from ..suite.calibration import CalibrationItem, judged_text
from ..suite.cases import Case, case_by_code, expand
from ..suite.gold import gold_values
from ..suite.model import BenchmarkInfo, Criteria, Scenario
from ..suite.prompt import compose, render_messages
from ..suite.references import References
from .budget import StopBoard
from .judging import Helpers
from .outcome import CaseLog

log = logging.getLogger(__name__)


def gold_passes(gold: Mapping[str, object], criteria: Criteria) -> bool:
    """Whether a gold verdict passes its rubric (atomic: the rule over the answers; options: pass values)."""
    if criteria.atomic:
        return criteria.answers_pass({k: str(v) for k, v in gold.items()})
    return criteria.values_pass(gold_values(gold, criteria))


@dataclass(frozen=True)
class Rated:
    """One calibration item, its gold pass/fail, and the judge's (None: the judge gave no verdict)."""

    item: CalibrationItem
    rubric_hash: str
    gold_passed: bool
    judge_passed: bool | None
    error: str | None = None
    cost_usd: float | None = None

    @property
    def stratum(self) -> str:
        return f"{self.item.scenario}/{self.item.rubric}"


def stratified(
    items: Sequence[CalibrationItem], limit: int | None, gold: Callable[[CalibrationItem], bool]
) -> list[CalibrationItem]:
    """At most `limit` items taken from every (rubric, gold verdict) stratum in turn, strata and the
    items in each in a fixed pseudo-random order (sha256): a subset as large as the number of strata
    covers every rubric with a passing and a failing reply; a smaller one spreads over the benchmark."""
    if limit is None or limit >= len(items):
        return list(items)
    strata: dict[tuple[str, str, bool], list[CalibrationItem]] = defaultdict(list)
    for item in items:
        strata[(item.scenario, item.rubric, gold(item))].append(item)
    # rubrics in pseudo-random order (a small subset spreads over the benchmark), each rubric's passing
    # and failing strata next to each other (an even subset has both verdicts of every rubric it takes)
    order = sorted(strata, key=lambda k: (_digest(f"{k[0]}/{k[1]}"), k[2]))
    queues = [sorted(strata[k], key=lambda i: _digest(i.id)) for k in order]
    chosen: list[CalibrationItem] = []
    while len(chosen) < limit and any(queues):
        for queue in queues:
            if queue and len(chosen) < limit:
                chosen.append(queue.pop(0))
    return chosen


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _plain_call(
    client: ModelClient, request: ChatRequest, key: str | None, log: CaseLog, judge: bool = False
) -> ChatResponse:
    """Calibration pays for every call: no response cache, no cost ceiling."""
    return client.complete(request)


def rate_items(
    settings: Settings,
    clients: ClientPool,
    board: StopBoard,
    items: Sequence[CalibrationItem],
    scenarios: Mapping[str, Scenario],
    judge: ModelConfig,
) -> list[Rated]:
    """Judge every item with `judge` alone, `settings.concurrency` calls at a time."""
    alone = replace(settings, marking_model=judge, marking_models=(judge,))
    helpers = Helpers(alone, clients, board, _plain_call)

    def rate(item: CalibrationItem) -> Rated:
        scenario = scenarios[item.scenario]
        check = next(c for c in scenario.checks if c.criteria and c.criteria.name == item.rubric)
        criteria = check.criteria
        assert criteria is not None
        case = _case(scenario, item.case)
        shown = judged_text(item, check.spec.view)  # only what the rubric grades, as in a run
        verdict = helpers.panel(CaseLog())(criteria, compose(case).text, shown)  # a log nobody reads
        answered = [v for v in verdict.verdicts if isinstance(v, JudgeVerdict)]
        error = None if answered else verdict.summary()
        cost = answered[0].cost_usd if answered else None
        return Rated(item, criteria.hash, gold_passes(item.gold, criteria), verdict.passed, error, cost)

    with ThreadPoolExecutor(max_workers=max(1, settings.concurrency)) as pool:
        return list(pool.map(rate, items))


def _case(scenario: Scenario, code: str) -> Case:
    case = case_by_code(scenario, code)
    if case is None:
        raise KeyError(code)  # check_calibration has already ruled this out
    return case


@dataclass(frozen=True)
class Extracted:
    """One reference reply put to the extractor: its gold labels (the reference answer without its
    `response`) and what the extractor decided (None: no extraction; `error` says why)."""

    scenario: str
    origin: str
    gold: dict[str, object]
    found: dict[str, object] | None
    error: str | None = None


def extraction_items(
    scenarios: Mapping[str, Scenario], references: Mapping[str, References], limit: int | None = None
) -> list[tuple[Scenario, str, str, dict[str, object]]]:
    """(scenario, origin, reply, gold labels) for every reference reply (both sides, their locale
    replies and every transcript side), at most `limit` of them spread over the scenarios."""
    found = []
    for code in sorted(references):
        scenario, refs = scenarios.get(code), references[code]
        if scenario is None:
            continue
        for number, side in enumerate(refs.all_sides):
            gold = {k: v for k, v in side.answer.items() if k != RESPONSE_FIELD}
            for label, reply in side.replies():
                if gold:
                    found.append((scenario, f"{code} {side.kind}#{number}{label}", reply, gold))
    if limit is not None and limit < len(found):
        found = sorted(found, key=lambda f: _digest(f[1]))[:limit]
    return found


def extract_items(
    settings: Settings,
    clients: ClientPool,
    board: StopBoard,
    items: Sequence[tuple[Scenario, str, str, dict[str, object]]],
    info: BenchmarkInfo,
    judge: ModelConfig,
) -> list[Extracted]:
    """Put every reference reply to `judge` as a deployed-layout extraction, as a run would (the
    conversation is the scenario's first case, deployed); a failed extraction is no extraction,
    never a disagreement."""
    alone = replace(settings, marking_model=judge, marking_models=(judge,))
    helpers = Helpers(alone, clients, board, _plain_call)

    def extract(item: tuple[Scenario, str, str, dict[str, object]]) -> Extracted:
        scenario, origin, reply, gold = item
        case = replace(expand(scenario, [""])[0], layout=DEPLOYED)
        try:  # a log nobody reads
            done = helpers.extract(scenario, info, render_messages(compose(case).messages), reply, CaseLog())
        except CallError as exc:
            return Extracted(scenario.code, origin, gold, None, exc.reason)
        return Extracted(scenario.code, origin, gold, dict(done.fields))

    with ThreadPoolExecutor(max_workers=max(1, settings.concurrency)) as pool:
        return list(pool.map(extract, items))
