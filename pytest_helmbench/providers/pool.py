"""The process's way to a model: its provider, its client, its request, its cache endpoint.

The executor and the plugin talk to the `ClientPool` only; every decision that depends on the kind
of provider (key, API kind, max_tokens cap, endpoint, servers to start) is the provider's.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..config import ModelConfig, Settings
from .base import ModelClient, Provider, ProviderContext
from .builtin import builtin_registry
from .chat import ChatRequest, Pricing
from .registry import ProviderRegistry

log = logging.getLogger(__name__)


def build_request(
    model: ModelConfig,
    settings: Settings,
    prompt: str | list[dict[str, str]],
    response_format: dict[str, Any] | None,
    *,
    max_tokens_cap: int | None = None,
) -> ChatRequest:
    """The request for one call (`prompt`: one user message, or the messages themselves): the model's
    own settings win over the run's options; a provider's cap (`Provider.max_tokens_cap`) lowers the
    run's max_tokens, never the model's own."""
    max_tokens = settings.max_tokens if max_tokens_cap is None else min(settings.max_tokens, max_tokens_cap)
    return ChatRequest(
        model=model.id,
        messages=[{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt),
        response_format=response_format,
        temperature=model.temperature if model.temperature is not None else settings.temperature,
        max_tokens=model.max_tokens if model.max_tokens is not None else max_tokens,
        seed=model.seed if model.seed is not None else settings.seed,
        provider=model.provider,
        reasoning=model.reasoning,
        extra=dict(model.extra_body),
    )


class ClientPool:
    """Routes each model to its provider, whose clients are shared by all cases of the process.

    `context` is what every provider is given (settings, project folder, stop signal, shared rate limit,
    benchmark root and evaluation types); closing the pool sets its stop signal. `shared_file` (xdist
    workers) is where the controller's `share` left the providers' worker data; it is read before the
    first client is made."""

    def __init__(
        self,
        context: ProviderContext,
        registry: ProviderRegistry | None = None,
        *,
        shared_file: Path | None = None,
    ) -> None:
        self.settings = context.settings
        self.registry = registry if registry is not None else builtin_registry()
        self.context = context
        self._shared_file = shared_file
        self._received = shared_file is None
        self._routes: dict[str, Provider] = {}

    def provider(self, model_id: str) -> Provider:
        found = self._routes.get(model_id)
        if found is None:
            found = self._routes[model_id] = self.registry.for_model(model_id)
        return found

    def for_model(self, model: ModelConfig) -> ModelClient:
        if not self._received:
            self._receive()
        return self.provider(model.id).client(model, self.context)

    def request(
        self, model: ModelConfig, prompt: str | list[dict[str, str]], response_format: dict[str, Any] | None
    ) -> ChatRequest:
        cap = self.provider(model.id).max_tokens_cap
        return build_request(model, self.settings, prompt, response_format, max_tokens_cap=cap)

    def endpoint(self, model: ModelConfig, client: ModelClient) -> str:
        """Where a request goes, for its cache key."""
        return self.provider(model.id).endpoint(model, client)

    def pricing(self, model_id: str) -> Pricing | None:
        return self.provider(model_id).pricing(self.settings.model(model_id), self.context)

    def pricing_problems(self) -> list[str]:
        """Why prices are missing beyond a model's absence from /models (an endpoint unreachable)."""
        return [p for provider in self.registry for p in getattr(provider, "pricing_problems", list)()]

    def prepare(self, model_ids: Iterable[str]) -> list[str]:
        """Controller, before the first call: each provider starts what its models (and the marking
        model) need. Returns what the providers have to tell the user before the first call (a
        provider's optional `notices`: one-line messages, e.g. a server's slot ceiling)."""
        wanted = set(model_ids) | set(self.settings.helper_ids)
        by_provider: dict[str, list[str]] = {}
        for model_id in sorted(wanted):
            by_provider.setdefault(self.provider(model_id).name, []).append(model_id)
        notices: list[str] = []
        for provider in self.registry:
            if provider.name in by_provider:
                provider.prepare(by_provider[provider.name], self.context)
                notices.extend(getattr(provider, "notices", ()))
        return notices

    def share(self, path: Path) -> None:
        """Controller: write every provider's worker data where xdist workers read it."""
        data = {p.name: p.worker_data() for p in self.registry}
        temp = path.with_suffix(".tmp")
        temp.write_text(json.dumps({name: d for name, d in data.items() if d}), encoding="utf-8")
        temp.replace(path)  # a worker never reads a half-written file

    def _receive(self) -> None:
        assert self._shared_file is not None
        if not self._shared_file.is_file():
            return  # nothing shared yet: asked again at the next call
        data = json.loads(self._shared_file.read_text(encoding="utf-8"))
        for provider in self.registry:
            if provider.name in data:
                provider.from_worker_data(data[provider.name])
        self._received = True

    def cancel(self) -> None:
        """The session is stopping (-x, --maxfail, Ctrl-C): calls in flight send no further retry, and
        calls waiting for a slot are not sent."""
        self.context.cancel.set()

    def close(self) -> None:
        """Close every provider's clients and stop what they started. Idempotent."""
        for provider in self.registry:
            provider.close()
