"""The HTTP provider: OpenRouter, or any OpenAI-compatible server (`--helmbench-api openai`).

It answers every model id no other provider takes, through `ChatClient` (providers/http.py), with the
run's base URL and API kind unless the model's own models.yml entry names others. The key it sends is
`Settings.credential`'s: OPENROUTER_API_KEY only to OpenRouter or a base URL the user gave on the command
line or in the environment; a models.yml or ini base URL gets the key its model names, or none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..config import ModelConfig
from ..redaction import Secret
from .base import ClientCache, ModelClient, Provider, ProviderContext

if TYPE_CHECKING:
    from .chat import Pricing
    from .http import ChatClient


class HttpProvider(Provider):
    """Paid API calls: they need the key, share the process's rate limit, and are priced by /models."""

    name = "http"

    def __init__(self) -> None:
        self._clients = ClientCache()

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
            from .http import ChatClient

            return ChatClient(
                base_url,
                credential.key if credential else Secret(),
                api=api,
                timeout=timeout,
                retries=settings.retries,
                backoff=settings.backoff,
                limiter=context.limiter,
                cancel=context.cancel,
            )

        return self._clients.get((base_url, api, timeout, credential and credential.env), create)

    def pricing(self, model: ModelConfig, context: ProviderContext) -> Pricing | None:
        return self.client(model, context).pricing(model.id)

    def endpoint(self, model: ModelConfig, client: ModelClient) -> str:
        return client.base_url

    def close(self) -> None:
        self._clients.close()
