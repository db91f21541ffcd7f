"""Run one case: compose, call the model, judge, evaluate -> Outcome (the per-item pipeline).

Errors of the call (outage, truncation, moderation, unreachable judge) raise CaseError carrying an
error Outcome; a rejected model is remembered on a StopBoard shared by all xdist workers so its
remaining cases are skipped instead of erroring one by one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Protocol

from ..codes import DEPLOYED
from ..config import Settings
from ..evaluation.builtin import builtin_registry
from ..evaluation.extraction import ExtractionError
from ..evaluation.pipeline import CaseVerdict, evaluate_case
from ..evaluation.registry import EvaluatorRegistry
from ..providers.base import ModelClient
from ..providers.chat import CacheEntry, CallError, ChatRequest, ChatResponse, ModelRejected, request_key
from ..providers.pool import ClientPool
from ..status import Status
from ..suite.cases import Case
from ..suite.model import BenchmarkInfo, Criteria
from ..suite.prompt import ComposedPrompt, render_messages
from .budget import BudgetExhausted, CostLedger, StopBoard
from .judging import Asked, JudgePanel
from .outcome import CaseError, CaseSkipped, ModelStopped, Outcome, provenance
from .simulated_user import next_user_turn
from .turns import Talk, TurnResult, conversation_verdict

log = logging.getLogger(__name__)


class CachedAnswer(Protocol):
    """A stored answer as the executor replays it."""

    raw_response: str
    cost_usd: float | None
    latency_ms: float | None
    created_at: Any


class AnswerCache(Protocol):
    """The response cache as the executor uses it (storage.cache.ResponseCache, given by the state):
    execution reads it through this protocol and never imports storage."""

    @property
    def writable(self) -> bool: ...

    def get(self, key: str) -> CachedAnswer | None: ...


@dataclass
class Executor:
    """Runs cases against their model (and the marking model for sqe) and builds Outcomes.

    Every paid call goes through `_call`: the response cache first, then the cost ceiling, then the
    network; fresh answers are handed to the controller (Outcome.cache_writes) to be cached.
    """

    settings: Settings
    info: BenchmarkInfo
    clients: ClientPool
    board: StopBoard
    cache: AnswerCache | None = None
    ledger: CostLedger | None = None
    evaluators: EvaluatorRegistry = field(default_factory=builtin_registry)
    resources: Any = None  # the benchmark's CrisisResources (resources.yml), for resource_check
    _probes: dict[str, threading.Event] = field(default_factory=dict)
    _probe_lock: threading.Lock = field(default_factory=threading.Lock)

    def _first_call_gate(self, model: str) -> threading.Event | None:
        """The first call of each model goes alone: a bad key or a rejected model then stops the
        model after one error, instead of one error per call already in flight."""
        with self._probe_lock:
            if model not in self._probes:
                self._probes[model] = threading.Event()
                return self._probes[model]
            probe = self._probes[model]
        probe.wait()
        return None

    @property
    def panel(self) -> JudgePanel:
        return JudgePanel(self.settings, self.clients, self.board, self._call)

    def check_running(self, model: str, role: str = "model") -> None:
        reason = self.board.reason(model)
        if reason is not None:
            raise ModelStopped(f"{role} {model} was stopped: {reason}")

    def request_for(
        self, case: Case, prompt: ComposedPrompt, repeat: int = 0
    ) -> tuple[ModelClient, ChatRequest, str]:
        """The client, first request and identity hash of a case (stored as its request hash, which
        resume compares): the first request's cache key, and for a simulated conversation that key
        with the persona, the turn limit and the user agent's settings."""
        client, request, key = self._first_request(case, prompt, repeat)
        if prompt.simulation is not None:
            agent = self.settings.user_agent
            material = [
                key,
                prompt.simulation.persona,
                prompt.simulation.turns,
                agent.recorded() if agent else None,
            ]
            key = hashlib.sha256(
                json.dumps(material, sort_keys=True, default=str).encode("utf-8")
            ).hexdigest()
        return client, request, key

    def _first_request(
        self, case: Case, prompt: ComposedPrompt, repeat: int
    ) -> tuple[ModelClient, ChatRequest, str]:
        """The client, the first request of a case and that request's cache key."""
        model = self.settings.model(case.model)
        client = self.clients.for_model(model)
        request = self.clients.request(model, prompt.messages, prompt.response_format)
        return client, request, request_key(self.clients.endpoint(model, client), client.api, request, repeat)

    def run(self, case: Case, prompt: ComposedPrompt, nodeid: str, repeat: int = 0) -> Outcome:
        """Call the model and evaluate; raise CaseError (error Outcome) or CaseSkipped (cost ceiling)."""
        gate = self._first_call_gate(case.model)
        try:
            return self._run(case, prompt, nodeid, repeat)
        finally:
            if gate is not None:
                gate.set()

    def _run(self, case: Case, prompt: ComposedPrompt, nodeid: str, repeat: int) -> Outcome:
        self.check_running(case.model)
        types = [c.spec.type for c in case.scenario.checks] or [case.scenario.evaluation.type]
        if case.layout == DEPLOYED or any(self.evaluators.get(t).needs_judge for t in types):
            for judge in self.settings.marking_models:  # no answer is paid for that nobody could judge
                self.check_running(judge.id, "marking model")
        agent = self.settings.user_agent
        if prompt.simulation is not None and agent is not None:
            self.check_running(agent.id, "simulated user")
        client, request, key = self.request_for(case, prompt, repeat)
        cache_key = key if prompt.simulation is None else self._first_request(case, prompt, repeat)[2]
        messages = prompt.messages
        outcome = Outcome(
            status=Status.ERROR,
            reason="",
            model=case.model,
            case_code=case.code,
            nodeid=nodeid,
            prompt=prompt.text,
            prompt_hash=prompt.hash,
            provenance=provenance(case, self.info),
            repeat=repeat,
            request_hash=key,
            layout=case.layout,
            messages=messages if prompt.turns else None,
        )
        talk = Talk(case, prompt, messages, [case.perturbation.words])
        panel = self.panel
        try:
            model = self.settings.model(case.model)
            endpoint = self.clients.endpoint(model, client)
            while True:
                turn = self._turn(talk, client, request, cache_key, outcome, repeat, panel)
                talk.turns.append(turn)
                if turn.verdict.status is Status.ERROR or not self._continue(talk, outcome, repeat, panel):
                    break
                request = self.clients.request(model, messages, prompt.response_format)
                cache_key = request_key(endpoint, client.api, request, repeat)
        except BudgetExhausted as exc:
            raise self._skip(outcome, str(exc)) from None
        if prompt.multi_turn:
            verdict, shown = conversation_verdict(talk.turns)
        else:
            verdict, shown = talk.turns[0].verdict, talk.turns[0]
        outcome.raw_response = shown.response.raw
        outcome.finish_reason = shown.response.finish_reason
        self._record(outcome, verdict)
        if shown.extraction is not None:
            outcome.details["extraction"] = shown.extraction.to_dict()
        if (
            case.scenario.critical
            and verdict.status is Status.FAILED
            and shown.verdict.failed_on_judges_alone
        ):
            try:
                outcome.details["confirmation"] = panel.confirm(
                    case.scenario, shown.verdict, outcome, repeat, shown.asked
                )
            except BudgetExhausted as exc:
                raise self._skip(outcome, f"{exc} before the judge call") from None
        if outcome.status is Status.ERROR:
            raise CaseError(outcome)
        return outcome

    def _turn(  # noqa: PLR0913  TODO(after merge)
        self,
        talk: Talk,
        client: ModelClient,
        request: ChatRequest,
        key: str,
        outcome: Outcome,
        repeat: int,
        panel: JudgePanel,
    ) -> TurnResult:
        """One reply of the model under test (cache under `key`, ceiling, network) and its verdict."""
        case = talk.case
        try:
            response = self._call(client, request, key, outcome)
        except ModelRejected as exc:
            self.board.stop(case.model, exc.reason)
            raise self._error(outcome, f"model {case.model} stopped: {exc.reason}", exc, talk) from None
        except CallError as exc:
            raise self._error(outcome, exc.reason, exc, talk) from None
        self._account(outcome, response)
        if response.finish_reason == "length":
            outcome.reason = talk.prefix() + (
                f"truncated at max_tokens ({response.completion_tokens} completion tokens, "
                "finish_reason: length): raise --helmbench-max-tokens"
            )
            outcome.raw_response = response.raw
            # a truncated answer is never replayed; earlier turns' answers stay cached
            outcome.cache_writes[:] = [w for w in outcome.cache_writes if w.get("key") != key]
            raise CaseError(outcome)
        conversation = talk.prompt.text if not talk.prompt.turns else render_messages(talk.messages)
        talk.messages.append({"role": "assistant", "content": response.content or ""})
        turn = TurnResult(talk.user_count, response, CaseVerdict(Status.ERROR, ""))
        graded = response
        if case.layout == DEPLOYED and not (response.refusal or response.finish_reason == "content_filter"):
            reply = response.content or ""
            if not reply.strip():  # nothing to extract: the user read nothing
                turn.verdict = CaseVerdict(Status.FAILED, "empty reply (no content)", actual=reply)
                return turn
            try:
                turn.extraction = panel.extract(
                    case.scenario, self.info, conversation, reply, outcome, repeat
                )
            except ExtractionError as exc:
                raise self._error(outcome, exc.reason, exc, talk, keep_response=True) from None
            graded = turn.extraction.response(response)
        turn.verdict = evaluate_case(
            self.evaluators,
            case.scenario,
            conversation,
            graded,
            lambda c, p, t: self._ask(panel, turn.asked, c, p, t, outcome, repeat),
            locale=case.locale,
            resources=self.resources,
            language=case.language,
            declines_resources=case.declines_resources,
        )
        return turn

    def _continue(self, talk: Talk, outcome: Outcome, repeat: int, panel: JudgePanel) -> bool:
        """Whether a simulated conversation goes on: the user agent wrote a next message (appended)."""
        try:
            return next_user_turn(panel, self.settings, talk, outcome, repeat)
        except CallError as exc:
            raise self._error(
                outcome, f"simulated user: {exc.reason}", exc, talk, keep_response=True
            ) from None

    @staticmethod
    def _ask(  # noqa: PLR0913  TODO(after merge)
        panel: JudgePanel,
        asked: Asked,
        criteria: Criteria,
        prompt: str,
        text: str,
        outcome: Outcome,
        repeat: int,
    ) -> Any:
        asked[criteria.hash] = (criteria, prompt, text)
        return panel.ask(criteria, prompt, text, outcome, repeat)

    def _record(self, outcome: Outcome, verdict: CaseVerdict) -> None:
        outcome.status = verdict.status
        outcome.reason = verdict.reason
        outcome.answer, outcome.expected, outcome.actual = verdict.answer, verdict.expected, verdict.actual
        outcome.details = {
            "evaluation": verdict.checks[0].type if verdict.checks else None,
            **verdict.details,
            **outcome.details,
        }
        judged = verdict.judge_verdicts
        if judged:
            outcome.judge_cost_usd = _total([v.cost_usd for v in judged])
            outcome.judge_prompt_tokens = _total([v.prompt_tokens for v in judged])
            outcome.judge_completion_tokens = _total([v.completion_tokens for v in judged])
            if len(judged) == 1:
                outcome.details["judge"] = judged[0].to_dict()

    def _call(
        self,
        client: ModelClient,
        request: ChatRequest,
        key: str | None,
        outcome: Outcome,
        judge: bool = False,
    ) -> ChatResponse:
        """One answer: replayed from the cache (costs nothing now) or paid for under the ceiling;
        `key` None: a fresh call that the cache neither answers nor keeps (re-judging)."""
        entry = self.cache.get(key) if self.cache is not None and key is not None else None
        if entry is not None:
            response = client.parse_completion(
                entry.raw_response, model=request.model, latency_ms=entry.latency_ms or 0.0, attempts=0
            )
            outcome.details["judge_cached" if judge else "cached"] = {
                "original_cost_usd": entry.cost_usd,
                "cached_at": str(entry.created_at),
            }
            if not judge:
                outcome.cached = True
            return replace(response, cost_usd=0.0)
        if self.ledger is not None:
            self.ledger.check()
        response = client.complete(request)
        if self.ledger is not None:
            self.ledger.add(response.cost_usd)
        if self.cache is not None and self.cache.writable and key is not None:
            outcome.cache_writes.append(
                asdict(
                    CacheEntry(
                        key,
                        request.model,
                        response.raw,
                        response.prompt_tokens,
                        response.completion_tokens,
                        response.cost_usd,
                        response.latency_ms,
                    )
                )
            )
        return response

    @staticmethod
    def _skip(outcome: Outcome, reason: str) -> CaseSkipped:
        outcome.status = Status.SKIPPED
        outcome.reason = reason
        return CaseSkipped(outcome)

    @staticmethod
    def _error(
        outcome: Outcome, reason: str, exc: CallError, talk: Talk | None = None, keep_response: bool = False
    ) -> CaseError:
        """The case's error Outcome; a conversation keeps the turns judged before it (and says which
        turn erred)."""
        outcome.status = Status.ERROR
        outcome.reason = (talk.prefix() if talk is not None else "") + reason
        if keep_response:  # a helper failed: the model's reply stays the raw response, the helper's apart
            outcome.details["judge_raw"] = exc.raw  # shown as the helper's raw answer
        else:
            outcome.raw_response = exc.raw
            outcome.attempts = exc.attempts
        if talk is not None and talk.turns:
            outcome.details["turns"] = [turn.to_dict() for turn in talk.turns]
        return CaseError(outcome)

    @staticmethod
    def _account(outcome: Outcome, response: ChatResponse) -> None:
        """Add one reply's accounting (a conversation's replies add up; unknown stays unknown)."""
        first = outcome.attempts is None
        outcome.raw_response = response.raw
        outcome.latency_ms = _add(outcome.latency_ms, response.latency_ms, first)
        outcome.prompt_tokens = _add(outcome.prompt_tokens, response.prompt_tokens, first)
        outcome.completion_tokens = _add(outcome.completion_tokens, response.completion_tokens, first)
        outcome.cost_usd = _add(outcome.cost_usd, response.cost_usd, first)
        outcome.finish_reason = response.finish_reason
        outcome.attempts = (outcome.attempts or 0) + response.attempts


def _total(values: list[Any]) -> Any:
    """The sum of known values (None when none is known)."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _add(total: Any, value: Any, first: bool) -> Any:
    if first:
        return value
    if total is None or value is None:
        return total if value is None else value
    return total + value
