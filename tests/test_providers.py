"""Providers: the registry's precedence, the pool's per-provider decisions, and a conftest provider
registered through `pytest_helmbench_register_providers` answering cases end to end."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from pytest_helmbench.config import ModelConfig, Settings
from pytest_helmbench.errors import HelmbenchError
from pytest_helmbench.providers.base import InProcessClient, ModelClient, Provider, ProviderContext
from pytest_helmbench.providers.builtin import builtin_registry
from pytest_helmbench.providers.chat import ChatRequest, Pricing
from pytest_helmbench.providers.local import LocalProvider
from pytest_helmbench.providers.pool import ClientPool
from pytest_helmbench.providers.registry import ProviderRegistry
from pytest_helmbench.providers.remote import HttpProvider
from tests.benchfiles import write_benchmark

GOOD = {"category": "ANSWER", "response": "Mitochondria."}


class Fixed(InProcessClient):
    def answer(self, request: ChatRequest) -> str:
        return json.dumps(GOOD)


class Echo(Provider):
    """Answers `echo/…` ids in this process."""

    name = "echo"

    def __init__(self, prefix: str = "echo/") -> None:
        self.prefix = prefix

    def handles(self, model_id: str) -> bool:
        return model_id.startswith(self.prefix)

    def client(self, model: ModelConfig, context: ProviderContext) -> ModelClient:
        return Fixed(self.name)


def settings(**overrides: object) -> Settings:
    values: dict = dict(
        models=(ModelConfig("openai/gpt-4o-mini"),),
        marking_model=None,
        db_url="sqlite://",
        base_url="http://127.0.0.1:9/api/v1",
        api="openrouter",
        dry_run=False,
        temperature=0.0,
        max_tokens=4096,
        seed=None,
        timeout=5.0,
        retries=0,
        backoff=0.0,
        api_key="",
    )
    values.update(overrides)
    return Settings(**values)


# ---- registry ------------------------------------------------------------------------------------


def test_unknown_ids_go_to_http_and_local_ids_to_the_local_provider() -> None:
    registry = builtin_registry()
    assert [p.name for p in registry] == ["local", "oracle", "http"]
    assert registry.for_model("openai/gpt-4o-mini").name == "http"
    assert registry.for_model("some-new/model").name == "http"
    assert registry.for_model("local/smollm2").name == "local"
    assert registry.for_model("local/").name == "http"  # a prefix alone names no local model


def test_a_provider_added_after_the_builtins_still_takes_over_their_ids() -> None:
    registry = builtin_registry()
    registry.add(Echo(prefix="local/"))
    assert [p.name for p in registry] == ["echo", "local", "oracle", "http"]
    assert registry.for_model("local/smollm2").name == "echo"
    assert registry.for_model("openai/gpt-4o-mini").name == "http"


def test_names_are_unique_and_an_empty_registry_answers_nothing() -> None:
    registry = ProviderRegistry()
    with pytest.raises(HelmbenchError, match="no provider answers the model id 'x/y'"):
        registry.for_model("x/y")
    registry.add(Echo())
    with pytest.raises(HelmbenchError, match="'echo' is already registered"):
        registry.add(Echo(), last=True)


# ---- the pool asks the model's provider ------------------------------------------------------------


def test_local_models_need_no_key_get_a_max_tokens_cap_and_a_stable_cache_endpoint() -> None:
    pool = ClientPool(ProviderContext(settings()))
    local, remote = ModelConfig("local/smollm2"), ModelConfig("openai/gpt-4o-mini")
    assert not pool.provider(local.id).needs_key(local) and pool.provider(remote.id).needs_key(remote)
    assert pool.request(local, "hi", {}).max_tokens == 512
    assert pool.request(ModelConfig("local/smollm2", max_tokens=900), "hi", {}).max_tokens == 900
    assert pool.request(remote, "hi", {}).max_tokens == 4096
    local_client, remote_client = pool.for_model(local), pool.for_model(remote)
    assert local_client.api == "openai" and remote_client.api == "openrouter"
    assert pool.endpoint(local, local_client) == "local:local/smollm2"
    assert pool.endpoint(remote, remote_client) == "http://127.0.0.1:9/api/v1"
    assert pool.pricing("local/smollm2") == Pricing(0.0, 0.0)
    assert pool.for_model(remote) is remote_client  # one client per endpoint, reused
    pool.close()


def test_http_clients_are_shared_per_endpoint() -> None:
    pool = ClientPool(ProviderContext(settings()))
    a, b = pool.for_model(ModelConfig("a/x")), pool.for_model(ModelConfig("b/y"))
    own = pool.for_model(ModelConfig("c/z", base_url="http://127.0.0.1:8/v1"))
    assert a is b and own is not a and own.base_url == "http://127.0.0.1:8/v1"
    pool.close()


def test_workers_receive_what_the_controller_prepared(tmp_path: Path) -> None:
    controller = ClientPool(ProviderContext(settings()))
    local = controller.registry.for_model("local/m.gguf")
    assert isinstance(local, LocalProvider)
    local.replicas["local/m.gguf"] = ("http://127.0.0.1:4321/v1", "http://127.0.0.1:4322/v1")  # as prepare()
    shared = tmp_path / "providers.json"
    controller.share(shared)
    worker = ClientPool(ProviderContext(settings()), shared_file=shared)
    client = worker.for_model(ModelConfig("local/m.gguf"))
    assert client.base_url == "http://127.0.0.1:4321/v1"
    assert client.urls == local.replicas["local/m.gguf"]  # a worker spreads its calls over every replica
    assert worker.endpoint(ModelConfig("local/m.gguf"), client) == "local:local/m.gguf"
    worker.close()
    controller.close()


def test_prepare_gives_each_provider_its_models_and_the_marking_model(tmp_path: Path) -> None:
    class Recording(Echo):
        def __init__(self) -> None:
            super().__init__()
            self.prepared: list[list[str]] = []

        def prepare(self, model_ids, context) -> None:
            self.prepared.append(list(model_ids))

    registry = ProviderRegistry()
    recording = Recording()
    registry.add(recording)
    registry.add(HttpProvider(), last=True)
    pool = ClientPool(ProviderContext(settings(marking_model=ModelConfig("echo/judge")), tmp_path), registry)
    pool.prepare({"echo/b", "openai/gpt-4o-mini", "echo/a"})
    assert recording.prepared == [["echo/a", "echo/b", "echo/judge"]]


def test_in_process_answers_are_complete_free_and_replayable() -> None:
    client = Fixed("echo")
    request = ChatRequest(model="echo/x", messages=[{"role": "user", "content": "hi"}], response_format={})
    response = client.complete(request)
    assert json.loads(response.content or "") == GOOD
    assert (response.finish_reason, response.cost_usd, response.attempts) == ("stop", 0.0, 1)
    replayed = client.parse_completion(response.raw, model="echo/x", latency_ms=0.0, attempts=0)
    assert replayed.content == response.content


# ---- a conftest provider, end to end ----------------------------------------------------------------

CONFTEST = """
import json

from pytest_helmbench.providers.base import InProcessClient, Provider


class Fixed(InProcessClient):
    def answer(self, request):
        return json.dumps({"category": "ANSWER", "response": "Mitochondria."})


class Echo(Provider):
    name = "echo"

    def handles(self, model_id):
        return model_id.startswith(("echo/", "local/"))

    def client(self, model, context):
        return Fixed(self.name)


def pytest_helmbench_register_providers(registry):
    registry.add(Echo())
"""


def test_the_docs_example_is_this_conftest() -> None:
    """docs/how-to/write-a-provider.md shows this conftest, answering `echo/…` only (the page says that
    the test also takes over `local/…`)."""
    page = Path(__file__).resolve().parent.parent / "docs" / "how-to" / "write-a-provider.md"
    shown = CONFTEST.replace('model_id.startswith(("echo/", "local/"))', 'model_id.startswith("echo/")')
    assert shown != CONFTEST
    assert f"```python\n{shown.strip()}\n```" in page.read_text(encoding="utf-8")


@pytest.mark.parametrize("model", ["echo/fixed", "local/smollm2"])
def test_a_conftest_provider_answers_cases_end_to_end(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, model: str
) -> None:
    """No key (the provider needs none), no server: `local/…` is taken over from the built-in."""
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    monkeypatch.setenv("OPENROUTER_BASE_URL", "http://127.0.0.1:9/api/v1")  # nothing may reach it
    for name in ("HELMBENCH_MODEL", "HELMBENCH_DB", "HELMBENCH_DRY_RUN", "HELMBENCH_SELECT"):
        monkeypatch.delenv(name, raising=False)
    pytester.makeini("[pytest]\n")
    write_benchmark(pytester.path / "benchmark")
    pytester.makeconftest(CONFTEST)
    result = pytester.runpytest(
        "benchmark", f"--helmbench-model={model}", "--helmbench-select=PT1", "-p", "no:randomly"
    )
    result.assert_outcomes(passed=4)
    assert "dry run" not in result.stdout.str()
    assert not (pytester.path / ".helmbench").exists()  # no local server was started
    with sqlite3.connect(pytester.path / "helmbench.db") as conn:
        stored = conn.execute("select status, parsed_answer, cost_usd from result").fetchall()
    assert len(stored) == 4
    assert all(s == "passed" and json.loads(a) == GOOD and c == 0.0 for s, a, c in stored)
