"""Run one case: compose, call the model, judge, evaluate -> Outcome (the per-item pipeline).

Errors of the call (outage, truncation, moderation, unreachable judge) raise CaseError carrying an
error Outcome; a rejected model is remembered on a StopBoard shared by all xdist workers so its
remaining cases are skipped instead of erroring one by one.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from ..config import ModelConfig, Settings
from ..evaluation.evaluators import evaluate
from ..evaluation.judge import JudgeVerdict, run_judge
from ..providers.http import CallError, ChatClient, ChatRequest, ChatResponse, ModelRejected
from ..providers.ratelimit import AdaptiveLimiter
from ..storage.cache import CacheEntry, ResponseCache, request_key
from ..suite.cases import Case
from ..suite.loader import BenchmarkInfo, Criteria
from ..suite.prompt import ComposedPrompt
from .budget import BudgetExhausted, CostLedger
from .outcome import ERROR, FAILED, PASSED, SKIPPED, CaseError, CaseSkipped, ModelStopped, Outcome, provenance

log = logging.getLogger(__name__)


LOCAL_MAX_TOKENS = 512  # a small local model that loops would otherwise spend minutes per case
LOCAL_PARALLEL = 2  # requests one embedded llama.cpp server decodes at once (LocalServer's default)


class StopBoard:
    """Models stopped for the rest of the session, kept as files so every xdist worker sees them.

    `cross_process=False` (a run without xdist: every call is made in this process) answers the check
    made before every call from memory, without touching the file system."""

    def __init__(self, folder: Path, *, cross_process: bool = True) -> None:
        self.folder = folder
        self.cross_process = cross_process
        folder.mkdir(parents=True, exist_ok=True)
        self._paths: dict[str, str] = {}
        self._here: dict[str, str] = {}  # stopped by this process

    def _path(self, model: str) -> Path:
        return Path(self._file(model))

    def _file(self, model: str) -> str:
        """Asked before every call: the file name is worked out once per model."""
        found = self._paths.get(model)
        if found is None:
            found = self._paths[model] = os.path.join(
                self.folder, hashlib.sha256(model.encode()).hexdigest()[:16] + ".stop"
            )
        return found

    def stop(self, model: str, message: str) -> None:
        # Write then rename: another worker reading mid-write must never see a half-written file.
        path = self._path(model)
        temp = path.with_name(f"{path.stem}.{os.getpid()}.{threading.get_ident()}.tmp")
        temp.write_text(f"{model}\n{message}", encoding="utf-8")
        os.replace(temp, path)
        self._here[model] = message

    def reason(self, model: str) -> str | None:
        found = self._here.get(model)
        if found is not None or not self.cross_process:
            return found
        try:
            with open(self._file(model), encoding="utf-8") as file:
                return file.read().split("\n", 1)[1]
        except FileNotFoundError:
            return None

    def stopped(self) -> dict[str, str]:
        found = {}
        for path in sorted(self.folder.glob("*.stop")):
            model, message = path.read_text(encoding="utf-8").split("\n", 1)
            found[model] = message
        return found


def build_request(
    model: ModelConfig, settings: Settings, prompt: str, response_format: dict[str, Any]
) -> ChatRequest:
    """The request for one call: the model's own settings win over the run's options."""
    return ChatRequest(
        model=model.id,
        messages=[{"role": "user", "content": prompt}],
        response_format=response_format,
        temperature=model.temperature if model.temperature is not None else settings.temperature,
        max_tokens=model.max_tokens
        if model.max_tokens is not None
        else (min(settings.max_tokens, LOCAL_MAX_TOKENS) if model.is_local else settings.max_tokens),
        seed=model.seed if model.seed is not None else settings.seed,
        provider=model.provider,
        reasoning=model.reasoning,
        extra=dict(model.extra_body),
    )


class ClientPool:
    """One ChatClient per endpoint, shared by all cases of the process (connection reuse)."""

    def __init__(
        self,
        settings: Settings,
        local_url: Callable[[str], str | None] | None = None,
        limiter: AdaptiveLimiter | None = None,
    ) -> None:
        self.settings = settings
        self._base_url = local_url or (
            lambda model_id: None
        )  # asked at each call: local servers may start later
        self.limiter = limiter
        self._clients: dict[tuple[str, str, float, bool], ChatClient] = {}
        self._lock = threading.Lock()
        self._cancel = threading.Event()

    def for_model(self, model: ModelConfig) -> ChatClient:
        settings = self.settings
        base_url = self._base_url(model.id) or model.base_url or settings.base_url
        api = "openai" if model.is_local else (model.api or settings.api)
        timeout = model.timeout or settings.timeout
        key = (base_url, api, timeout, model.is_local)
        with self._lock:
            if key not in self._clients:
                self._clients[key] = ChatClient(
                    base_url,
                    "" if model.is_local else settings.api_key,
                    api=api,
                    timeout=timeout,
                    retries=settings.retries,
                    backoff=settings.backoff,
                    free=model.is_local,
                    limiter=AdaptiveLimiter(LOCAL_PARALLEL) if model.is_local else self.limiter,
                    cancel=self._cancel,
                )
            return self._clients[key]

    def cancel(self) -> None:
        """The session is stopping (-x, --maxfail, Ctrl-C): calls in flight send no further retry, and
        calls waiting for a slot are not sent."""
        self._cancel.set()

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()


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
    cache: ResponseCache | None = None
    ledger: CostLedger | None = None
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

    @staticmethod
    def _endpoint(model: ModelConfig, client: ChatClient) -> str:
        """Where the request goes, for its hash: a local model's port changes every session, its id does not."""
        return f"local:{model.id}" if model.is_local else client.base_url

    def check_running(self, model: str, role: str = "model") -> None:
        reason = self.board.reason(model)
        if reason is not None:
            raise ModelStopped(f"{role} {model} was stopped: {reason}")

    def request_for(
        self, case: Case, prompt: ComposedPrompt, repeat: int = 0
    ) -> tuple[ChatClient, ChatRequest, str]:
        """The client, request and request hash of a case: the hash is also its cache key."""
        model = self.settings.model(case.model)
        client = self.clients.for_model(model)
        request = build_request(model, self.settings, prompt.text, prompt.response_format)
        return client, request, request_key(self._endpoint(model, client), client.api, request, repeat)

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
        marking = self.settings.marking_model
        if case.scenario.evaluation.type == "sqe" and marking is not None:
            self.check_running(marking.id, "marking model")  # no answer is paid for that nobody could judge
        client, request, key = self.request_for(case, prompt, repeat)
        outcome = Outcome(
            status=ERROR,
            reason="",
            model=case.model,
            case_code=case.code,
            nodeid=nodeid,
            prompt=prompt.text,
            prompt_hash=prompt.hash,
            provenance=provenance(case, self.info),
            repeat=repeat,
            request_hash=key,
        )
        try:
            response = self._call(client, request, key, outcome, judge=False)
        except BudgetExhausted as exc:
            raise self._skip(outcome, str(exc)) from None
        except ModelRejected as exc:
            self.board.stop(case.model, exc.reason)
            raise self._error(outcome, f"model {case.model} stopped: {exc.reason}", exc) from None
        except CallError as exc:
            raise self._error(outcome, exc.reason, exc) from None
        self._account(outcome, response)
        if response.finish_reason == "length":
            outcome.reason = f"truncated at max_tokens ({outcome.completion_tokens} completion tokens, finish_reason: length): raise --helmbench-max-tokens"
            outcome.cache_writes.clear()
            raise CaseError(outcome)
        try:
            result = evaluate(
                case.scenario, prompt.text, response, lambda c, p, a: self._judge(c, p, a, outcome, repeat)
            )
        except BudgetExhausted as exc:
            raise self._skip(outcome, f"{exc} before the judge call") from None
        except CallError as exc:
            outcome.reason = exc.reason
            outcome.details = {"judge_raw": exc.raw}
            raise CaseError(outcome) from None
        outcome.status = PASSED if result.passed else FAILED
        outcome.reason = result.reason
        outcome.answer, outcome.expected, outcome.actual = result.answer, result.expected, result.actual
        outcome.details = {"evaluation": case.scenario.evaluation.type, **result.details, **outcome.details}
        if result.judge is not None:
            self._account_judge(outcome, result.judge)
        return outcome

    def _call(
        self, client: ChatClient, request: ChatRequest, key: str, outcome: Outcome, *, judge: bool
    ) -> ChatResponse:
        """One answer: replayed from the cache (costs nothing now) or paid for under the ceiling."""
        entry = self.cache.get(key) if self.cache is not None else None
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
        if self.cache is not None and self.cache.writable:
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

    def _judge(
        self, criteria: Criteria, prompt: str, answer: str, outcome: Outcome, repeat: int
    ) -> JudgeVerdict:
        marking = self.settings.marking_model
        if marking is None:
            raise CallError(
                "no marking model for this sqe scenario: set marking_model in models.yml or --helmbench-marking-model"
            )
        client = self.clients.for_model(marking)

        def send(text: str, response_format: dict[str, Any]) -> ChatResponse:
            request = build_request(marking, self.settings, text, response_format)
            try:
                return self._call(
                    client,
                    request,
                    request_key(self._endpoint(marking, client), client.api, request, repeat),
                    outcome,
                    judge=True,
                )
            except (
                ModelRejected
            ) as exc:  # a bad key or credits for the judge: every later sqe case would fail alike
                self.board.stop(marking.id, f"as the marking model: {exc.reason}")
                raise

        return run_judge(send, criteria, prompt, answer)

    @staticmethod
    def _skip(outcome: Outcome, reason: str) -> CaseSkipped:
        outcome.status = SKIPPED
        outcome.reason = reason
        return CaseSkipped(outcome)

    @staticmethod
    def _error(outcome: Outcome, reason: str, exc: CallError) -> CaseError:
        outcome.status = ERROR
        outcome.reason = reason
        outcome.raw_response = exc.raw
        outcome.attempts = exc.attempts
        return CaseError(outcome)

    @staticmethod
    def _account(outcome: Outcome, response: ChatResponse) -> None:
        outcome.raw_response = response.raw
        outcome.latency_ms = response.latency_ms
        outcome.prompt_tokens = response.prompt_tokens
        outcome.completion_tokens = response.completion_tokens
        outcome.cost_usd = response.cost_usd
        outcome.finish_reason = response.finish_reason
        outcome.attempts = response.attempts

    @staticmethod
    def _account_judge(outcome: Outcome, verdict: JudgeVerdict) -> None:
        outcome.judge_cost_usd = verdict.cost_usd
        outcome.judge_prompt_tokens = verdict.prompt_tokens
        outcome.judge_completion_tokens = verdict.completion_tokens
        outcome.details["judge"] = verdict.to_dict()
