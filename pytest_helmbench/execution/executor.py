"""Run one case: compose, call the model, judge, evaluate -> Outcome (the per-item pipeline).

Errors of the call (outage, truncation, moderation, unreachable judge) raise CaseError carrying an
error Outcome; a rejected model is remembered on a StopBoard shared by all xdist workers so its
remaining cases are skipped instead of erroring one by one. While a case runs, what its calls did
is gathered in a CaseLog; the case's Outcome is built from it once, where the case ends.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from typing import Any, Protocol

from ..codes import DEPLOYED
from ..config import Settings
from ..errors import HelmbenchError
from ..evaluation.builtin import builtin_registry
from ..evaluation.extraction import ExtractionError, nothing_to_extract, reply_alone
from ..evaluation.pipeline import CaseFacts, ReplyVerdict, evaluate_case
from ..evaluation.registry import EvaluatorRegistry
from ..providers.base import ModelClient
from ..providers.chat import (
    CacheEntry,
    CallError,
    ChatRequest,
    ChatResponse,
    ModelRejected,
    Pricing,
    request_key,
)
from ..providers.pool import ClientPool
from ..providers.ratelimit import chained
from ..status import Status
from ..suite.cases import Case
from ..suite.model import BenchmarkInfo
from ..suite.prompt import ComposedPrompt, render_messages, with_guidance
from .activity import Activity
from .attack import judged_stop
from .budget import BudgetExhausted, CostLedger, StopBoard
from .judging import Helpers
from .outcome import CaseError, CaseLog, CaseSkipped, ModelStopped, Outcome, provenance
from .sheet import ReplySheet, case_sheet, verdict_sheet
from .simulated_user import judge_while_user_writes, next_user_turn
from .turns import JudgedReply, Talk, conversation_verdict, whole_checks, with_whole

log = logging.getLogger(__name__)

UNPRICED_CEILING = "--helmbench-max-cost cannot be kept for it"


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

    def keep(self, entry: dict[str, Any]) -> bool:
        """Store one fresh answer now; False when it could not be (the Result then carries it)."""
        ...


@dataclass(frozen=True)
class ReplyRequest:
    """One request for a reply of the model under test: its client, the request, its cache key."""

    client: ModelClient
    request: ChatRequest
    key: str


@dataclass
class Executor:
    """Runs cases against their model (and the marking model for sqe) and builds Outcomes.

    Every paid call goes through `_call`: the response cache first, then the cost ceiling, then the
    network; fresh answers are handed to the controller (Outcome.cache_writes) to be cached with the
    Result, except a conversation's, each kept as it completes (a resume replays them).
    """

    settings: Settings
    info: BenchmarkInfo
    clients: ClientPool
    board: StopBoard
    cache: AnswerCache | None = None
    ledger: CostLedger | None = None
    evaluators: EvaluatorRegistry = field(default_factory=builtin_registry)
    resources: Any = None  # the benchmark's CrisisResources (resources.yml), for resource_check
    activity: Activity = field(default_factory=Activity)  # each running case's step (the terminal's)
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
    def helpers(self) -> Helpers:
        return Helpers(self.settings, self.clients, self.board, self._call)

    def check_running(self, model: str, role: str = "model") -> None:
        reason = self.board.reason(model)
        if reason is not None:
            raise ModelStopped(f"{role} {model} was stopped: {reason}")

    def request_for(
        self, case: Case, prompt: ComposedPrompt, repeat: int = 0
    ) -> tuple[ModelClient, ChatRequest, str]:
        """The client, first request and identity hash of a case (stored as its request hash, which
        resume compares): the first request's cache key, for a live script that key with every user
        turn and its guidance, and for a simulated conversation that key with the persona, the turn
        limit and the user agent's settings."""
        client, request, key = self._first_request(case, prompt, repeat)
        if prompt.live:  # every fixed user turn decides what is asked after the first reply
            material = [key, [[turn.text, turn.expect] for turn in prompt.live]]
            key = hashlib.sha256(json.dumps(material, sort_keys=True).encode("utf-8")).hexdigest()
        elif prompt.simulation is not None:
            agent = self.settings.user_agent
            material = [
                key,
                prompt.simulation.persona,
                prompt.simulation.turns,
                agent.recorded() if agent else None,
            ]
            if prompt.simulation.attack is not None:
                material.append(repr(prompt.simulation.attack))
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
        self.activity.doing(
            nodeid, "waiting for the model's first call" if self._probing(case.model) else "starting"
        )
        gate = self._first_call_gate(case.model)
        try:
            return self._run(case, prompt, nodeid, repeat)
        finally:
            self.activity.done(nodeid)
            if gate is not None:
                gate.set()

    def _run(self, case: Case, prompt: ComposedPrompt, nodeid: str, repeat: int) -> Outcome:
        self._check_everyone_running(case, prompt)
        client, request, key = self.request_for(case, prompt, repeat)
        conversation = prompt.simulation is not None or bool(prompt.live)
        cache_key = self._first_request(case, prompt, repeat)[2] if conversation else key
        messages = prompt.messages
        start = {
            "model": case.model,
            "case_code": case.code,
            "nodeid": nodeid,
            "prompt": prompt.text,
            "prompt_hash": prompt.hash,
            "provenance": provenance(case, self.info),
            "request_hash": key,
            "layout": case.layout,
            "messages": messages if prompt.turns else None,
        }
        log = CaseLog(start, repeat, conversation=prompt.multi_turn)
        talk = Talk(case, prompt, messages, [case.perturbation.words])
        helpers = self.helpers
        try:
            with chained(conversation):  # a chain of turns: its calls go first (providers/ratelimit.py)
                self._converse(talk, ReplyRequest(client, request, cache_key), log, helpers)
        except BudgetExhausted as exc:
            if not _failed(talk):
                raise CaseSkipped(log.outcome(Status.SKIPPED, str(exc))) from None
            return self._ended(talk, log, after=str(exc))
        except CaseError as exc:
            if not _failed(talk):
                raise
            return self._ended(talk, log, after=exc.outcome.reason)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # pytest-timeout's interruption, say: a failed reply still fails
            if not _failed(talk):
                raise
            return self._ended(talk, log, after=f"{type(exc).__name__}: {exc}")
        return self._ended(talk, log)

    def _check_everyone_running(self, case: Case, prompt: ComposedPrompt) -> None:
        """The model, and the judges and user agent the case needs, are not stopped: no answer is paid
        for that nobody could judge."""
        self.check_running(case.model)
        if case.layout == DEPLOYED or self.evaluators.needs_judge(case.scenario):
            for judge in self.settings.marking_models:
                self.check_running(judge.id, "marking model")
        agent = self.settings.user_agent
        if prompt.simulation is not None and agent is not None:
            self.check_running(agent.id, "simulated user")

    def _converse(self, talk: Talk, turn_request: ReplyRequest, log: CaseLog, helpers: Helpers) -> None:
        """Every reply of the case, each judged, until one errs or the conversation ends."""
        model = self.settings.model(talk.case.model)
        client = turn_request.client
        endpoint = self.clients.endpoint(model, client)
        simulation = talk.prompt.simulation
        ahead = simulation is not None and simulation.attack is None and not talk.prompt.live
        while True:
            self._step(talk, log, "the model's reply")
            judge = self._turn(talk, turn_request, log, helpers)
            if ahead:
                turn, go_on = judge_while_user_writes(judge, helpers, self.settings, talk, log)
            else:
                turn, go_on = judge(), partial(next_user_turn, helpers, self.settings, talk, log)
            if turn.verdict.status is not Status.ERROR:
                turn = self._stop_check(talk, turn, log, helpers)
            talk.turns.append(turn)
            if turn.verdict.status is Status.ERROR:
                return  # a message the user agent wrote meanwhile is left out, as if never asked
            reached = turn.stop is not None and turn.stop["reached"]  # an attacker's goal: it ends here
            if reached or not self._continue(talk, log, go_on):  # ended: the checks asked once, over it all
                self._step(talk, log, "the whole conversation's checks")
                talk.whole = whole_checks(self.evaluators, talk, helpers.panel(log, self._votes(talk.case)))
                return
            request = self.clients.request(model, talk.messages, talk.prompt.response_format)
            key = request_key(endpoint, client.api, request, log.repeat)
            turn_request = ReplyRequest(client, request, key)

    def _step(self, talk: Talk, log: CaseLog, what: str) -> None:
        """Note what the case is doing (execution/activity.py), by turn in a conversation."""
        turn = f"turn {len(talk.turns) + 1}: " if talk.prompt.multi_turn else ""
        self.activity.doing(log.start["nodeid"], turn + what)

    def _probing(self, model: str) -> bool:
        """Another case is making this model's first call (the others wait for it)."""
        with self._probe_lock:
            probe = self._probes.get(model)
        return probe is not None and not probe.is_set()

    def _ended(self, talk: Talk, log: CaseLog, after: str | None = None) -> Outcome:
        """The case's Outcome from its judged replies (in a critical scenario each judged verdict is
        already its judge's majority: the gate reads it as it stands); CaseError when it ended in an
        error. `after`: what stopped a conversation after one of its replies had failed — the case
        fails, and the error is recorded beside the failure."""
        if talk.prompt.multi_turn or after is not None:
            verdict, shown = conversation_verdict(talk.turns)
        else:
            verdict, shown = talk.turns[0].verdict, talk.turns[0]
        verdict = with_whole(verdict, talk.whole)
        ruled = self._ruled(log, verdict, shown)
        weight = self.info.scenario_weight(talk.case.scenario)
        sheet = case_sheet(talk.case.scenario, [turn.sheet for turn in talk.turns], talk.whole, weight)
        if sheet is not None:
            ruled["details"]["sheet"] = sheet.to_dict()
        if after is not None:
            ruled["details"]["error_after_failure"] = after
        votes = self._votes(talk.case)
        if votes > 1 and any(turn.verdict.judge_verdicts for turn in talk.turns):
            ruled["details"]["critical_votes"] = votes  # each judged check: the majority of this many calls
        outcome = log.outcome(verdict.status, verdict.reason, ruled)
        if outcome.status is Status.ERROR:
            raise CaseError(outcome)
        return outcome

    def _turn(
        self, talk: Talk, turn_request: ReplyRequest, log: CaseLog, helpers: Helpers
    ) -> Callable[[], JudgedReply]:
        """One reply of the model under test (cache under the request's key, ceiling, network), and
        what judges it, to run now or beside the user agent's next message (judge_while_user_writes)."""
        case = talk.case
        try:
            response = self._call(turn_request.client, turn_request.request, turn_request.key, log)
        except ModelRejected as exc:
            self.board.stop(case.model, exc.reason)
            raise self._error(log, f"model {case.model} stopped: {exc.reason}", exc, talk) from None
        except CallError as exc:
            raise self._error(log, exc.reason, exc, talk) from None
        _account(log, response)
        if response.finish_reason == "length":
            reason = talk.prefix() + (
                f"truncated at max_tokens ({response.completion_tokens} completion tokens, "
                "finish_reason: length): raise --helmbench-max-tokens"
            )
            # a truncated answer was not cached (_keep); earlier turns' answers stay cached
            kept = {"details": {**log.replayed, "turns": [turn.to_dict() for turn in talk.turns]}}
            raise CaseError(log.outcome(Status.ERROR, reason, kept if talk.turns else None))
        conversation = talk.prompt.text if not talk.prompt.turns else render_messages(talk.messages)
        talk.messages.append({"role": "assistant", "content": response.content or ""})
        index = talk.user_count
        graded, extraction = response, None
        if case.layout == DEPLOYED and not (response.refusal or response.finish_reason == "content_filter"):
            reply = response.content or ""
            if not reply.strip():  # nothing to extract: the user read nothing
                empty = ReplyVerdict(Status.FAILED, "empty reply (no content)", actual=reply)
                return partial(JudgedReply, index, response, empty, sheet=self._sheet(case, empty))
            if nothing_to_extract(case.scenario):  # the schema is the reply alone: no call
                graded = reply_alone(reply).response(response)
            else:
                try:
                    self._step(talk, log, "extracting the reply's labels")
                    extraction = helpers.extract(case.scenario, self.info, conversation, reply, log)
                except ExtractionError as exc:
                    raise self._error(log, exc.reason, exc, talk, keep_response=True) from None
                graded = extraction.response(response)
        live = talk.prompt.live
        guidance = live[index - 1].expect if 0 < index <= len(live) else None

        def judged() -> JudgedReply:
            self._step(talk, log, "checks and judge calls")
            verdict = evaluate_case(
                self.evaluators,
                with_guidance(case.scenario, guidance),  # a live script's `## Expect` for this turn
                conversation,
                graded,
                helpers.panel(log, self._votes(case)),
                CaseFacts(case.locale, case.language, case.declines_resources, self.resources),
            )
            sheet = self._sheet(case, verdict)
            return JudgedReply(
                index, response, verdict, extraction, sheet, prompt=conversation, graded=graded
            )

        return judged

    def _sheet(self, case: Case, verdict: ReplyVerdict) -> ReplySheet:
        """The reply's harm and care (scoring version 3), weighted as benchmark.yml weighs its scenario."""
        return verdict_sheet(case.scenario, verdict, self.info.scenario_weight(case.scenario))

    def _votes(self, case: Case) -> int:
        """A lone judge's calls per judged verdict: --helmbench-critical-votes in a critical scenario
        (a panel of judges asks each once: its policy decides), else one."""
        critical = case.scenario.critical and len(self.settings.marking_models) == 1
        return self.settings.critical_votes if critical else 1

    def _stop_check(self, talk: Talk, turn: JudgedReply, log: CaseLog, helpers: Helpers) -> JudgedReply:
        """An attacker's `stop_when` on the reply (execution/attack.py); a judge without a verdict
        makes the case an error (the reply is kept among its turns)."""
        try:
            return judged_stop(talk, turn, helpers.panel(log, self._votes(talk.case)))
        except CallError as exc:  # JudgeError, NoVerdict
            talk.turns.append(turn)
            raise self._error(log, f"stop_when: {exc.reason}", exc, talk, keep_response=True) from None

    def _continue(self, talk: Talk, log: CaseLog, go_on: Callable[[], bool]) -> bool:
        """Whether the conversation goes on: `go_on` appended a next user message (the script's, or the
        user agent's: asked now, or already written while the reply was judged)."""
        self._step(talk, log, "the simulated user's next message")
        try:
            return go_on()
        except CallError as exc:
            raise self._error(log, f"simulated user: {exc.reason}", exc, talk, keep_response=True) from None

    @staticmethod
    def _ruled(log: CaseLog, verdict: ReplyVerdict, shown: JudgedReply) -> dict[str, Any]:
        """What the verdict decides of the Outcome (answer, details, the judges' tokens), shown by the
        reply it is reported by; the judge cost becomes the judges' verdicts' total."""
        details = {
            "evaluation": verdict.checks[0].type if verdict.checks else None,
            **verdict.details,
            **log.replayed,
        }
        ruled: dict[str, Any] = {
            "answer": verdict.answer,
            "expected": verdict.expected,
            "actual": verdict.actual,
            "details": details,
            "raw_response": shown.response.raw,
            "finish_reason": shown.response.finish_reason,
        }
        judged = verdict.judge_verdicts
        if len(judged) == 1:
            details["judge"] = judged[0].to_dict()
        if shown.extraction is not None:
            details["extraction"] = shown.extraction.to_dict()
        return ruled

    def _call(
        self,
        client: ModelClient,
        request: ChatRequest,
        key: str | None,
        log: CaseLog,
        judge: bool = False,
    ) -> ChatResponse:
        """One answer: replayed from the cache (costs nothing now) or paid for under the ceiling;
        `key` None: a call that the cache neither answers nor keeps."""
        entry = self.cache.get(key) if self.cache is not None and key is not None else None
        if entry is not None:
            response = client.parse_completion(
                entry.raw_response, model=request.model, latency_ms=entry.latency_ms or 0.0, attempts=0
            )
            log.replayed["judge_cached" if judge else "cached"] = {
                "original_cost_usd": entry.cost_usd,
                "cached_at": str(entry.created_at),
            }
            if not judge:
                log.cached = True
            return replace(response, cost_usd=0.0)
        if self.ledger is not None:
            self.ledger.check()
        response = client.complete(request)
        if self.ledger is not None:
            self._charge(request, response)
        if self.cache is not None and self.cache.writable and key is not None:
            self._keep(log, key, request, response)
        return response

    def _keep(self, log: CaseLog, key: str, request: ChatRequest, response: ChatResponse) -> None:
        """Cache a fresh answer: a conversation's now (a kill before its Result then loses none of
        its paid turns), any other with its Result. An answer cut off at max_tokens is never cached:
        a rerun asks again."""
        if response.finish_reason == "length":
            return
        entry = asdict(
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
        assert self.cache is not None
        if not (log.conversation and self.cache.keep(entry)):
            log.cache_writes.append(entry)

    def _charge(self, request: ChatRequest, response: ChatResponse) -> None:
        """Count an answer against --helmbench-max-cost: its reported cost, else its tokens at the
        model's price. A call with neither cannot be counted, so the ceiling could not be kept: its
        model is stopped with that reason (never a ceiling silently off)."""
        assert self.ledger is not None
        cost = response.cost_usd
        if cost is None and response.prompt_tokens is not None:
            price = self._price(request.model)
            if price is not None:
                cost = price.cost(response.prompt_tokens, response.completion_tokens or 0)
        if cost is None:
            self.board.stop(
                request.model, f"{UNPRICED_CEILING} (its calls report no cost and it has no price)"
            )
        self.ledger.add(cost)

    def _price(self, model_id: str) -> Pricing | None:
        try:
            return self.clients.pricing(model_id)
        except HelmbenchError as exc:  # the price list could not be read: no price
            log.debug("no price for %s: %s", model_id, exc)
            return None

    @staticmethod
    def _error(
        log: CaseLog, reason: str, exc: CallError, talk: Talk, keep_response: bool = False
    ) -> CaseError:
        """The case's error Outcome; a conversation keeps the turns judged before it (and says which
        turn erred)."""
        details = dict(log.replayed)
        ruled: dict[str, Any] = {"details": details}
        if keep_response:  # a helper failed: the model's reply stays the raw response, the helper's apart
            details["judge_raw"] = exc.raw  # shown as the helper's raw answer
        else:
            ruled["raw_response"] = exc.raw
            ruled["attempts"] = exc.attempts
        if talk.turns:
            details["turns"] = [turn.to_dict() for turn in talk.turns]
        return CaseError(log.outcome(Status.ERROR, talk.prefix() + reason, ruled))


def _failed(talk: Talk) -> bool:
    """A reply of the conversation has failed: whatever stops it later, the case fails."""
    return any(turn.verdict.status is Status.FAILED for turn in talk.turns)


def _account(log: CaseLog, response: ChatResponse) -> None:
    """Add one reply's accounting (a conversation's replies add up; unknown stays unknown)."""
    first = log.attempts is None
    log.raw_response = response.raw
    log.latency_ms = _add(log.latency_ms, response.latency_ms, first)
    log.prompt_tokens = _add(log.prompt_tokens, response.prompt_tokens, first)
    log.completion_tokens = _add(log.completion_tokens, response.completion_tokens, first)
    log.cost_usd = _add(log.cost_usd, response.cost_usd, first)
    log.finish_reason = response.finish_reason
    log.attempts = (log.attempts or 0) + response.attempts


def _add(total: Any, value: Any, first: bool) -> Any:
    if first:
        return value
    if total is None or value is None:
        return total if value is None else value
    return total + value
