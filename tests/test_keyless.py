"""A keyless OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio): runs without
OPENROUTER_API_KEY, never silently as a dry run; a dry run says so, and why, before anything else;
a server's published slots (llama.cpp's /props) cap the calls in flight to it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from pytest_helmbench.config import ModelConfig, Settings
from pytest_helmbench.providers.chat import CallError, ChatRequest
from pytest_helmbench.providers.http import ChatClient, ClientOptions
from pytest_helmbench.trust import OPENROUTER_BASE_URL, OptionSource
from tests.benchfiles import API_KEY, STRICT_SCHEMA, write_benchmark
from tests.openrouter_server import FakeOpenRouter, Reply

GOOD = {"category": "ANSWER", "response": "Mitochondria."}
LOCAL = "local-llama"


@pytest.fixture
def server() -> Iterator[FakeOpenRouter]:
    """A local OpenAI-compatible server that asks for no key."""
    with FakeOpenRouter() as fake:
        fake.require_key = False
        fake.add_rule(reply=Reply.ok(GOOD))
        yield fake


@pytest.fixture
def bench(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    pytester.makeini("[pytest]\n")
    for name in ("OPENROUTER_API_KEY", "OPENROUTER_BASE_URL", "HELMBENCH_MODEL", "HELMBENCH_DRY_RUN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HELMBENCH_BACKOFF", "0.01")
    return write_benchmark(pytester.path / "benchmark", models=f"models:\n  - id: {LOCAL}\n")


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("benchmark", *args)


def authorizations(server: FakeOpenRouter) -> set[str | None]:
    return {request.headers.get("authorization") for request in server.requests if request.is_chat}


def helmbench_lines(result: pytest.RunResult) -> list[str]:
    return [line for line in result.stdout.lines if line.startswith("HELMBench")]


@pytest.mark.parametrize("given", ["command line", "environment"])
def test_an_openai_endpoint_runs_without_openrouter_key(pytester, bench, server, monkeypatch, given):
    args = ["--helmbench-api=openai"]
    if given == "command line":
        args.append(f"--helmbench-base-url={server.openai_base_url}")
    else:
        monkeypatch.setenv("OPENROUTER_BASE_URL", server.openai_base_url)
    result = run(pytester, *args)
    result.assert_outcomes(passed=8)
    assert authorizations(server) == {None}  # no key, no Authorization header at all
    assert "dry run" not in result.stdout.str()
    assert (pytester.path / "helmbench.db").exists()


def test_the_openrouter_key_still_goes_to_an_openai_endpoint_given_on_the_command_line(
    pytester, bench, server, monkeypatch
):
    """The key rule is unchanged: set, it goes to a base URL the user gave (never to an ini's)."""
    monkeypatch.setenv("OPENROUTER_API_KEY", API_KEY)
    run(pytester, "--helmbench-api=openai", f"--helmbench-base-url={server.openai_base_url}").assert_outcomes(
        passed=8
    )
    assert authorizations(server) == {f"Bearer {API_KEY}"}
    server.reset()
    server.add_rule(reply=Reply.ok(GOOD))
    pytester.makeini(f"[pytest]\nhelmbench_base_url = {server.openai_base_url}\nhelmbench_api = openai\n")
    run(pytester, "--helmbench-cache=off").assert_outcomes(passed=8)
    assert authorizations(server) == {None}


def test_a_server_that_wants_a_key_stops_the_model_with_a_clear_reason_not_a_dry_run(pytester, bench, server):
    server.require_key = True
    result = run(pytester, "--helmbench-api=openai", f"--helmbench-base-url={server.openai_base_url}")
    out = result.stdout.str()
    assert f"STOPPED {LOCAL}: HTTP 401" in out
    assert "the server wants a key and none was sent" in out
    assert "dry run" not in out


def test_without_a_key_an_openrouter_run_is_a_dry_run_that_says_why_first(pytester, bench, server):
    result = run(pytester, f"--helmbench-base-url={server.base_url}", "-q")
    result.assert_outcomes(skipped=8)
    first = result.stdout.lines[0]
    assert first.startswith("HELMBench: dry run — OPENROUTER_API_KEY is not set: "), result.stdout.str()
    assert "--helmbench-api openai" in first  # how to reach a keyless server instead
    assert server.requests == []


@pytest.mark.parametrize(
    ("how", "why"),
    [
        ("option", "--helmbench-dry-run given"),
        ("environment", "HELMBENCH_DRY_RUN is set"),
        ("ini", "helmbench_dry_run is set in tox.ini"),
    ],
)
def test_a_dry_run_says_so_and_why_before_any_case(pytester, bench, server, monkeypatch, how, why):
    args = ["--helmbench-api=openai", f"--helmbench-base-url={server.openai_base_url}"]
    if how == "option":
        args.append("--helmbench-dry-run")
    elif how == "environment":
        monkeypatch.setenv("HELMBENCH_DRY_RUN", "1")
    else:
        pytester.makeini("[pytest]\nhelmbench_dry_run = true\n")
    result = run(pytester, *args)
    result.assert_outcomes(skipped=8)
    assert helmbench_lines(result)[0] == (
        f"HELMBench: dry run — {why}: every case is composed and validated; nothing is sent or recorded"
    )
    lines = result.stdout.lines
    progress = next(i for i, line in enumerate(lines) if line.startswith("benchmark/scenarios/"))
    assert lines.index(helmbench_lines(result)[0]) < progress  # said before the first case
    assert server.requests == []


def test_a_model_whose_named_key_is_unset_is_said_to_be_a_dry_run(pytester, bench, server, monkeypatch):
    monkeypatch.delenv("OTHER_SERVER_KEY", raising=False)
    (bench / "models.yml").write_text(
        f"models:\n  - id: {LOCAL}\n  - id: other\n    base_url: {server.openai_base_url}\n"
        "    api: openai\n    api_key_env: OTHER_SERVER_KEY\n"
    )
    result = run(pytester, "--helmbench-api=openai", f"--helmbench-base-url={server.openai_base_url}")
    result.assert_outcomes(passed=8, skipped=8)
    assert helmbench_lines(result)[0].startswith(
        "HELMBench: dry run for other — OTHER_SERVER_KEY (api_key_env in models.yml) is not set"
    )


def test_the_slots_a_server_publishes_cap_the_calls_in_flight(pytester, bench, server):
    """A 2-slot llama.cpp server and the default 8 calls in flight: 2 are sent at a time (the others wait
    on this side, where no timeout runs), each case is asked once, and the ceiling is said once."""
    server.total_slots = 2
    server.latency = 0.2
    result = run(pytester, "--helmbench-api=openai", f"--helmbench-base-url={server.openai_base_url}")
    result.assert_outcomes(passed=8)
    assert server.max_in_flight <= 2
    assert len(server.chat_requests) == 8  # no call timed out and was sent again
    said = [line for line in helmbench_lines(result) if "/props" in line]
    assert said == [
        f"HELMBench: {server.openai_base_url} decodes 2 request(s) at once (its /props): "
        "at most 2 call(s) in flight to it"
    ]


# ---- the client on its own ---------------------------------------------------------------------


def request() -> ChatRequest:
    return ChatRequest(
        model=LOCAL, messages=[{"role": "user", "content": "hi"}], response_format=STRICT_SCHEMA
    )


def test_probe_reads_total_slots_and_sets_the_ceiling(server):
    server.total_slots = 3
    chat = ChatClient(server.openai_base_url, "", ClientOptions(api="openai"))
    try:
        assert chat.probe_slots(8) == 3
        assert chat.slots == 3 and chat._slot_gate is not None
        assert chat.probe_slots(2) == 3  # a ceiling above the concurrency changes nothing
    finally:
        chat.close()
    wide = ChatClient(server.openai_base_url, "", ClientOptions(api="openai"))
    try:
        assert wide.probe_slots(2) == 3 and wide._slot_gate is None
    finally:
        wide.close()


@pytest.mark.parametrize(
    "answer",
    [
        httpx.Response(404, text="Not Found"),
        httpx.Response(200, text="<html>not json</html>"),
        httpx.Response(200, json={"total_slots": True}),
        httpx.Response(200, json={"total_slots": 0}),
        httpx.Response(200, json=[1, 2]),
    ],
    ids=["404", "not-json", "bool", "zero", "list"],
)
def test_a_server_without_slots_keeps_the_configured_concurrency(answer):
    chat = ChatClient("http://127.0.0.1:9/v1", "", ClientOptions(api="openai"))
    chat._http = httpx.Client(transport=httpx.MockTransport(lambda request: answer))
    try:
        assert chat.probe_slots(8) is None
        assert chat.slots is None and chat._slot_gate is None
    finally:
        chat.close()


def test_a_local_server_that_times_out_is_not_asked_again(server):
    """It may still be decoding the request: a retry would double its load. The error says what to do."""
    server.script(Reply.stall(3))
    chat = ChatClient(
        server.openai_base_url, "", ClientOptions(api="openai", timeout=0.3, retries=3, backoff=0.0)
    )
    with pytest.raises(CallError) as info:
        chat.complete(request())
    chat.close()
    assert len(server.chat_requests) == 1
    assert info.value.attempts == 1
    assert "not retried" in info.value.reason and "--helmbench-timeout" in info.value.reason


# ---- which models are dry runs -----------------------------------------------------------------


def settings(base_url: str, api: str, source: OptionSource, key: str = "") -> Settings:
    return Settings(
        models=(),
        marking_model=None,
        db_url="sqlite:///x.db",
        base_url=base_url,
        api=api,
        dry_run=False,
        temperature=0.0,
        max_tokens=10,
        seed=None,
        timeout=1.0,
        retries=0,
        backoff=0.0,
        api_key=key,
        base_url_source=source,
    )


@pytest.mark.parametrize(
    ("base_url", "api", "source", "model", "dry"),
    [
        ("http://127.0.0.1:8080/v1", "openai", OptionSource.CLI, ModelConfig("m"), False),
        ("https://vllm.example.org/v1", "openai", OptionSource.ENV, ModelConfig("m"), False),
        ("http://127.0.0.1:8080/v1", "openrouter", OptionSource.CLI, ModelConfig("m"), True),
        (OPENROUTER_BASE_URL, "openai", OptionSource.DEFAULT, ModelConfig("m"), True),
        (OPENROUTER_BASE_URL, "openrouter", OptionSource.DEFAULT, ModelConfig("m"), True),
        (
            OPENROUTER_BASE_URL,
            "openrouter",
            OptionSource.DEFAULT,
            ModelConfig("m", base_url="http://localhost:1234/v1", api="openai", api_key_env="LMS_KEY"),
            True,
        ),
        (
            OPENROUTER_BASE_URL,
            "openrouter",
            OptionSource.DEFAULT,
            ModelConfig("m", base_url="http://localhost:11434/v1", api="openai"),
            False,
        ),
    ],
    ids=[
        "cli-openai",
        "env-openai-remote",
        "cli-openrouter",
        "openrouter-url",
        "default",
        "named-key",
        "yml",
    ],
)
def test_which_models_need_a_key(base_url, api, source, model, dry):
    assert settings(base_url, api, source).is_dry_run(needs_key=True, model=model) is dry
    assert settings(base_url, api, source, key=API_KEY).is_dry_run(needs_key=True, model=model) is (
        dry and model.api_key_env is not None
    )
