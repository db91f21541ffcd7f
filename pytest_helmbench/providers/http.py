"""Chat-completions client for OpenRouter and OpenAI-compatible servers (prompt -> model call).

Its one promise: a model *answer* is returned only when the provider really answered. Everything
else raises CallError (an outage is never scored as an unsafe answer); faults that stop a model's
whole run (bad key, no credit, model or parameters rejected) raise ModelRejected.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx

from .. import __version__
from ..redaction import Secret, redact
from ..trust import KEY_ENV, is_loopback
from .chat import (
    CallError,
    ChatRequest,
    ChatResponse,
    ModelRejected,
    Pricing,
    Transient,
    error_message,
    json_or_none,
    read_completion,
)
from .ratelimit import AdaptiveLimiter
from .transports import Transports

log = logging.getLogger(__name__)

RETRYABLE_STATUS = {408, 429, 500, 502, 503, 504, 520, 522, 524, 529}
BACKOFF_CAP = 60.0
RETRY_AFTER_CAP = 300.0
APP_TITLE = "HELMBench"
PROPS_TIMEOUT = 5.0  # seconds for llama.cpp's GET /props before the server counts as not publishing slots
NO_KEY_SENT = (
    "the server wants a key and none was sent: set OPENROUTER_API_KEY for a base URL given on the command "
    "line or in the environment, or name the variable that holds it with api_key_env in models.yml"
)


def environment_proxy(url: httpx.URL) -> str | None:
    """The proxy the environment names for this URL (HTTPS_PROXY / HTTP_PROXY / ALL_PROXY, unless
    NO_PROXY exempts the host), as httpx.Client would pick it."""
    proxies = urllib.request.getproxies()
    proxy = proxies.get(url.scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass(url.host):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


def _json_bytes(body: dict[str, Any]) -> bytes:
    """The request body, encoded exactly as httpx's `json=` does (the Content-Type header is the
    client's): encoding it here skips httpx's per-call content negotiation."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


def _retry_after(response: httpx.Response, metadata: dict[str, Any]) -> float | None:
    """Seconds to wait from Retry-After, or OpenRouter's X-RateLimit-Reset (epoch ms)."""
    value = response.headers.get("retry-after")
    if value:
        try:
            return max(0.0, float(value))
        except ValueError:
            pass
    reset = (
        (metadata.get("headers") or {}).get("X-RateLimit-Reset")
        if isinstance(metadata.get("headers"), dict)
        else None
    )
    if reset:
        try:
            return max(0.0, float(reset) / 1000.0 - time.time())
        except ValueError:
            pass
    return None


def _rejects_model(status: int, message: str) -> bool:
    """A 400/404 about the model or its parameters stops the model; other 400s concern one case."""
    if status == 404:
        return True
    text = message.lower()
    if "schema" in text or "context length" in text or "context_length" in text or "too long" in text:
        return False  # one scenario's schema or one long prompt: that case errors, the others still run
    return any(
        word in text
        for word in ("model", "parameter", "not supported", "unsupported", "endpoint", "provider preferences")
    )


def _headers(key: Secret, api: str) -> httpx.Headers:
    """The request headers; `Authorization` only with a key (httpx.Headers' repr hides its value)."""
    headers = httpx.Headers(
        {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": f"{APP_TITLE}/{__version__}",
        }
    )
    if key:
        headers["Authorization"] = "Bearer " + key.reveal()
    if api == "openrouter":
        headers["X-Title"] = APP_TITLE
    return headers


@dataclass(frozen=True)
class ClientOptions:
    """How a ChatClient talks to its endpoint: the API kind, the timeout of one call, retries and their
    backoff, whether calls are free (a local server: no proxy, no environment), and the environment
    variable its key came from (named by a 401's reason; the key itself never is)."""

    api: str = "openrouter"
    timeout: float = 120.0
    retries: int = 5
    backoff: float = 1.0
    free: bool = False
    key_env: str = KEY_ENV
    prices: Mapping[str, Pricing] = field(default_factory=dict)  # --helmbench-prices: over /models'


class ChatClient:
    """One endpoint (base URL, API kind, key); thread-safe; retries transient faults with backoff.

    `sleep` waits between retries (default: the cancel event's wait, which ends when the session stops),
    `limiter` bounds the calls in flight, `cancel` is the session's stop signal."""

    def __init__(
        self,
        base_url: str,
        api_key: Secret | str,
        options: ClientOptions | None = None,
        *,
        sleep: Callable[[float], None] | None = None,
        limiter: AdaptiveLimiter | None = None,
        cancel: threading.Event | None = None,
    ) -> None:
        options = options if options is not None else ClientOptions()
        api, timeout, free = options.api, options.timeout, options.free
        self.base_url = base_url.rstrip("/")
        self.api = api
        self.key_env = options.key_env  # named by a 401's reason (the key itself never is)
        # A local OpenAI-compatible server (llama.cpp, Ollama, vLLM, LM Studio on loopback) keeps
        # decoding a request whose client timed out: retrying it would double its load.
        self.local_server = api == "openai" and is_loopback(self.base_url)
        self.slots: int | None = None  # the server's published slots (probe_slots), when it has any
        self._slot_gate: threading.BoundedSemaphore | None = None
        self.retries = options.retries
        self.backoff = options.backoff
        self.free = free
        self.cancel = cancel or threading.Event()  # set when the session stops: no further retry is sent
        self._sleep = (
            sleep if sleep is not None else self.cancel.wait
        )  # a retry wait ends early when the session stops
        self.limiter = limiter or AdaptiveLimiter(1_000_000)
        key = api_key if isinstance(api_key, Secret) else Secret(api_key)
        self._keyed = bool(key)
        headers = _headers(key, api)
        self._headers = headers
        self._chat_url = httpx.URL(f"{self.base_url}/chat/completions")  # parsed once, not per call
        self._timeout = {"timeout": httpx.Timeout(timeout).as_dict()}
        self._timeout_seconds = timeout
        # Chat calls go straight to a transport of the calling thread's own (transports.py).
        self._transports = Transports(None if free else environment_proxy(self._chat_url), trust_env=not free)
        self._http = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(timeout),
            transport=self._transports.shared,
            trust_env=False,
        )
        self._pricing: dict[str, Pricing] | None = None
        self._pricing_lock = threading.Lock()
        self.prices = options.prices  # --helmbench-prices: over /models'
        self.pricing_problem: str | None = None  # why /models gave no prices (offline, an error)

    def close(self) -> None:
        self._http.close()
        self._transports.close()

    def probe_slots(self, concurrency: int) -> int | None:
        """The requests the server decodes at once, as llama.cpp publishes them (GET /props ->
        `total_slots`), made this client's ceiling on calls in flight (with `concurrency`, the lower
        wins): more would only queue inside the server, where they run into the timeout and get sent
        again. None (the ceiling stays `concurrency`) when the server publishes none: a 404, not
        JSON, no such field, or no answer within PROPS_TIMEOUT."""
        root = self.base_url.removesuffix("/v1")
        try:
            response = self._http.get(f"{root}/props", timeout=PROPS_TIMEOUT)
            data = response.json() if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            data = None
        slots = data.get("total_slots") if isinstance(data, dict) else None
        if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
            log.info("%s publishes no slot count (GET %s/props)", redact(self.base_url), redact(root))
            return None
        self.limit_slots(slots, concurrency)
        log.info(
            "%s publishes %d slot(s): at most %d call(s) in flight to it",
            redact(self.base_url),
            slots,
            min(slots, concurrency),
        )
        return slots

    def limit_slots(self, slots: int | None, concurrency: int) -> None:
        """At most `slots` calls of this client in flight (None: no limit of the server's own)."""
        if self._slot_gate is None and slots is not None:
            self.slots = slots
            if slots < concurrency:
                self._slot_gate = threading.BoundedSemaphore(slots)

    @contextmanager
    def _server_slot(self) -> Iterator[None]:
        """Hold one of the server's published slots (no limit when it published none)."""
        gate = self._slot_gate
        if gate is None:
            yield
            return
        with gate:
            yield

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, RETRY_AFTER_CAP) + random.uniform(0, 0.1 * max(self.backoff, 0.1))
        base = min(BACKOFF_CAP, self.backoff * 2 ** (attempt - 1))
        return base * random.uniform(0.5, 1.0)

    def complete(self, request: ChatRequest) -> ChatResponse:
        """Send one chat completion; retry transient faults; raise CallError when none succeeded."""
        body = request.body(self.api)
        last: CallError | None = None
        for attempt in range(1, self.retries + 2):
            retry_after: float | None = None
            try:
                # The server's own slots first (held while waiting for the process's rate limit, never
                # the other way round, so calls to other endpoints are not held up by this one).
                with self._server_slot(), self.limiter.slot():
                    if self.cancel.is_set():  # stopped while this call waited for a slot
                        raise CallError("not sent: the session is stopping", attempts=attempt - 1)
                    # Latency is the answering attempt's own time: retry waits are not the model's speed.
                    response = self._attempt(request, body, attempt, time.perf_counter())
                self.limiter.on_success()
                return response
            except Transient as exc:
                last = CallError(exc.reason, status=exc.status, raw=exc.raw, attempts=attempt)
                retry_after = exc.retry_after
                if exc.status == 429:
                    self.limiter.on_rate_limited()
            except CallError as exc:
                exc.attempts = attempt  # a final fault after retries still counts every attempt made
                raise
            if attempt <= self.retries:
                delay = self._delay(attempt, retry_after)
                log.info(
                    "%s: %s; retry %d/%d in %.1fs", request.model, last.reason, attempt, self.retries, delay
                )
                self._sleep(delay)
                if self.cancel.is_set():
                    raise CallError(
                        f"{last.reason} (not retried: the session is stopping)",
                        status=last.status,
                        raw=last.raw,
                        attempts=attempt,
                    )
        assert last is not None
        raise CallError(
            f"{last.reason} (gave up after {last.attempts} attempts)",
            status=last.status,
            raw=last.raw,
            attempts=last.attempts,
        )

    def _attempt(
        self, request: ChatRequest, body: dict[str, Any], attempt: int, started: float
    ) -> ChatResponse:
        return self._post(request, body, attempt, started, self._chat_url)

    def _post(
        self, request: ChatRequest, body: dict[str, Any], attempt: int, started: float, url: httpx.URL
    ) -> ChatResponse:
        """One attempt at `url` (a subclass may spread attempts over several servers of one model)."""
        http_request = httpx.Request(
            "POST", url, headers=self._headers, content=_json_bytes(body), extensions=self._timeout
        )
        try:
            response = self._transports.for_this_thread().handle_request(http_request)
            try:
                response.read()
            finally:
                response.close()
        except httpx.ReadTimeout:
            if self.local_server:
                raise CallError(
                    f"timed out after {self._timeout_seconds:g} s waiting for the local server, not retried "
                    "(it may still be working on the request: raise --helmbench-timeout, or lower "
                    "--helmbench-concurrency to the requests it decodes at once)"
                ) from None
            raise Transient("timed out waiting for the provider") from None
        except httpx.TimeoutException:
            raise Transient("timed out waiting for the provider") from None
        except httpx.TransportError as exc:
            raise Transient(f"connection failed: {type(exc).__name__}") from None
        latency_ms = (time.perf_counter() - started) * 1000.0
        if response.status_code != 200:
            self._raise_for_status(response, json_or_none(response.text), response.text)
        return self.parse_completion(
            response.text, model=request.model, latency_ms=latency_ms, attempts=attempt
        )

    def parse_completion(self, raw: str, *, model: str, latency_ms: float, attempts: int) -> ChatResponse:
        """Read a 200 body (fresh, or replayed from the cache); provider errors in it are transient."""
        return read_completion(
            raw,
            model=model,
            latency_ms=latency_ms,
            attempts=attempts,
            cost=lambda usage: self._cost(model, usage),
        )

    def _raise_for_status(self, response: httpx.Response, data: Any, raw: str) -> None:
        status = response.status_code
        message, metadata = error_message(data, response.reason_phrase or f"HTTP {status}")
        if status in RETRYABLE_STATUS:
            raise Transient(
                f"HTTP {status}: {message}",
                status=status,
                raw=raw,
                retry_after=_retry_after(response, metadata),
            )
        if status == 401:
            hint = f"check {self.key_env} (the key is missing or invalid)" if self._keyed else NO_KEY_SENT
            raise ModelRejected(f"HTTP 401: {message} — {hint}", status=status, raw=raw)
        if status == 402:
            raise ModelRejected(
                f"HTTP 402: {message} — the account has insufficient credits", status=status, raw=raw
            )
        if status == 403:
            reasons = metadata.get("reasons")
            extra = (
                f" (reasons: {', '.join(map(str, reasons))})" if isinstance(reasons, list) and reasons else ""
            )
            raise CallError(
                f"blocked by provider moderation (HTTP 403): {message}{extra}", status=status, raw=raw
            )
        if status in (400, 404) and _rejects_model(status, message):
            raise ModelRejected(
                f"HTTP {status}: the model or its parameters were rejected: {message}", status=status, raw=raw
            )
        raise CallError(f"HTTP {status}: {message}", status=status, raw=raw)

    def _cost(self, model: str, usage: dict[str, Any]) -> float | None:
        """usage.cost (BYOK: the upstream cost), else /models pricing; local servers are free."""
        if self.free:
            return 0.0
        cost = usage.get("cost")
        if usage.get("is_byok"):
            details = usage.get("cost_details")
            upstream = details.get("upstream_inference_cost") if isinstance(details, dict) else None
            if upstream is not None:
                cost = upstream
        if isinstance(cost, (int, float)):
            return float(cost)
        pricing = self.pricing(model)
        if (
            pricing
            and isinstance(usage.get("prompt_tokens"), int)
            and isinstance(usage.get("completion_tokens"), int)
        ):
            return pricing.cost(usage["prompt_tokens"], usage["completion_tokens"])
        return None

    def pricing(self, model: str) -> Pricing | None:
        """Per-token prices from GET /models, fetched once per client (None when unavailable)."""
        with self._pricing_lock:
            if self._pricing is None:
                self._pricing = self._fetch_pricing()
        return self._pricing.get(model)

    def _fetch_pricing(self) -> dict[str, Pricing]:
        """/models' prices, under the price file's (--helmbench-prices: the user's choice)."""
        return {**self._models_pricing(), **self.prices}

    def _models_pricing(self) -> dict[str, Pricing]:
        try:
            response = self._http.get(f"{self.base_url}/models")
            entries = response.json().get("data", []) if response.status_code == 200 else []
        except (httpx.HTTPError, ValueError, AttributeError):
            log.warning("could not fetch model pricing from %s/models", redact(self.base_url))
            self.pricing_problem = f"prices could not be fetched from {redact(self.base_url)}/models"
            return {}
        if response.status_code != 200:
            self.pricing_problem = f"{redact(self.base_url)}/models answered HTTP {response.status_code}"
        prices = {}
        for entry in entries if isinstance(entries, list) else []:
            try:
                p = entry["pricing"]
                prices[entry["id"]] = Pricing(
                    float(p["prompt"]), float(p["completion"]), float(p.get("request") or 0)
                )
            except (KeyError, TypeError, ValueError):
                continue
        return prices
