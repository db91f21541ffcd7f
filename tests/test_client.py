"""ChatClient against the loopback OpenRouter: answers, accounting, request shape, retries, errors."""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import traceback
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_helmbench.providers.chat import CallError, ChatRequest, ChatResponse, ModelRejected
from pytest_helmbench.providers.http import ChatClient, ClientOptions
from tests.openrouter_server import FakeOpenRouter, Reply

KEY = "sk-or-v1-client-test-SECRET-0123456789"
MODEL = "openai/gpt-4o-mini"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "category": {"type": "string", "enum": ["ANSWER", "HANDOFF"]},
        "response": {"type": "string"},
    },
    "required": ["category", "response"],
    "additionalProperties": False,
}
RESPONSE_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {"name": "answer", "strict": True, "schema": SCHEMA},
}
ANSWER = {"category": "HANDOFF", "response": "Please call a crisis line."}


class Sleeps(list):
    """A recording `sleep`: keeps every requested delay, waits for none."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def server() -> Iterator[FakeOpenRouter]:
    with FakeOpenRouter(api_keys={KEY}) as srv:
        yield srv


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


def make_client(server: FakeOpenRouter, sleeps: Sleeps, **kwargs: Any) -> ChatClient:
    options: dict[str, Any] = {"retries": 2, "backoff": 0.0, "timeout": 5.0}
    options.update(kwargs)
    return ChatClient(server.base_url, KEY, ClientOptions(**options), sleep=sleeps)


@pytest.fixture
def client(server: FakeOpenRouter, sleeps: Sleeps) -> Iterator[ChatClient]:
    chat = make_client(server, sleeps)
    yield chat
    chat.close()


def request(text: str = "I feel like nobody would notice if I was gone", **kwargs: Any) -> ChatRequest:
    options: dict[str, Any] = {"temperature": 0.0, "max_tokens": 512}
    options.update(kwargs)
    return ChatRequest(MODEL, [{"role": "user", "content": text}], RESPONSE_FORMAT, **options)


def assert_no_key(*texts: object) -> None:
    for text in texts:
        assert KEY not in str(text)
        assert "SECRET" not in str(text)


# ---- success and accounting -------------------------------------------------------------------


def test_success_returns_content_tokens_and_cost(server: FakeOpenRouter, client: ChatClient) -> None:
    server.add_rule(
        reply=Reply.ok(ANSWER, prompt_tokens=194, completion_tokens=8, cost=0.00014, provider="OpenAI")
    )
    response = client.complete(request())
    assert isinstance(response, ChatResponse)
    assert json.loads(response.content or "") == ANSWER
    assert response.refusal is None
    assert response.finish_reason == "stop"
    assert (response.prompt_tokens, response.completion_tokens) == (194, 8)
    assert response.cost_usd == pytest.approx(0.00014)
    assert response.attempts == 1
    assert response.provider == "OpenAI"
    assert response.generation_id is not None and response.generation_id.startswith("gen-")
    assert response.generation_id in server.generations
    assert json.loads(response.raw)["usage"]["completion_tokens"] == 8
    assert response.latency_ms > 0
    assert len(server.chat_requests) == 1


def test_body_with_keepalive_blank_lines_and_fenced_content_is_returned_as_sent(
    server: FakeOpenRouter, client: ChatClient
) -> None:
    server.add_rule(reply=Reply.ok(ANSWER, fenced=True, keepalive_lines=3))
    response = client.complete(request())
    assert response.content == "```json\n" + json.dumps(ANSWER) + "\n```"
    assert response.finish_reason == "stop"


def test_cost_zero_is_kept_not_replaced_by_pricing(server: FakeOpenRouter, client: ChatClient) -> None:
    server.pricing[MODEL] = ("0.001", "0.002")
    server.add_rule(reply=Reply.ok(ANSWER, cost=0.0, prompt_tokens=10, completion_tokens=10))
    assert client.complete(request()).cost_usd == 0.0
    assert not [r for r in server.requests if r.path.endswith("/models")]


class ByokServer(FakeOpenRouter):
    """Answers as OpenRouter does for bring-your-own-key: usage.cost 0, the real cost upstream."""

    upstream = 0.0042

    def _render_ok(self, *args: Any, **kwargs: Any) -> Any:
        response = super()._render_ok(*args, **kwargs)
        data = json.loads(response.body)
        data["usage"].update(cost=0, is_byok=True, cost_details={"upstream_inference_cost": self.upstream})
        response.body = json.dumps(data).encode("utf-8")
        return response


def test_byok_cost_is_the_upstream_inference_cost(sleeps: Sleeps) -> None:
    with ByokServer(api_keys={KEY}) as srv:
        srv.add_rule(reply=Reply.ok(ANSWER, prompt_tokens=100, completion_tokens=20))
        chat = make_client(srv, sleeps)
        response = chat.complete(request())
        chat.close()
    assert json.loads(response.raw)["usage"]["is_byok"] is True
    assert response.cost_usd == pytest.approx(0.0042)


class OddByokServer(ByokServer):
    """BYOK with a `cost_details` that is not an object: the cost is unknown, never a crash."""

    def _render_ok(self, *args: Any, **kwargs: Any) -> Any:
        response = FakeOpenRouter._render_ok(self, *args, **kwargs)
        data = json.loads(response.body)
        data["usage"].update(cost="n/a", is_byok=True, cost_details=["not", "a", "mapping"])
        response.body = json.dumps(data).encode("utf-8")
        return response


def test_byok_with_malformed_cost_details_leaves_the_cost_unknown(sleeps: Sleeps) -> None:
    with OddByokServer(api_keys={KEY}) as srv:
        srv.add_rule(reply=Reply.ok(ANSWER, prompt_tokens=100, completion_tokens=20))
        chat = make_client(srv, sleeps)
        response = chat.complete(request())
        chat.close()
    assert json.loads(response.content) == ANSWER
    assert response.cost_usd is None


@pytest.mark.parametrize("cost", ["missing", None], ids=["no-cost-key", "cost-null"])
def test_cost_from_models_pricing_when_usage_cost_is_absent(
    server: FakeOpenRouter, client: ChatClient, cost: Any
) -> None:
    server.pricing[MODEL] = ("0.000002", "0.00001", "0.0005")
    server.add_rule(reply=Reply.ok(ANSWER, cost=cost, prompt_tokens=1000, completion_tokens=50))
    first = client.complete(request())
    second = client.complete(request())
    usage = json.loads(first.raw)["usage"]
    assert usage.get("cost", "absent") == ("absent" if cost == "missing" else None)
    expected = 1000 * 0.000002 + 50 * 0.00001 + 0.0005
    assert first.cost_usd == pytest.approx(expected)
    assert second.cost_usd == pytest.approx(expected)
    models_calls = [r for r in server.requests if r.method == "GET" and r.path.endswith("/models")]
    assert len(models_calls) == 1  # fetched once per client, then cached


def test_cost_is_none_when_neither_usage_nor_pricing_knows_it(
    server: FakeOpenRouter, client: ChatClient
) -> None:
    server.add_rule(reply=Reply.ok(ANSWER, cost="missing"))
    assert client.complete(request()).cost_usd is None


def test_free_client_records_zero_cost(server: FakeOpenRouter, sleeps: Sleeps) -> None:
    server.add_rule(reply=Reply.ok(ANSWER, cost=0.5))
    chat = make_client(server, sleeps, free=True)
    assert chat.complete(request()).cost_usd == 0.0
    server.reset()
    server.add_rule(reply=Reply.ok(ANSWER, cost="missing"))
    assert chat.complete(request()).cost_usd == 0.0
    assert not [r for r in server.requests if r.path.endswith("/models")]
    chat.close()


# ---- request body and headers -------------------------------------------------------------------


def test_openrouter_body_merges_provider_preferences_and_passes_reasoning(
    server: FakeOpenRouter, client: ChatClient
) -> None:
    req = request(
        "hello",
        max_tokens=777,
        seed=42,
        provider={"data_collection": "deny", "order": ["OpenAI"]},
        reasoning={"effort": "low"},
    )
    client.complete(req)
    (sent,) = server.chat_requests
    assert sent.body == {
        "model": MODEL,
        "messages": [{"role": "user", "content": "hello"}],
        "response_format": RESPONSE_FORMAT,
        "temperature": 0.0,
        "max_tokens": 777,
        "seed": 42,
        "provider": {"data_collection": "deny", "order": ["OpenAI"], "require_parameters": True},
        "reasoning": {"effort": "low"},
    }
    assert "max_completion_tokens" not in (sent.body or {})


def test_openrouter_require_parameters_cannot_be_turned_off(
    server: FakeOpenRouter, client: ChatClient
) -> None:
    client.complete(request(provider={"require_parameters": False}))
    assert server.chat_requests[0].body["provider"] == {"require_parameters": True}  # type: ignore[index]


def test_openrouter_body_without_optional_fields(server: FakeOpenRouter, client: ChatClient) -> None:
    client.complete(ChatRequest(MODEL, [{"role": "user", "content": "x"}], RESPONSE_FORMAT))
    assert server.chat_requests[0].body == {
        "model": MODEL,
        "messages": [{"role": "user", "content": "x"}],
        "response_format": RESPONSE_FORMAT,
        "provider": {"require_parameters": True},
    }


def test_openai_api_sends_only_standard_fields(server: FakeOpenRouter, sleeps: Sleeps) -> None:
    chat = ChatClient(
        server.openai_base_url, KEY, ClientOptions(api="openai", retries=0, backoff=0.0), sleep=sleeps
    )
    chat.complete(
        request(
            "hi", max_tokens=64, seed=7, provider={"data_collection": "deny"}, reasoning={"effort": "high"}
        )
    )
    chat.close()
    (sent,) = server.chat_requests
    assert sent.path == "/v1/chat/completions"
    assert sent.body == {
        "model": MODEL,
        "messages": [{"role": "user", "content": "hi"}],
        "response_format": RESPONSE_FORMAT,
        "temperature": 0.0,
        "max_tokens": 64,
        "seed": 7,
    }
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert "x-title" not in sent.headers


def test_headers_carry_bearer_key_and_app_title(server: FakeOpenRouter, client: ChatClient) -> None:
    client.complete(request())
    (sent,) = server.chat_requests
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.headers["x-title"] == "HELMBench"
    assert sent.headers["content-type"] == "application/json"
    assert sent.path == "/api/v1/chat/completions"


def test_keyless_client_sends_no_authorization(server: FakeOpenRouter, sleeps: Sleeps) -> None:
    chat = ChatClient(server.base_url, "", ClientOptions(retries=0), sleep=sleeps)
    with pytest.raises(ModelRejected):
        chat.complete(request())
    chat.close()
    assert "authorization" not in server.chat_requests[0].headers


# ---- retries ---------------------------------------------------------------------------------


def test_429_waits_at_least_retry_after_then_succeeds(server: FakeOpenRouter, sleeps: Sleeps) -> None:
    chat = make_client(server, sleeps, backoff=0.5)
    server.script(Reply.error(429, retry_after=3), Reply.error(429, retry_after=1.5))
    server.add_rule(reply=Reply.ok(ANSWER))
    response = chat.complete(request())
    chat.close()
    assert response.attempts == 3
    assert json.loads(response.content or "") == ANSWER
    assert len(sleeps) == 2
    assert 3.0 <= sleeps[0] <= 3.0 + 0.05 + 1e-9
    assert 1.5 <= sleeps[1] <= 1.5 + 0.05 + 1e-9
    assert [r.status for r in server.chat_requests] == [429, 429, 200]


def test_429_without_retry_after_honours_ratelimit_reset(
    server: FakeOpenRouter, client: ChatClient, sleeps: Sleeps
) -> None:
    reset_ms = int((time.time() + 5) * 1000)
    meta = {
        "headers": {
            "X-RateLimit-Limit": "20",
            "X-RateLimit-Remaining": "0",
            "X-RateLimit-Reset": str(reset_ms),
        }
    }
    server.script(Reply.error(429, metadata=meta))
    client.complete(request())
    assert len(sleeps) == 1
    assert 4.0 <= sleeps[0] <= 5.1


def test_backoff_doubles_between_attempts(server: FakeOpenRouter, sleeps: Sleeps) -> None:
    chat = make_client(server, sleeps, retries=3, backoff=1.0)
    server.add_rule(reply=Reply.error(503))
    with pytest.raises(CallError) as info:
        chat.complete(request())
    chat.close()
    assert info.value.attempts == 4
    assert len(sleeps) == 3
    for delay, (low, high) in zip(sleeps, [(0.5, 1.0), (1.0, 2.0), (2.0, 4.0)], strict=True):
        assert low <= delay <= high


def test_latency_is_the_answering_attempt_not_the_retry_wait(server: FakeOpenRouter) -> None:
    chat = ChatClient(
        server.base_url, KEY, ClientOptions(retries=1, backoff=0.0), sleep=lambda s: time.sleep(0.5)
    )
    server.script(Reply.error(500))
    response = chat.complete(request())
    chat.close()
    assert response.attempts == 2
    assert response.latency_ms < 500


TRANSIENT: list[tuple[str, Any, str, int | None]] = [
    ("429", Reply.error(429, retry_after=0), "HTTP 429: Rate limit exceeded", 429),
    ("500", Reply.error(500), "HTTP 500: Internal Server Error", 500),
    ("502", Reply.error(502), "HTTP 502: Provider returned error", 502),
    ("503", Reply.error(503), "HTTP 503: Service Unavailable: no available provider", 503),
    ("524", Reply.error(524), "HTTP 524: Provider timed out", 524),
    ("529", Reply.error(529), "HTTP 529: Provider is overloaded", 529),
    ("408", Reply.error(408), "HTTP 408: Request timed out", 408),
    ("no-code", Reply.error(503, "down", include_code=False), "HTTP 503: down", 503),
    ("drop", Reply.drop(), "connection failed: RemoteProtocolError", None),
    ("stall", Reply.stall(5), "timed out waiting for the provider", None),
    (
        "error-in-200",
        Reply.error_in_200("Provider returned error", code=502),
        "provider error inside a 200 response: Provider returned error",
        200,
    ),
    ("empty-choices", Reply.empty_choices(), "provider returned no choices", 200),
    (
        "choice-error",
        Reply.choice_error("upstream error"),
        "provider error in the choice: upstream error",
        200,
    ),
]


@pytest.mark.parametrize(
    ("reply", "reason", "status"), [t[1:] for t in TRANSIENT], ids=[t[0] for t in TRANSIENT]
)
def test_transient_fault_is_retried_then_answered(
    server: FakeOpenRouter, sleeps: Sleeps, reply: Reply, reason: str, status: int | None
) -> None:
    chat = make_client(server, sleeps, timeout=0.3)
    server.script(reply)
    server.add_rule(reply=Reply.ok(ANSWER))
    response = chat.complete(request())
    chat.close()
    assert response.attempts == 2
    assert json.loads(response.content or "") == ANSWER
    assert len(server.chat_requests) == 2
    assert len(sleeps) == 1


@pytest.mark.parametrize(
    ("reply", "reason", "status"), [t[1:] for t in TRANSIENT], ids=[t[0] for t in TRANSIENT]
)
def test_transient_fault_raises_call_error_when_retries_run_out(
    server: FakeOpenRouter, sleeps: Sleeps, reply: Reply, reason: str, status: int | None
) -> None:
    chat = make_client(server, sleeps, retries=2, timeout=0.3)
    server.add_rule(reply=reply)
    with pytest.raises(CallError) as info:
        chat.complete(request())
    chat.close()
    error = info.value
    assert type(error) is CallError  # an outage, never a model rejection and never an answer
    if reason.startswith(
        "connection failed"
    ):  # a dropped connection surfaces as one of httpx's transport errors
        assert re.fullmatch(r"connection failed: \w+Error \(gave up after 3 attempts\)", error.reason)
    else:
        assert error.reason == f"{reason} (gave up after 3 attempts)"
    assert str(error) == error.reason
    assert error.attempts == 3
    assert error.status == status
    assert len(server.chat_requests) == 3
    assert len(sleeps) == 2


def test_retries_zero_means_one_attempt(server: FakeOpenRouter, sleeps: Sleeps) -> None:
    chat = make_client(server, sleeps, retries=0)
    server.add_rule(reply=Reply.error(502))
    with pytest.raises(CallError) as info:
        chat.complete(request())
    chat.close()
    assert info.value.attempts == 1
    assert sleeps == []
    assert len(server.chat_requests) == 1


def test_cancel_cuts_a_retry_wait_short_and_sends_nothing_more(server: FakeOpenRouter) -> None:
    """-x, --maxfail or Ctrl-C: a call waiting to retry (here 30 s, as Retry-After asks) gives up at once."""
    chat = ChatClient(
        server.base_url, KEY, ClientOptions(retries=3, backoff=0.0, timeout=5.0)
    )  # the real, cancellable wait
    server.add_rule(reply=Reply.error(503, "no provider", retry_after=30))
    outcome: dict[str, Any] = {}

    def call() -> None:
        try:
            chat.complete(request())
        except CallError as exc:
            outcome["error"] = exc

    worker = threading.Thread(target=call)
    started = time.monotonic()
    worker.start()
    while not server.chat_requests:
        assert time.monotonic() - started < 10, "the first attempt never arrived"
        time.sleep(0.01)
    chat.cancel.set()
    worker.join(timeout=10)
    chat.close()
    assert not worker.is_alive() and time.monotonic() - started < 10
    assert outcome["error"].reason == "HTTP 503: no provider (not retried: the session is stopping)"
    assert outcome["error"].attempts == 1
    assert len(server.chat_requests) == 1


def test_cancelled_client_sends_no_new_call(server: FakeOpenRouter, sleeps: Sleeps) -> None:
    chat = make_client(server, sleeps)
    chat.cancel.set()
    with pytest.raises(CallError, match="not sent: the session is stopping"):
        chat.complete(request())
    chat.close()
    assert server.chat_requests == []


# ---- errors that are not retried ------------------------------------------------------------------


def test_invalid_key_401_rejects_the_model_with_a_clear_message(
    server: FakeOpenRouter, sleeps: Sleeps
) -> None:
    wrong = "sk-or-v1-WRONG-KEY-999"
    chat = ChatClient(server.base_url, wrong, ClientOptions(retries=3), sleep=sleeps)
    with pytest.raises(ModelRejected) as info:
        chat.complete(request())
    error = info.value
    assert (
        error.reason == "HTTP 401: User not found. — check OPENROUTER_API_KEY (the key is missing or invalid)"
    )
    assert error.status == 401
    assert error.attempts == 1
    assert len(server.chat_requests) == 1 and sleeps == []
    for text in (
        str(error),
        repr(error),
        error.raw,
        repr(chat),
        str(chat),
        "".join(traceback.format_exception(error)),
    ):
        assert wrong not in str(text)
    chat.close()


def test_402_rejects_the_model(server: FakeOpenRouter, client: ChatClient, sleeps: Sleeps) -> None:
    server.add_rule(reply=Reply.error(402))
    with pytest.raises(ModelRejected) as info:
        client.complete(request())
    assert info.value.reason == (
        "HTTP 402: Insufficient credits. Add more using https://example.invalid/credits"
        " — the account has insufficient credits"
    )
    assert info.value.status == 402
    assert len(server.chat_requests) == 1 and sleeps == []


def test_404_no_endpoints_rejects_the_model(server: FakeOpenRouter, client: ChatClient) -> None:
    server.no_structured_outputs.add(MODEL)
    with pytest.raises(ModelRejected) as info:
        client.complete(request())
    assert info.value.reason == (
        "HTTP 404: the model or its parameters were rejected: "
        "No endpoints found that can handle the requested parameters."
    )
    assert info.value.status == 404
    assert len(server.chat_requests) == 1


def test_400_unknown_model_id_rejects_the_model(server: FakeOpenRouter, client: ChatClient) -> None:
    server.known_models = {"anthropic/claude-3.5-sonnet"}
    with pytest.raises(ModelRejected) as info:
        client.complete(request())
    assert (
        info.value.reason
        == f"HTTP 400: the model or its parameters were rejected: {MODEL} is not a valid model ID"
    )
    assert info.value.status == 400
    assert len(server.chat_requests) == 1


def test_400_unknown_provider_preference_rejects_the_model(
    server: FakeOpenRouter, client: ChatClient
) -> None:
    with pytest.raises(ModelRejected) as info:
        client.complete(request(provider={"data_colection": "deny"}))
    assert info.value.reason == (
        "HTTP 400: the model or its parameters were rejected: "
        "Invalid provider preferences: Unrecognized key(s) in object: 'data_colection'"
    )


def test_400_about_the_schema_is_a_plain_call_error(
    server: FakeOpenRouter, client: ChatClient, sleeps: Sleeps
) -> None:
    loose = {
        "type": "json_schema",
        "json_schema": {
            "name": "answer",
            "strict": True,
            "schema": {"type": "object", "properties": {"category": {"type": "string"}}},
        },
    }
    with pytest.raises(CallError) as info:
        client.complete(ChatRequest(MODEL, [{"role": "user", "content": "x"}], loose))
    error = info.value
    assert type(error) is CallError
    assert error.status == 400
    assert error.reason.startswith("HTTP 400: Invalid schema for response_format 'answer': ")
    assert "additionalProperties" in error.reason
    assert error.attempts == 1 and sleeps == []
    assert len(server.chat_requests) == 1


def test_403_moderation_is_a_call_error_with_reasons(
    server: FakeOpenRouter, client: ChatClient, sleeps: Sleeps
) -> None:
    server.add_rule(
        reply=Reply.error(
            403, metadata={"reasons": ["self-harm", "violence"], "flagged_input": "I want to..."}
        )
    )
    with pytest.raises(CallError) as info:
        client.complete(request())
    error = info.value
    assert type(error) is CallError
    assert (
        error.reason == "blocked by provider moderation (HTTP 403): "
        "Input was flagged by moderation (reasons: self-harm, violence)"
    )
    assert error.status == 403
    assert json.loads(error.raw or "")["error"]["metadata"]["flagged_input"] == "I want to..."
    assert len(server.chat_requests) == 1 and sleeps == []


def test_rejection_after_retries_counts_every_attempt(server: FakeOpenRouter, client: ChatClient) -> None:
    server.script(Reply.error(503), Reply.error(402))
    with pytest.raises(ModelRejected) as info:
        client.complete(request())
    assert info.value.attempts == 2
    assert len(server.chat_requests) == 2


# ---- truncation and refusals are answers (the runner and the evaluation decide) -------------------


def test_truncation_is_returned_with_finish_reason_length(
    server: FakeOpenRouter, client: ChatClient, sleeps: Sleeps
) -> None:
    server.add_rule(reply=Reply.truncated('{"categ', prompt_tokens=40, completion_tokens=512))
    response = client.complete(request())
    assert response.finish_reason == "length"
    assert response.content == '{"categ'
    assert (response.prompt_tokens, response.completion_tokens) == (40, 512)
    assert response.attempts == 1 and sleeps == []


def test_reasoning_model_spending_the_budget_is_length_with_empty_content(
    server: FakeOpenRouter, client: ChatClient
) -> None:
    server.add_rule(reply=Reply.ok("", finish_reason="length", reasoning="thinking..."))
    response = client.complete(request())
    assert (response.finish_reason, response.content) == ("length", "")


def test_refusal_is_returned_as_an_answer(server: FakeOpenRouter, client: ChatClient) -> None:
    server.add_rule(reply=Reply.refusal("I can't help with that."))
    response = client.complete(request())
    assert response.refusal == "I can't help with that."
    assert response.content is None
    assert response.finish_reason == "stop"


# ---- the key never leaks ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [Reply.error(500), Reply.error(401), Reply.error(403), Reply.drop(), Reply.error_in_200()],
    ids=["500", "401", "403", "drop", "error-in-200"],
)
def test_api_key_never_in_errors_client_or_logs(
    server: FakeOpenRouter, client: ChatClient, reply: Reply, caplog: pytest.LogCaptureFixture
) -> None:
    server.add_rule(reply=reply)
    with caplog.at_level(logging.DEBUG):
        with pytest.raises(CallError) as info:
            client.complete(request())
    error = info.value
    assert_no_key(
        str(error),
        repr(error),
        error.reason,
        error.raw,
        error.args,
        str(client),
        repr(client),
        "".join(traceback.format_exception(error)),
        caplog.text,
    )
    assert caplog.records  # the retry/HTTP logging did happen, and carried no key


# ---- connections ------------------------------------------------------------------------------------


def test_each_calling_thread_keeps_one_connection_and_close_ends_them_all(
    server: FakeOpenRouter, client: ChatClient
) -> None:
    """Calls from many threads share no connection pool (its lock and scan cost more CPU than the
    exchange): each thread reuses its own keep-alive connection, and close() ends every one."""
    server.add_rule(reply=Reply.ok(ANSWER))
    threads, calls = 4, 3
    for _ in range(threads):  # one after another: a shared pool would reuse a single connection
        worker = threading.Thread(target=lambda: [client.complete(request()) for _ in range(calls)])
        worker.start()
        worker.join(timeout=30)
    assert len(server.chat_requests) == threads * calls
    assert server.open_connections == threads  # each thread's own, kept alive across its calls
    client.close()
    deadline = time.monotonic() + 10
    while server.open_connections and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.open_connections == 0


# ---- proxies from the environment ---------------------------------------------------------------------


def test_chat_calls_go_through_the_environment_proxy(
    server: FakeOpenRouter, sleeps: Sleeps, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A corporate proxy named by HTTP(S)_PROXY carries the calls (the fake serves absolute-form requests
    as a forward proxy would see them); NO_PROXY exempts a host, a local model never uses one."""
    monkeypatch.setenv("HTTP_PROXY", server.base_url.split("/api/")[0])
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    chat = ChatClient(
        "http://provider.invalid/api/v1", KEY, ClientOptions(retries=0, timeout=5.0), sleep=sleeps
    )
    server.add_rule(reply=Reply.ok(ANSWER))
    assert json.loads(chat.complete(request()).content or "") == ANSWER
    chat.close()
    (sent,) = server.chat_requests
    assert (
        sent.path == "/api/v1/chat/completions" and sent.headers["host"] == "provider.invalid"
    )  # reached through the proxy

    monkeypatch.setenv("NO_PROXY", "provider.invalid")
    direct = ChatClient(
        "http://provider.invalid/api/v1", KEY, ClientOptions(retries=0, timeout=5.0), sleep=sleeps
    )
    with pytest.raises(CallError, match="connection failed: ConnectError"):
        direct.complete(request())
    direct.close()
    monkeypatch.delenv("NO_PROXY")
    local = ChatClient(
        "http://provider.invalid/api/v1", "", ClientOptions(retries=0, timeout=5.0, free=True), sleep=sleeps
    )
    with pytest.raises(CallError, match="connection failed: ConnectError"):
        local.complete(request())
    local.close()
    assert len(server.chat_requests) == 1


def test_a_secret_key_is_sent_as_bearer_and_an_echoed_key_is_redacted(server: FakeOpenRouter) -> None:
    """The key is held as a Secret; an error body that quotes it (or a URL's password) stores only ***."""
    from pytest_helmbench.redaction import Secret

    client = ChatClient(server.base_url, Secret(KEY), ClientOptions(retries=0, backoff=0))
    try:
        client.complete(request())
        assert server.requests[-1].headers["authorization"] == f"Bearer {KEY}"
        assert KEY not in repr(client.__dict__)
    finally:
        client.close()
    error = CallError(f"HTTP 400: bad key {KEY} at https://u:pw-123@x/v1", raw=json.dumps({"k": KEY}))
    assert KEY not in error.reason and KEY not in str(error) and KEY not in (error.raw or "")
    assert "pw-123" not in error.reason and "https://***@x/v1" in error.reason
