"""What one model call sends and gets back, with no HTTP library: requests, answers, prices, faults.

Shared by every provider (providers/base.py) and by the stages after the call; importing it costs
nothing, unlike providers/http.py (httpx). A model *answer* exists only when the provider really
answered: everything else is a CallError (an outage is never scored as an unsafe answer).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import HelmbenchError
from ..jsontext import loads_tolerant
from ..redaction import redact


class CallError(HelmbenchError):
    """The call could not be made or completed: the case is an ERROR, never a failure."""

    def __init__(
        self, reason: str, *, status: int | None = None, raw: str | None = None, attempts: int = 1
    ) -> None:
        reason = redact(reason)  # a provider may echo the key, or a URL's userinfo, in its error
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.raw = redact(raw) if raw else raw
        self.attempts = attempts


class ModelRejected(CallError):
    """401, 402, or the model/its parameters rejected: every case of this model would fail alike."""


@dataclass(frozen=True)
class Pricing:
    """USD per token, from OpenRouter's /models."""

    prompt: float
    completion: float
    request: float = 0.0

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return prompt_tokens * self.prompt + completion_tokens * self.completion + self.request


@dataclass(frozen=True)
class ChatRequest:
    """What is sent for one call; `body()` renders it for the API kind."""

    model: str
    messages: list[dict[str, str]]
    response_format: dict[str, Any] | None  # None: a plain-text reply (the deployed layout)
    temperature: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    provider: dict[str, Any] | None = None
    reasoning: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def body(self, api: str) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": self.messages}
        if self.response_format is not None:
            body["response_format"] = self.response_format
        for key in ("temperature", "max_tokens", "seed"):
            if getattr(self, key) is not None:
                body[key] = getattr(self, key)
        if api == "openrouter":
            body["provider"] = {**(self.provider or {}), "require_parameters": True}
            if self.reasoning is not None:
                body["reasoning"] = self.reasoning
        body.update(self.extra)
        return body


def request_key(base_url: str, api: str, request: ChatRequest, repeat: int = 0) -> str:
    """sha256 of the full request as sent, plus where it is sent and the repeat index: the request's
    identity, stored on every Result (resume compares it) and the response cache's key."""
    material = {"base_url": base_url.rstrip("/"), "api": api, "body": request.body(api), "repeat": repeat}
    return hashlib.sha256(
        json.dumps(material, sort_keys=True, ensure_ascii=False).encode("utf-8")
    ).hexdigest()


@dataclass(frozen=True)
class CacheEntry:
    """What is kept of one paid call for the response cache (plain data: it travels from xdist workers)."""

    key: str
    model_id: str
    raw_response: str
    prompt_tokens: int | None
    completion_tokens: int | None
    cost_usd: float | None
    latency_ms: float | None


@dataclass(frozen=True)
class ChatResponse:
    """A completed answer, with its accounting."""

    content: str | None
    refusal: str | None
    finish_reason: str | None
    raw: str
    prompt_tokens: int | None
    completion_tokens: int | None
    cost_usd: float | None
    latency_ms: float
    attempts: int
    generation_id: str | None = None
    provider: str | None = None


def json_or_none(raw: str) -> Any:
    """A provider's body as JSON (jsontext.loads_tolerant: NaN reads as null, deep nesting is not
    JSON), or None when it is not JSON; never raises, whatever the body."""
    try:
        return loads_tolerant(raw) if raw.strip() else None
    except ValueError:  # JSONDecodeError and JsonRejected
        return None


def error_message(data: Any, fallback: str) -> tuple[str, dict[str, Any]]:
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        err = data["error"]
        return str(err.get("message") or fallback), err.get("metadata") or {}
    return fallback, {}


def read_completion(
    raw: str, *, model: str, latency_ms: float, attempts: int, cost: Callable[[dict[str, Any]], float | None]
) -> ChatResponse:
    """Read a 200 chat-completions body (fresh, replayed from the cache, or made in-process); provider
    errors in it are transient. `cost(usage)` prices the answer."""
    data = json_or_none(raw)
    if not isinstance(data, dict):
        raise Transient("provider returned a body that is not JSON", status=200, raw=raw)
    choices = data.get("choices")
    if "error" in data and not choices:
        message, _ = error_message(data, "provider error")
        raise Transient(f"provider error inside a 200 response: {message}", status=200, raw=raw)
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise Transient("provider returned no choices", status=200, raw=raw)
    choice = choices[0]
    finish = choice.get("finish_reason")
    if finish == "error":
        message, _ = error_message({"error": choice.get("error")}, "provider error")
        raise Transient(f"provider error in the choice: {message}", status=200, raw=raw)
    message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
    content = message.get("content")
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    return ChatResponse(
        content=_text(content),
        refusal=_text(message.get("refusal")) or None,
        finish_reason=_text(finish),
        raw=raw,
        prompt_tokens=_count(usage.get("prompt_tokens")),
        completion_tokens=_count(usage.get("completion_tokens")),
        cost_usd=cost(usage),
        latency_ms=latency_ms,
        attempts=attempts,
        generation_id=_text(data.get("id")),
        provider=_text(data.get("provider")),
    )


def _text(value: Any) -> str | None:
    """A field the body should give as a string: anything else is unknown (a dict would not fit its
    text column)."""
    return value if isinstance(value, str) else None


def _count(value: Any) -> int | None:
    """A token count: a whole number in 0..2**31-1, else unknown (a string, a float or a huge number
    would not fit its INTEGER column)."""
    whole = isinstance(value, int) and not isinstance(value, bool)
    return value if whole and 0 <= value < 2**31 else None


class Transient(Exception):
    """A retryable fault (rate limit, outage, timeout, provider error in a 200)."""

    def __init__(
        self,
        reason: str,
        *,
        status: int | None = None,
        raw: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.raw = raw
        self.retry_after = retry_after
