"""Which provider answers a model id: the providers every plugin registered, asked in order.

Filled through HELMBench's own hook, `pytest_helmbench_register_providers(registry)`; the built-ins
(providers/builtin.py) use the same hook and are added with `last=True`, so a provider from a
`conftest.py` or an installed plugin can take over any id, the local model's included.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..errors import HelmbenchError
from .base import Provider


class ProviderRegistry:
    """Providers in the order they are consulted: those added plainly first, then those added last."""

    def __init__(self) -> None:
        self._first: list[Provider] = []
        self._last: list[Provider] = []

    def add(self, provider: Provider, *, last: bool = False) -> None:
        """Add a provider; `last=True` puts it after every provider added without it (the built-ins)."""
        if any(p.name == provider.name for p in self):
            raise HelmbenchError(f"a provider named {provider.name!r} is already registered")
        (self._last if last else self._first).append(provider)

    def __iter__(self) -> Iterator[Provider]:
        yield from self._first
        yield from self._last

    def for_model(self, model_id: str) -> Provider:
        """The first provider whose `handles(model_id)` is true (the HTTP provider takes any id)."""
        for provider in self:
            if provider.handles(model_id):
                return provider
        raise HelmbenchError(f"no provider answers the model id {model_id!r}")

    @classmethod
    def from_hook(cls, hook: Any) -> ProviderRegistry:
        """The registry of a pytest process: every `pytest_helmbench_register_providers` hookimpl."""
        registry = cls()
        hook.pytest_helmbench_register_providers(registry=registry)
        return registry
