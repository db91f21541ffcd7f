"""Fixtures shared by the test suite: a loopback OpenRouter server and small benchmark trees."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from benchfiles import API_KEY  # noqa: E402
from openrouter_server import FakeOpenRouter  # noqa: E402


@pytest.fixture
def fake_openrouter() -> Iterator[FakeOpenRouter]:
    """A faithful OpenRouter stand-in on 127.0.0.1 that only accepts API_KEY."""
    with FakeOpenRouter(api_keys={API_KEY}) as server:
        yield server


@pytest.fixture
def helm_env(monkeypatch: pytest.MonkeyPatch, fake_openrouter: FakeOpenRouter) -> FakeOpenRouter:
    """Point HELMBench at the fake server with a valid key, fast retries, for in-process pytester runs."""
    monkeypatch.setenv("OPENROUTER_API_KEY", API_KEY)
    monkeypatch.setenv("OPENROUTER_BASE_URL", fake_openrouter.base_url)
    monkeypatch.setenv("HELMBENCH_BACKOFF", "0.01")
    for name in ("HELMBENCH_MODEL", "HELMBENCH_DB", "HELMBENCH_DRY_RUN", "HELMBENCH_SELECT"):
        monkeypatch.delenv(name, raising=False)
    return fake_openrouter
