"""HELMBench's own evaluators, added through the same hook a conftest.py or plugin implements
(`pytest_helmbench_register_evaluators`, implemented by the plugin with `add_builtins`). The evaluator
modules are imported inside the function, not here: this module loads in every pytest session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .registry import EvaluatorRegistry


def add_builtins(registry: EvaluatorRegistry) -> None:
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
    add_builtins(registry)
    return registry
