"""HELMBench's own hooks: how evaluators and providers are registered (the built-ins use them too).

Added to pytest's plugin manager by `plugin.pytest_addhooks`, the way pytest-xdist adds its own.
A `conftest.py` or an installed plugin implements them to add a kind without touching HELMBench:

    def pytest_helmbench_register_evaluators(registry):
        registry.add(MyEvaluator())
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ..evaluation.registry import EvaluatorRegistry
    from ..providers.registry import ProviderRegistry


@pytest.hookspec
def pytest_helmbench_register_evaluators(registry: EvaluatorRegistry) -> None:
    """Add evaluation types (`evaluation: {type: NAME}` in a scenario) with `registry.add(...)`."""


@pytest.hookspec
def pytest_helmbench_register_providers(registry: ProviderRegistry) -> None:
    """Add providers (how a model id is answered: HTTP, the embedded local model…): `registry.add(...)`."""
