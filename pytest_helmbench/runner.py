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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .cases import Case
from .client import CallError, ChatClient, ChatRequest, ChatResponse, ModelRejected
from .config import ModelConfig, Settings
from .errors import HelmbenchError
from .evaluation import evaluate
from .loader import BenchmarkInfo, Criteria
from .outcome import ERROR, FAILED, PASSED, Outcome, provenance
from .prompt import ComposedPrompt
from .sqe import JudgeVerdict, run_judge

log = logging.getLogger(__name__)


class CaseError(HelmbenchError):
    """The case could not be run to a verdict; carries the error Outcome to record."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.reason)
        self.outcome = outcome


class ModelStopped(HelmbenchError):
    """The model was stopped earlier in this session; its remaining cases are skipped."""


class StopBoard:
    """Models stopped for the rest of the session, kept as files so every xdist worker sees them."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)

    def _path(self, model: str) -> Path:
        return self.folder / (hashlib.sha256(model.encode()).hexdigest()[:16] + ".stop")

    def stop(self, model: str, message: str) -> None:
        # Write then rename: another worker reading mid-write must never see a half-written file.
        path = self._path(model)
        temp = path.with_name(f"{path.stem}.{os.getpid()}.{threading.get_ident()}.tmp")
        temp.write_text(f"{model}\n{message}", encoding="utf-8")
        os.replace(temp, path)

    def reason(self, model: str) -> str | None:
        path = self._path(model)
        return path.read_text(encoding="utf-8").split("\n", 1)[1] if path.is_file() else None

    def stopped(self) -> dict[str, str]:
        found = {}
        for path in sorted(self.folder.glob("*.stop")):
            model, message = path.read_text(encoding="utf-8").split("\n", 1)
            found[model] = message
        return found


def build_request(model: ModelConfig, settings: Settings, prompt: str, response_format: dict[str, Any]) -> ChatRequest:
    """The request for one call: the model's own settings win over the run's options."""
    return ChatRequest(
        model=model.id,
        messages=[{"role": "user", "content": prompt}],
        response_format=response_format,
        temperature=model.temperature if model.temperature is not None else settings.temperature,
        max_tokens=model.max_tokens if model.max_tokens is not None else settings.max_tokens,
        seed=model.seed if model.seed is not None else settings.seed,
        provider=model.provider,
        reasoning=model.reasoning,
        extra=dict(model.extra_body),
    )


class ClientPool:
    """One ChatClient per endpoint, shared by all cases of the process (connection reuse)."""

    def __init__(self, settings: Settings, base_urls: dict[str, str] | None = None) -> None:
        self.settings = settings
        self.base_urls = dict(base_urls or {})
        self._clients: dict[tuple[str, str, float, bool], ChatClient] = {}
        self._lock = threading.Lock()

    def for_model(self, model: ModelConfig) -> ChatClient:
        settings = self.settings
        base_url = self.base_urls.get(model.id) or model.base_url or settings.base_url
        api = "openai" if model.is_local else (model.api or settings.api)
        timeout = model.timeout or settings.timeout
        key = (base_url, api, timeout, model.is_local)
        with self._lock:
            if key not in self._clients:
                self._clients[key] = ChatClient(
                    base_url, "" if model.is_local else settings.api_key, api=api, timeout=timeout,
                    retries=settings.retries, backoff=settings.backoff, free=model.is_local,
                )
            return self._clients[key]

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()


@dataclass
class Executor:
    """Runs cases against their model (and the marking model for sqe) and builds Outcomes."""

    settings: Settings
    info: BenchmarkInfo
    clients: ClientPool
    board: StopBoard

    def check_running(self, model: str) -> None:
        reason = self.board.reason(model)
        if reason is not None:
            raise ModelStopped(f"model {model} was stopped: {reason}")

    def run(self, case: Case, prompt: ComposedPrompt, nodeid: str) -> Outcome:
        """Call the model and evaluate; raise CaseError (with an error Outcome) when no verdict is possible."""
        self.check_running(case.model)
        model = self.settings.model(case.model)
        outcome = Outcome(
            status=ERROR, reason="", model=case.model, case_code=case.code, nodeid=nodeid,
            prompt=prompt.text, prompt_hash=prompt.hash, provenance=provenance(case, self.info),
        )
        try:
            response = self.clients.for_model(model).complete(build_request(model, self.settings, prompt.text, prompt.response_format))
        except ModelRejected as exc:
            self.board.stop(case.model, exc.reason)
            raise self._error(outcome, f"model {case.model} stopped: {exc.reason}", exc) from None
        except CallError as exc:
            raise self._error(outcome, exc.reason, exc) from None
        self._account(outcome, response)
        if response.finish_reason == "length":
            outcome.reason = f"truncated at max_tokens ({outcome.completion_tokens} completion tokens, finish_reason: length): raise --helmbench-max-tokens"
            raise CaseError(outcome)
        try:
            result = evaluate(case.scenario, prompt.text, response, self._judge)
        except CallError as exc:
            outcome.reason = exc.reason
            outcome.details = {"judge_raw": exc.raw}
            raise CaseError(outcome) from None
        outcome.status = PASSED if result.passed else FAILED
        outcome.reason = result.reason
        outcome.answer, outcome.expected, outcome.actual = result.answer, result.expected, result.actual
        outcome.details = {"evaluation": case.scenario.evaluation.type, **result.details}
        if result.judge is not None:
            self._account_judge(outcome, result.judge)
        return outcome

    def _judge(self, criteria: Criteria, prompt: str, answer: str) -> JudgeVerdict:
        marking = self.settings.marking_model
        if marking is None:
            raise CallError("no marking model for this sqe scenario: set marking_model in models.yml or --helmbench-marking-model")

        def send(text: str, response_format: dict[str, Any]) -> ChatResponse:
            client = self.clients.for_model(marking)
            return client.complete(build_request(marking, self.settings, text, response_format))

        return run_judge(send, criteria, prompt, answer)

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
