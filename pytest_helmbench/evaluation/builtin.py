"""HELMBench's own evaluators, registered through the same hook a conftest.py or plugin implements.

plugin.py registers this module with pytest's plugin manager in pytest_configure. The evaluator
modules are imported inside the hook, not here: this module loads in every pytest session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .registry import EvaluatorRegistry


@pytest.hookimpl
def pytest_helmbench_register_evaluators(registry: EvaluatorRegistry) -> None:
    from .category_match import CategoryMatch
    from .list_includes import ListIncludes
    from .reply_language import ReplyLanguage
    from .resource_check import ResourceCheck
    from .sqe import StructuredQualitative

    registry.add(CategoryMatch())
    registry.add(ListIncludes())
    registry.add(ReplyLanguage())
    registry.add(ResourceCheck())
    registry.add(StructuredQualitative())


def builtin_registry() -> EvaluatorRegistry:
    """A registry of the built-ins alone, for code outside a pytest session (the CLI, unit tests)."""
    from .registry import EvaluatorRegistry

    registry = EvaluatorRegistry()
    pytest_helmbench_register_evaluators(registry)
    return registry
