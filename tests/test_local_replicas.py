"""A small local model's replicas: how many are started, and how calls are spread over them."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from pytest_helmbench.providers.chat import ChatRequest
from pytest_helmbench.providers.http import ClientOptions
from pytest_helmbench.providers.local import _local_client_class
from pytest_helmbench.providers.local import server as local_server
from pytest_helmbench.providers.local.replicas import Replicas, affinity_key
from tests.openrouter_server import FakeOpenRouter


@pytest.mark.parametrize(
    ("cpus", "size", "plan"),
    [
        (1, 100_000_000, (1, 1, 2)),  # one CPU: one server
        (2, 100_000_000, (2, 1, 1)),  # SmolLM2-135M on this project's machines: two single-thread servers
        (4, 100_000_000, (4, 1, 1)),
        (16, 100_000_000, (4, 3, 1)),  # at most four, their threads leaving a core to the harness
        (16, 4_000_000_000, (1, 15, 2)),  # a 7B model: one server (each replica holds its own context)
    ],
)
def test_a_small_model_gets_single_thread_servers_and_a_large_one_a_single_server(
    monkeypatch: pytest.MonkeyPatch, cpus: int, size: int, plan: tuple[int, int, int]
) -> None:
    monkeypatch.setattr(local_server, "usable_cpus", lambda: cpus)
    assert local_server.replica_plan(size) == local_server.ServerPlan(*plan)


def test_calls_go_to_the_least_busy_replica_and_a_prefix_back_to_its_replica_on_a_tie() -> None:
    replicas = Replicas(2)
    assert replicas.pick("a") == 0  # both idle: the first
    assert replicas.pick("b") == 1  # 0 is busy: the idle one
    replicas.done(0)
    replicas.done(1)
    assert replicas.pick("b") == 1  # both idle: where b went last (its prefix may still be cached there)
    assert replicas.pick("b") == 0  # 1 is busy: the idle one, though b's prefix is on 1
    assert replicas.in_flight() == (1, 1)
    with replicas.held("c") as index:
        assert replicas.in_flight()[index] == 2
    assert replicas.in_flight() == (1, 1)
    with pytest.raises(ValueError):
        Replicas(0)


def test_an_affinity_key_is_the_first_message_s_opening() -> None:
    def body(system: str, user: str) -> dict:
        return {"messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}

    assert affinity_key(body("rubric A", "reply 1")) == affinity_key(body("rubric A", "reply 2"))
    assert affinity_key(body("rubric A", "x")) != affinity_key(body("rubric B", "x"))
    assert affinity_key({}) == affinity_key({"messages": "not a list"})  # no crash on an odd body


@pytest.fixture
def two_servers():
    with (
        FakeOpenRouter(api_keys={"k"}, latency=0.1) as one,
        FakeOpenRouter(api_keys={"k"}, latency=0.1) as two,
    ):
        yield one, two


def _client(servers: tuple[FakeOpenRouter, ...]):
    options = ClientOptions(api="openai", retries=0, backoff=0.0, free=True)
    client = _local_client_class()(servers[0].openai_base_url, "k", options)
    client.spread_over([server.openai_base_url for server in servers], [])
    return client


def _request(system: str, user: str) -> ChatRequest:
    return ChatRequest(
        "local/x", [{"role": "system", "content": system}, {"role": "user", "content": user}], None
    )


def test_concurrent_calls_to_a_local_model_are_spread_over_its_replicas(two_servers) -> None:
    client = _client(two_servers)
    try:
        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(lambda n: client.complete(_request("rubric", f"reply {n}")), range(8)))
    finally:
        client.close()
    assert all(answer.content is not None for answer in answers)
    counts = [len(server.chat_requests) for server in two_servers]
    assert sum(counts) == 8 and min(counts) >= 3, counts  # both read prompts at once
    assert all(server.max_in_flight >= 1 for server in two_servers)


def test_one_at_a_time_a_system_message_s_calls_stay_on_one_replica(two_servers) -> None:
    client = _client(two_servers)
    try:
        for n in range(3):
            client.complete(_request("rubric A", f"reply {n}"))
        for n in range(2):
            client.complete(_request("rubric B", f"reply {n}"))
    finally:
        client.close()
    by_server = [[r.body["messages"][0]["content"] for r in server.chat_requests] for server in two_servers]
    assert sorted(by_server, key=len, reverse=True)[0].count("rubric A") == 3  # all three on one replica
    assert any(msgs.count("rubric B") == 2 for msgs in by_server)
