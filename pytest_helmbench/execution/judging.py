"""Ask the panel of marking models, and confirm a critical failure before the gate counts it.

Every judged check is put to every panel judge; the policy (evaluation/panel.py) combines their votes.
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
from ..evaluation.judge import JudgeError, JudgeVerdict, run_judge
from ..evaluation.panel import JudgeFailure, PanelVerdict, decide
from ..evaluation.pipeline import CaseVerdict
from ..providers.base import ModelClient
from ..providers.chat import CallError, ChatRequest, ChatResponse, ModelRejected, request_key
from ..providers.judge_wire import NONCE_PLACEHOLDER, JudgeMessages, new_nonce
from ..providers.pool import ClientPool
from ..status import Status
from ..suite.model import BenchmarkInfo, Criteria, Scenario
from .budget import StopBoard
from .outcome import Outcome

Call = Callable[[ModelClient, ChatRequest, "str | None", Outcome, bool], ChatResponse]
"""The executor's paid call: (client, request, cache key or None for no cache, outcome, judge?)."""
Asked = dict[str, tuple[Criteria, str, str]]
"""What one case asked the judges: rubric hash -> (rubric, prompt, graded text), for re-judging."""


@dataclass
class JudgePanel:
    """The marking models of a run, asked through the executor's paid call (cache, ceiling, network)."""

    settings: Settings
    clients: ClientPool
    board: StopBoard
    call: Call

    def ask(self, criteria: Criteria, prompt: str, text: str, outcome: Outcome, repeat: int) -> PanelVerdict:
        """Every judge's verdict on `text`, combined by the run's policy."""
        if not self.settings.marking_models:
            raise CallError(
                "no marking model for this judged check: "
                "set marking_model in models.yml or --helmbench-marking-model"
            )
        verdicts: list[JudgeVerdict | JudgeFailure] = []
        for judge in self.settings.marking_models:
            try:
                verdicts.append(self._one(judge, criteria, prompt, text, outcome, repeat))
            except JudgeError as exc:
                verdicts.append(JudgeFailure(judge.id, exc.reason, raw=exc.raw))
        votes = [v.passed if isinstance(v, JudgeVerdict) else None for v in verdicts]
        return PanelVerdict(
            self.settings.judge_policy, tuple(verdicts), decide(self.settings.judge_policy, votes)
        )

    def extract(
        self,
        scenario: Scenario,
        info: BenchmarkInfo,
        conversation: str,
        reply: str,
        outcome: Outcome,
        repeat: int,
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
            response = self.send(judge, messages.messages, extraction_schema(scenario), outcome, repeat)
        except CallError as exc:
            raise ExtractionError(f"extraction could not be made: {exc.reason}", raw=exc.raw) from None
        return read_extraction(scenario, reply, response, judge.id)

    def send(  # noqa: PLR0913  TODO(after merge)
        self,
        helper: ModelConfig,
        messages: Callable[[str], list[dict[str, str]]],
        response_format: dict[str, Any],
        outcome: Outcome,
        repeat: int,
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
            key = request_key(self.clients.endpoint(helper, client), client.api, keyed, repeat)
        else:
            request = replace(request, seed=seed)
        try:
            return self.call(client, request, key, outcome, True)
        except ModelRejected as exc:  # a bad key or credits for the helper: every case that needs it alike
            self.board.stop(helper.id, f"as {role}: {exc.reason}")
            raise

    def _one(  # noqa: PLR0913  TODO(after merge)
        self,
        judge: ModelConfig,
        criteria: Criteria,
        prompt: str,
        text: str,
        outcome: Outcome,
        repeat: int,
        seed: int | None = None,
    ) -> JudgeVerdict:

        def send(messages: JudgeMessages, response_format: dict[str, Any]) -> ChatResponse:
            # The cache key is the request with the nonce left out: the nonce changes, the question not.
            return self.send(judge, messages.messages, response_format, outcome, repeat, seed)

        return run_judge(send, criteria, prompt, text, judge.id)

    def confirm(
        self, scenario: Scenario, verdict: CaseVerdict, outcome: Outcome, repeat: int, asked: Asked
    ) -> dict[str, Any]:
        """Whether a failure resting on judge verdicts alone survives: every panel judge failed it, or
        the single judge fails it again `rejudge` times. A re-judging call that fails leaves the
        failure standing (it is counted, and the error recorded)."""
        failed = [c for c in verdict.checks if c.status is Status.FAILED and c.panel is not None]
        judges = self.settings.marking_models
        if len(judges) > 1:
            unanimous = any(
                c.panel is not None and all(v.passed is False for v in c.panel.verdicts) for c in failed
            )
            return {"k": 0, "by": "panel", "confirmed": unanimous, "verdicts": []}
        k = self.settings.rejudge
        if k == 0:
            return {"k": 0, "by": "none", "confirmed": True, "verdicts": []}
        rubrics = {c.name: c.criteria for c in scenario.checks}
        results: list[bool | None] = []
        errors: list[str] = []
        confirmed = False
        for check in failed:
            criteria = rubrics.get(check.name) or scenario.criteria
            question = asked.get(criteria.hash) if criteria is not None else None
            if question is None:
                continue
            survived = True
            for attempt in range(1, k + 1):
                try:
                    again = self._one(
                        judges[0], *question, outcome, repeat, seed=self._seed(judges[0], attempt)
                    )
                except JudgeError as exc:
                    errors.append(exc.reason)
                    results.append(None)
                    continue
                outcome.judge_cost_usd = (outcome.judge_cost_usd or 0.0) + (again.cost_usd or 0.0)
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
