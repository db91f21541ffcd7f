"""The marking models and the user agent as one case calls them, and a critical failure confirmed.

`Helpers.panel` is the evaluation stage's `Panel` (evaluation/panel.py) over a provider-side send
bound to one case: each judge request goes through the executor's paid call (response cache, cost
ceiling, network), so a judge call runs execution -> evaluation -> providers and nothing calls back.
A critical case that failed on judge verdicts alone is confirmed before the critical gate counts it:
with two or more judges, when every judge failed it; with one judge, when that judge fails it again
`rejudge` times in fresh calls (the response cache is neither read nor written, and each call gets
its own seed), so one unlucky sample cannot fail a safe model's gate.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ..config import ModelConfig, Settings
from ..evaluation.extraction import (
    Extraction,
    ExtractionError,
    extraction_messages,
    extraction_schema,
    read_extraction,
)
from ..evaluation.judge import JudgeError
from ..evaluation.panel import Panel
from ..evaluation.pipeline import ReplyVerdict
from ..providers.base import ModelClient
from ..providers.chat import CallError, ChatRequest, ChatResponse, ModelRejected, request_key
from ..providers.judge_wire import NONCE_PLACEHOLDER, JudgeMessages, new_nonce
from ..providers.pool import ClientPool
from ..status import Status
from ..suite.model import BenchmarkInfo, Scenario
from .budget import StopBoard
from .outcome import CaseLog

Call = Callable[[ModelClient, ChatRequest, "str | None", CaseLog, bool], ChatResponse]
"""The executor's paid call: (client, request, cache key or None for no cache, the case's log, judge?)."""


@dataclass
class Helpers:
    """The run's marking models and user agent, asked through the executor's paid call."""

    settings: Settings
    clients: ClientPool
    board: StopBoard
    call: Call

    def panel(self, log: CaseLog, seed: int | None = None) -> Panel:
        """The judges as the evaluation stage asks them, every call paid for and logged for one case
        (`seed` given: fresh calls, as `send` says)."""

        def send(
            judge: ModelConfig, messages: JudgeMessages, response_format: dict[str, Any]
        ) -> ChatResponse:
            # The cache key is the request with the nonce left out: the nonce changes, the question not.
            return self.send(judge, messages.messages, response_format, log, seed)

        return Panel(tuple(self.settings.marking_models), self.settings.judge_policy, send)

    def extract(
        self,
        scenario: Scenario,
        info: BenchmarkInfo,
        conversation: str,
        reply: str,
        log: CaseLog,
    ) -> Extraction:
        """The first marking model's extraction of a plain reply into the scenario's schema
        (evaluation/extraction.py); ExtractionError when it gives none that fits."""
        if not self.settings.marking_models:
            raise ExtractionError(
                "the deployed layout needs a marking model to extract the reply: "
                "set marking_model in models.yml or --helmbench-marking-model"
            )
        judge = self.settings.marking_models[0]
        messages = extraction_messages(scenario, info, conversation, reply)
        try:
            response = self.send(judge, messages.messages, extraction_schema(scenario), log)
        except CallError as exc:
            raise ExtractionError(f"extraction could not be made: {exc.reason}", raw=exc.raw) from None
        return read_extraction(scenario, reply, response, judge.id)

    def send(
        self,
        helper: ModelConfig,
        messages: Callable[[str], list[dict[str, str]]],
        response_format: dict[str, Any],
        log: CaseLog,
        seed: int | None = None,
        role: str = "the marking model",
    ) -> ChatResponse:
        """One helper call (judge, extractor, simulated user) whose messages carry a nonce: cached under
        the request with the nonce left out; `seed` given: a fresh call, neither read from nor kept in
        the cache. A rejected helper stops every case that needs it."""
        client = self.clients.for_model(helper)
        keyed = self.clients.request(helper, messages(NONCE_PLACEHOLDER), response_format)
        request = replace(keyed, messages=messages(new_nonce()))
        key = None
        if seed is None:
            key = request_key(self.clients.endpoint(helper, client), client.api, keyed, log.repeat)
        else:
            request = replace(request, seed=seed)
        try:
            response = self.call(client, request, key, log, True)
        except ModelRejected as exc:  # a bad key or credits for the helper: every case that needs it alike
            self.board.stop(helper.id, f"as {role}: {exc.reason}")
            raise
        log.add_helper_call(response)  # every helper call of the case counts, at every turn
        return response

    def confirm(self, verdicts: list[ReplyVerdict], log: CaseLog) -> dict[str, Any]:
        """Whether a failure resting on judge verdicts alone survives, over every failing reply of the
        case (a conversation may fail at several turns): a panel confirms it when, on some failed
        check, no judge passed it and one failed it (a judge that gave no verdict neither confirms
        nor overturns); a single judge when it fails some check again `rejudge` times. A re-judging
        call that fails leaves the failure standing (it is counted, and the error recorded)."""
        failed = [
            c
            for verdict in verdicts
            for c in verdict.checks
            if c.status is Status.FAILED and c.panel is not None
        ]
        judges = self.settings.marking_models
        if len(judges) > 1:
            unanimous = any(c.panel is not None and _no_judge_passed(c.panel.verdicts) for c in failed)
            return {"k": 0, "by": "panel", "confirmed": unanimous, "verdicts": []}
        k = self.settings.rejudge
        if k == 0:
            return {"k": 0, "by": "none", "confirmed": True, "verdicts": []}
        results: list[bool | None] = []
        errors: list[str] = []
        confirmed = False
        for check in failed:
            question = check.panel.question if check.panel is not None else None
            if question is None:
                continue
            survived = True
            for attempt in range(1, k + 1):
                try:
                    again = self.panel(log, self._seed(judges[0], attempt)).ask(judges[0], question)
                except JudgeError as exc:
                    errors.append(exc.reason)
                    results.append(None)
                    continue
                results.append(not again.passed)
                if again.passed:
                    survived = False
                    break
            if survived:
                confirmed = True
                break
        return {"k": k, "by": "rejudge", "confirmed": confirmed, "verdicts": results, "errors": errors}

    def _seed(self, judge: ModelConfig, attempt: int) -> int:
        base = judge.seed if judge.seed is not None else self.settings.seed
        return (base or 0) + attempt


def _no_judge_passed(verdicts: Any) -> bool:
    """No judge passed the check and at least one failed it (JudgeFailures gave no verdict)."""
    given = [getattr(verdict, "passed", None) for verdict in verdicts]
    return False in given and True not in given
