"""The HTTP provider: OpenRouter, or any OpenAI-compatible server (`--helmbench-api openai`).

It answers every model id no other provider takes, through `ChatClient` (providers/http.py), with the
run's base URL and API kind unless the model's own models.yml entry names others. The key it sends is
`Settings.credential`'s: OPENROUTER_API_KEY only to OpenRouter or a base URL the user gave on the command
line or in the environment; a models.yml or ini base URL gets the key its model names, or none. An
OpenAI-compatible server other than OpenRouter needs no key at all (`Settings.key_optional`). Before the
first call, each such server is asked how many requests it decodes at once (llama.cpp's /props), and
that is the ceiling on calls in flight to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..config import KEY_ENV, ModelConfig
from ..redaction import Secret, redact
from .base import ClientCache, ModelClient, Provider, ProviderContext
from .prices import price_file

if TYPE_CHECKING:
    from .chat import Pricing
    from .http import ChatClient


class HttpProvider(Provider):
    """Paid API calls: they need the key, share the process's rate limit, and are priced by /models."""

    name = "http"

    def __init__(self) -> None:
        self._clients = ClientCache()
        self.notices: list[str] = []  # said in the terminal before the first call (ClientPool.prepare)
        self._slots: dict[str, int | None] = {}  # base URL -> the slots it published (None: none)

    def handles(self, model_id: str) -> bool:
        return True

    def needs_key(self, model: ModelConfig) -> bool:
        return True

    def client(self, model: ModelConfig, context: ProviderContext) -> ChatClient:
        """One client per endpoint (base URL, API kind, timeout): models on it share its connections."""
        settings = context.settings
        base_url = model.base_url or settings.base_url
        api = model.api or settings.api
        timeout = model.timeout or settings.timeout
        credential = settings.credential(model)  # None: this endpoint gets no key (settings.credential)

        def create() -> ChatClient:
            from .http import ChatClient, ClientOptions

            options = ClientOptions(
                api=api,
                timeout=timeout,
                retries=settings.retries,
                backoff=settings.backoff,
                key_env=credential.env if credential else KEY_ENV,
                prices=price_file(settings.prices_file),
            )
            key = credential.key if credential else Secret()
            return ChatClient(base_url, key, options, limiter=context.limiter, cancel=context.cancel)

        return self._clients.get((base_url, api, timeout, credential and credential.env), create)

    def prepare(self, model_ids: Sequence[str], context: ProviderContext) -> None:
        """Controller, before the first call: the slot count each OpenAI-compatible server (other than
        OpenRouter) publishes becomes the ceiling on calls in flight to it, said once per server."""
        settings = context.settings
        for model_id in model_ids:
            model = settings.model(model_id)
            if not settings.key_optional(model) or settings.missing_key(model):  # a dry run asks nothing
                continue
            client = self.client(model, context)
            if client.base_url in self._slots:  # asked once per server; its other clients share the answer
                client.limit_slots(self._slots[client.base_url], settings.concurrency)
                continue
            slots = self._slots[client.base_url] = client.probe_slots(settings.concurrency)
            if slots is not None:
                ceiling = min(slots, settings.concurrency)
                self.notices.append(
                    f"HELMBench: {redact(client.base_url)} decodes {slots} request(s) at once (its /props): "
                    f"at most {ceiling} call(s) in flight to it"
                )

    def pricing(self, model: ModelConfig, context: ProviderContext) -> Pricing | None:
        return self.client(model, context).pricing(model.id)

    def pricing_problems(self) -> list[str]:
        """Why an endpoint's /models gave no prices (each said once; none when all answered)."""
        return sorted({c.pricing_problem for c in self._clients.values() if c.pricing_problem})

    def endpoint(self, model: ModelConfig, client: ModelClient) -> str:
        return client.base_url

    def close(self) -> None:
        self._clients.close()
