"""The marking models and the user agent as one case calls them.

`Helpers.panel` is the evaluation stage's `Panel` (evaluation/panel.py) over a provider-side send
bound to one case: each judge request goes through the executor's paid call (response cache, cost
ceiling, network), so a judge call runs execution -> evaluation -> providers and nothing calls back.
In a critical scenario a lone judge votes `--helmbench-critical-votes` times on every judged check
(the majority rules, pass or fail alike): its first call is the one any scenario makes, each later
vote carries its own seed (`seed+1`, `seed+2`, …) and is cached under its own key, so a rerun from
the cache replays the same votes.
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
from ..evaluation.panel import Panel
from ..providers.base import ModelClient
from ..providers.chat import CallError, ChatRequest, ChatResponse, ModelRejected, request_key
from ..providers.judge_wire import NONCE_PLACEHOLDER, JudgeMessages, new_nonce
from ..providers.pool import ClientPool
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

    def panel(self, log: CaseLog, votes: int = 1) -> Panel:
        """The judges as the evaluation stage asks them, every call paid for and logged for one case;
        `votes`: a lone judge's calls per verdict (the critical scenarios' majority)."""

        def send(
            judge: ModelConfig, messages: JudgeMessages, response_format: dict[str, Any], vote: int = 0
        ) -> ChatResponse:
            # The cache key is the request with the nonce left out: the nonce changes, the question not.
            seed = self._seed(judge, vote) if vote else None
            return self.send(judge, messages.messages, response_format, log, seed)

        return Panel(tuple(self.settings.marking_models), self.settings.judge_policy, send, votes)

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
        the request with the nonce left out; `seed` given: the request carries it (a judge's later vote),
        so it is cached apart. A rejected helper stops every case that needs it."""
        client = self.clients.for_model(helper)
        keyed = self.clients.request(helper, messages(NONCE_PLACEHOLDER), response_format)
        if seed is not None:
            keyed = replace(keyed, seed=seed)
        request = replace(keyed, messages=messages(new_nonce()))
        key = request_key(self.clients.endpoint(helper, client), client.api, keyed, log.repeat)
        try:
            response = self.call(client, request, key, log, True)
        except ModelRejected as exc:  # a bad key or credits for the helper: every case that needs it alike
            self.board.stop(helper.id, f"as {role}: {exc.reason}")
            raise
        log.add_helper_call(response)  # every helper call of the case counts, at every turn
        return response

    def _seed(self, judge: ModelConfig, attempt: int) -> int:
        base = judge.seed if judge.seed is not None else self.settings.seed
        return (base or 0) + attempt
