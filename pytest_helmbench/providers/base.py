"""The Provider interface: how a model id is answered (HTTP API, embedded local model, oracle, …).

A new kind of provider is one new file: a `Provider` subclass, added to the registry by a
`pytest_helmbench_register_providers(registry)` hookimpl (a `conftest.py`, an installed plugin, or
`providers/builtin.py` for the built-ins). The executor never asks which kind answers a model: the
`ClientPool` (providers/pool.py) asks the model's provider for a client, the request defaults and
the cache endpoint.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from ..config import ModelConfig, Settings
from ..suite.evaluation_spec import EvaluationTypes
from ..suite.model import ScenarioOf
from .chat import ChatRequest, ChatResponse, Pricing, read_completion

if TYPE_CHECKING:
    from .ratelimit import AdaptiveLimiter


@dataclass(frozen=True)
class ProviderContext:
    """What the process gives every provider: run settings, the project folder (logs, relative paths),
    the stop signal (set when the session stops: no further retry is sent), the rate limit that
    the paid API's calls share (None: each client gets its own, unbounded), and the benchmark root
    with the session's evaluation types and scenarios (providers that answer from the benchmark
    itself: oracles).
    The project folder defaults to the current one, the stop signal to a fresh event."""

    settings: Settings
    base_dir: Path = field(default_factory=Path.cwd)
    cancel: threading.Event = field(default_factory=threading.Event)
    limiter: AdaptiveLimiter | None = None
    benchmark_dir: Path | None = None
    evaluation_types: EvaluationTypes | None = None
    scenario_of: ScenarioOf | None = None  # None: the oracles' index parses the folders itself


class ModelClient(Protocol):
    """What the executor needs of a client: send one request, re-read a cached response body."""

    api: str  # the API kind the body is rendered for (part of the cache key)
    base_url: str

    def complete(self, request: ChatRequest) -> ChatResponse: ...

    def parse_completion(self, raw: str, *, model: str, latency_ms: float, attempts: int) -> ChatResponse: ...

    def close(self) -> None: ...


class Provider(ABC):
    """One way of answering model ids. Instances live for one pytest process; methods may be called
    from the executor's threads at once, so `client` must be thread-safe (see `ClientCache`)."""

    name: ClassVar[str] = "provider"  # unique; keys this provider's data for xdist workers
    max_tokens_cap: ClassVar[int | None] = None  # caps the run's max_tokens unless models.yml sets one

    @abstractmethod
    def handles(self, model_id: str) -> bool:
        """True for the ids this provider answers (the registry asks providers in order)."""

    def needs_key(self, model: ModelConfig) -> bool:
        """True when calls need the run's API key: without one the model's cases are a dry run."""
        return False

    def prepare(self, model_ids: Sequence[str], context: ProviderContext) -> None:
        """Controller only, before the first call: start what must run for these models (servers,
        downloads). A HelmbenchError stops the session with its message."""
        return None  # by default: nothing to do

    @abstractmethod
    def client(self, model: ModelConfig, context: ProviderContext) -> ModelClient:
        """The client that answers `model`; called for every call, so cache what you create."""

    def pricing(self, model: ModelConfig, context: ProviderContext) -> Pricing | None:
        """USD per token for the pre-run estimate; None when unknown."""
        return None

    def endpoint(self, model: ModelConfig, client: ModelClient) -> str:
        """Where the request goes, for the response cache's key: stable across sessions."""
        return client.base_url

    def worker_data(self) -> dict[str, Any]:
        """Controller, after `prepare`: plain JSON data every xdist worker needs (e.g. server URLs)."""
        return {}

    def from_worker_data(self, data: dict[str, Any]) -> None:
        """xdist worker, before its first client: what the controller's `worker_data` returned."""
        return None  # by default: nothing to do

    def close(self) -> None:
        """The session is over in this process: close clients, stop what `prepare` started. Idempotent."""
        return None  # by default: nothing to do


Client = TypeVar("Client", bound=ModelClient)


class ClientCache:
    """One client per key, created once even when several threads ask for it at the same time."""

    def __init__(self) -> None:
        self._clients: dict[Hashable, Any] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, create: Callable[[], Client]) -> Client:
        found = self._clients.get(key)
        if found is None:
            with self._lock:
                found = self._clients.get(key)
                if found is None:
                    found = self._clients[key] = create()
        return found

    def values(self) -> list[Any]:
        with self._lock:
            return list(self._clients.values())

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()


class InProcessClient(ABC):
    """A client that answers in this process (oracles, simulated users): no network, no cost.

    Subclasses implement `answer`; its text is wrapped in a chat-completions body, so the cache, the
    evaluators and the stored raw response see the same shape as an API's answer."""

    api = "openai"

    def __init__(self, name: str) -> None:
        self.base_url = f"inprocess:{name}"

    @abstractmethod
    def answer(self, request: ChatRequest) -> str:
        """The answer's content (for a HELMBench case: the JSON the scenario's schema asks for)."""

    def complete(self, request: ChatRequest) -> ChatResponse:
        started = time.perf_counter()
        content = self.answer(request)
        body = {
            "id": f"{self.base_url}-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "model": request.model,
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }
        latency_ms = (time.perf_counter() - started) * 1000.0
        return self.parse_completion(json.dumps(body), model=request.model, latency_ms=latency_ms, attempts=1)

    def parse_completion(self, raw: str, *, model: str, latency_ms: float, attempts: int) -> ChatResponse:
        return read_completion(raw, model=model, latency_ms=latency_ms, attempts=attempts, cost=_free)

    def close(self) -> None:
        """Nothing to release."""
        return None  # by default: nothing to do


def _free(usage: dict[str, Any]) -> float:
    return 0.0
