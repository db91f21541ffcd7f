"""The built-in providers, added through the same hook a third-party plugin implements
(`pytest_helmbench_register_providers`, implemented by the plugin with `add_builtins`, trylast). The
providers are added last, so any other plugin's provider can take over an id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .registry import ProviderRegistry


def add_builtins(registry: ProviderRegistry) -> None:
    # Imported here: a pytest session that never builds the registry does not load them.
    from .local import LocalProvider
    from .oracle import OracleProvider
    from .remote import HttpProvider

    registry.add(LocalProvider(), last=True)
    registry.add(OracleProvider(), last=True)  # `oracle/…` ids: answers from the benchmark's references
    registry.add(HttpProvider(), last=True)  # answers any id: consulted after every other provider


def builtin_registry() -> ProviderRegistry:
    """Only the built-in providers (code that runs without pytest's plugin manager)."""
    from .registry import ProviderRegistry

    registry = ProviderRegistry()
    add_builtins(registry)
    return registry
