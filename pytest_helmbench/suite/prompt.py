"""Compose a case into the exact text and request sent to the model (test cases -> prompt)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from .cases import Case


@dataclass(frozen=True)
class ComposedPrompt:
    """The single user message of a case and the response_format sent with it."""

    text: str
    response_format: dict[str, Any]

    @property
    def hash(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    @property
    def messages(self) -> list[dict[str, str]]:
        return [{"role": "user", "content": self.text}]


def compose(case: Case) -> ComposedPrompt:
    """Scenario, condition, user context, perturbation: non-empty parts joined by a blank line."""
    parts = [
        case.scenario.text,
        case.condition.text,
        case.user_context.text if case.user_context else "",
        case.perturbation.text,
    ]
    return ComposedPrompt("\n\n".join(part for part in parts if part), case.scenario.response_format)
