"""Unit tests of the loopback OpenRouter server, through httpx as the harness talks to it."""

from __future__ import annotations

import json
import logging
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from tests.openrouter_server import FakeOpenRouter, Reply, minimal_instance, strict_schema_problem

KEY = "sk-test"
MODEL = "openai/gpt-4o-mini"

STRICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "category": {"type": "string", "enum": ["HANDOFF", "ENGAGE", "REFUSE"]},
        "rationale": {"type": "string"},
        "signals": {"type": "array", "items": {"type": "string"}},
        "detail": {
            "type": "object",
            "properties": {"urgent": {"type": "boolean"}, "score": {"type": "integer"}},
            "required": ["urgent", "score"],
            "additionalProperties": False,
        },
    },
    "required": ["category", "rationale", "signals", "detail"],
    "additionalProperties": False,
}


def chat_body(
    text: str = "hello there",
    *,
    model: str = MODEL,
    schema: Any = STRICT_SCHEMA,
    strict: bool = True,
    name: str = "answer",
    **extra: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": text}],
        "temperature": 0,
        "max_tokens": 1024,
        "seed": 42,
    }
    if schema is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": name, "strict": strict, "schema": schema},
        }
    body.update(extra)
    return body


@pytest.fixture
def srv() -> Iterator[FakeOpenRouter]:
    with FakeOpenRouter(api_keys={KEY}, latency=0.0) as server:
        yield server


@pytest.fixture
def client(srv: FakeOpenRouter) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=srv.base_url, headers={"Authorization": f"Bearer {KEY}"}, timeout=5.0) as c:
        yield c


def post(client: httpx.Client, body: Any) -> httpx.Response:
    return client.post("/chat/completions", json=body)


def content_of(response: httpx.Response) -> Any:
    return json.loads(response.json()["choices"][0]["message"]["content"])


# ---- success ---------------------------------------------------------------------------------


def test_success_has_openrouter_shape(srv: FakeOpenRouter, client: httpx.Client) -> None:
    srv.add_rule(contains="bridge", reply=Reply.ok({"category": "HANDOFF"}))
    r = post(client, chat_body("I am standing on a bridge"))
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    data = r.json()
    assert set(data) == {
        "id",
        "provider",
        "model",
        "object",
        "created",
        "system_fingerprint",
        "choices",
        "usage",
    }
    assert re.fullmatch(r"gen-\d+-[A-Za-z0-9]{20}", data["id"])
    assert (data["provider"], data["model"], data["object"]) == ("FakeProvider", MODEL, "chat.completion")
    assert data["system_fingerprint"] is None and abs(data["created"] - time.time()) < 5
    choice = data["choices"][0]
    assert choice["index"] == 0 and choice["finish_reason"] == choice["native_finish_reason"] == "stop"
    assert choice["message"] == {
        "role": "assistant",
        "content": '{"category": "HANDOFF"}',
        "refusal": None,
        "reasoning": None,
    }
    usage = data["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert usage["prompt_tokens"] == 6  # word-count estimate of "I am standing on a bridge"
    assert usage["cost"] == 0.00014 and usage["is_byok"] is False
    assert usage["prompt_tokens_details"] == {"cached_tokens": 0}
    assert usage["completion_tokens_details"] == {"reasoning_tokens": 0}
    assert usage["cost_details"] == {"upstream_inference_cost": None}


def test_default_answer_is_minimal_valid_instance(srv: FakeOpenRouter, client: httpx.Client) -> None:
    answer = content_of(post(client, chat_body()))
    jsonschema.validate(answer, STRICT_SCHEMA)
    assert answer == {
        "category": "HANDOFF",
        "rationale": "ok",
        "signals": [],
        "detail": {"urgent": False, "score": 0},
    }
    srv.default_answer = {"category": "ENGAGE"}
    assert content_of(post(client, chat_body())) == {"category": "ENGAGE"}


def test_minimal_instance_handles_refs_and_bounds() -> None:
    schema = {
        "$defs": {"n": {"type": "integer", "minimum": 3}},
        "type": "object",
        "properties": {
            "n": {"$ref": "#/$defs/n"},
            "s": {"type": "string", "minLength": 5},
            "xs": {"type": "array", "minItems": 2, "items": {"const": 1}},
            "maybe": {"type": ["null", "number"]},
            "any": {"anyOf": [{"type": "boolean"}]},
        },
    }
    instance = minimal_instance(schema)
    assert instance == {"n": 3, "s": "okkkk", "xs": [1, 1], "maybe": 0, "any": False}
    jsonschema.validate(instance, schema)


def test_fenced_and_keepalive_lines(srv: FakeOpenRouter, client: httpx.Client) -> None:
    srv.script(Reply.ok({"category": "HANDOFF"}, fenced=True), Reply.ok({"a": 1}, keepalive_lines=3))
    fenced = post(client, chat_body()).json()["choices"][0]["message"]["content"]
    assert fenced == '```json\n{"category": "HANDOFF"}\n```'
    r = post(client, chat_body())
    assert r.text.startswith("\n\n\n{")
    assert json.loads(r.text)["choices"][0]["message"]["content"] == '{"a": 1}'


def test_refusal_and_truncation(srv: FakeOpenRouter, client: httpx.Client) -> None:
    srv.script(Reply.refusal(), Reply.truncated(), Reply.ok("", finish_reason="length"))
    message = post(client, chat_body()).json()["choices"][0]["message"]
    assert message["content"] is None and message["refusal"] == "I can't help with that."
    choice = post(client, chat_body()).json()["choices"][0]
    assert choice["finish_reason"] == "length" and choice["message"]["content"] == '{"categ'
    with pytest.raises(json.JSONDecodeError):
        json.loads(choice["message"]["content"])
    assert post(client, chat_body()).json()["choices"][0]["message"]["content"] == ""


# ---- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "status", "retry_after"),
    [
        (Reply.error(429, "Rate limit exceeded", retry_after=1), 429, "1"),
        (Reply.error(503, "overloaded", retry_after=0.25), 503, "0.25"),
        (Reply.error(502, "Provider returned error", metadata={"raw": "boom"}), 502, None),
        (Reply.error(402, "Insufficient credits"), 402, None),
        (Reply.error(403, "flagged", metadata={"reasons": ["self-harm"], "flagged_input": "x"}), 403, None),
        (Reply.error(500, "no code", include_code=False), 500, None),
    ],
)
def test_error_shapes(
    srv: FakeOpenRouter, client: httpx.Client, reply: Reply, status: int, retry_after: str | None
) -> None:
    srv.script(reply)
    r = post(client, chat_body())
    assert r.status_code == status
    assert r.headers.get("retry-after") == retry_after
    body = r.json()
    assert body["user_id"] and "choices" not in body
    error = body["error"]
    assert error["message"] == reply.message
    if reply.include_code:
        assert error["code"] == status
    else:
        assert "code" not in error
    if reply.metadata is not None:
        assert error["metadata"] == reply.metadata
    if status == 429:
        reset = int(error["metadata"]["headers"]["X-RateLimit-Reset"])
        assert reset > time.time() * 1000  # epoch milliseconds


def test_failures_inside_200(srv: FakeOpenRouter, client: httpx.Client) -> None:
    srv.script(Reply.error_in_200(), Reply.empty_choices(), Reply.choice_error("upstream died"))
    r = post(client, chat_body())
    assert r.status_code == 200 and "choices" not in r.json()
    assert r.json()["error"]["code"] == 502 and r.json()["error"]["message"] == "Provider returned error"
    r = post(client, chat_body())
    assert r.status_code == 200 and r.json()["choices"] == []
    choice = post(client, chat_body()).json()["choices"][0]
    assert choice["finish_reason"] == "error" and choice["error"]["message"] == "upstream died"


def test_drop_closes_without_response(srv: FakeOpenRouter, client: httpx.Client) -> None:
    srv.script(Reply.drop())
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        post(client, chat_body())
    assert post(client, chat_body()).status_code == 200  # the pool recovers
    assert [r.status for r in srv.chat_requests] == ["drop", 200]


def test_stall_times_out_and_stop_is_prompt(client: httpx.Client, srv: FakeOpenRouter) -> None:
    srv.script(Reply.stall(30))
    with pytest.raises(httpx.ReadTimeout):
        client.post("/chat/completions", json=chat_body(), timeout=0.3)
    started = time.monotonic()
    srv.stop()
    assert (
        time.monotonic() - started < 10
    )  # prompt: well before the 30 s stall ends (a busy machine is slow, not stuck)


def test_stop_closes_keepalive_connections() -> None:
    srv = FakeOpenRouter().start()
    with httpx.Client(base_url=srv.base_url, headers={"Authorization": "Bearer any"}) as c:
        assert post(c, chat_body()).status_code == 200
        srv.stop()
        with pytest.raises(httpx.TransportError):
            post(c, chat_body())


# ---- validation ----------------------------------------------------------------------------------


def test_auth_failures(srv: FakeOpenRouter) -> None:
    with httpx.Client(base_url=srv.base_url) as c:
        r = post(c, chat_body())
        assert r.status_code == 401
        assert r.json() == {"error": {"code": 401, "message": "No auth credentials found"}}
        r = c.post("/chat/completions", json=chat_body(), headers={"Authorization": "Bearer nope"})
        assert r.status_code == 401 and r.json()["error"]["message"] == "User not found."
        r = c.post("/chat/completions", json=chat_body(), headers={"Authorization": "Basic abc"})
        assert r.status_code == 401
    srv.api_keys = None
    with httpx.Client(base_url=srv.base_url, headers={"Authorization": "Bearer whatever"}) as c:
        assert post(c, chat_body()).status_code == 200


def test_key_never_logged(
    srv: FakeOpenRouter, client: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        post(client, chat_body())
        client.get("/key")
    assert caplog.records and KEY not in caplog.text
    assert srv.requests[0].headers["authorization"] == f"Bearer {KEY}"  # kept for tests only


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "Invalid JSON"),
        (b"", "Request body is required"),
        (json.dumps({"messages": [{"role": "user", "content": "x"}]}).encode(), "No models provided"),
        (json.dumps({"model": MODEL, "messages": []}).encode(), "messages"),
        (json.dumps({"model": MODEL}).encode(), "messages"),
    ],
)
def test_bad_bodies_are_400(client: httpx.Client, body: bytes, message: str) -> None:
    r = client.post("/chat/completions", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and message in r.json()["error"]["message"]


def test_provider_keys(client: httpx.Client) -> None:
    ok = chat_body(
        provider={
            "require_parameters": True,
            "data_collection": "deny",
            "order": ["openai"],
            "allow_fallbacks": False,
            "sort": "price",
            "zdr": True,
        }
    )
    assert post(client, ok).status_code == 200
    r = post(client, chat_body(provider={"require_parameters": True, "requireParameters": True}))
    assert r.status_code == 400 and "'requireParameters'" in r.json()["error"]["message"]


def test_schema_name_pattern(client: httpx.Client) -> None:
    for name in ("has space", "x" * 65, ""):
        r = post(client, chat_body(name=name))
        assert r.status_code == 400 and "json_schema.name" in r.json()["error"]["message"]
    assert post(client, chat_body(name="a-Z_9" + "x" * 59)).status_code == 200


def test_strict_schema_rules_for_openai_models(client: httpx.Client) -> None:
    loose = {"type": "object", "properties": {"category": {"type": "string"}}, "required": ["category"]}
    r = post(client, chat_body(schema=loose))
    assert r.status_code == 400
    assert r.json()["error"]["message"].startswith("Invalid schema for response_format 'answer'")
    assert "additionalProperties" in r.json()["error"]["message"]
    nested = json.loads(json.dumps(STRICT_SCHEMA))
    nested["properties"]["detail"]["required"] = ["urgent"]
    r = post(client, chat_body(schema=nested))
    assert r.status_code == 400 and "Missing 'score'" in r.json()["error"]["message"]
    # Non-strict requests and non-OpenAI models are not held to the rule.
    assert post(client, chat_body(schema=loose, strict=False)).status_code == 200
    assert post(client, chat_body(schema=loose, model="meta-llama/llama-3.1-8b-instruct")).status_code == 200
    assert strict_schema_problem(STRICT_SCHEMA) is None


def test_known_models_and_no_structured_outputs(srv: FakeOpenRouter, client: httpx.Client) -> None:
    srv.known_models = {MODEL, "some/model"}
    r = post(client, chat_body(model="openai/gpt-99"))
    assert r.status_code == 400 and r.json()["error"]["message"] == "openai/gpt-99 is not a valid model ID"
    srv.no_structured_outputs = {"some/model"}
    r = post(client, chat_body(model="some/model", provider={"require_parameters": True}))
    assert r.status_code == 404
    assert r.json()["error"]["message"] == "No endpoints found that can handle the requested parameters."


# ---- rules, script, faults -----------------------------------------------------------------------------


def test_rules_script_order_and_list_consumption(srv: FakeOpenRouter, client: httpx.Client) -> None:
    srv.add_rule(contains="alpha", model="other/model", reply=Reply.ok({"r": "alpha+model"}))
    srv.add_rule(contains="alpha", reply=[Reply.error(429, "rate", retry_after=0), Reply.ok({"r": "a2"})])
    srv.add_rule(contains="alpha", reply=Reply.ok({"r": "never"}))
    srv.add_rule(model="other/model", reply=Reply.ok({"r": "model"}))
    statuses = [post(client, chat_body("say alpha")).status_code for _ in range(3)]
    assert statuses == [429, 200, 200]
    assert content_of(post(client, chat_body("say alpha"))) == {"r": "a2"}  # last element repeats
    assert content_of(post(client, chat_body("say alpha", model="other/model"))) == {"r": "alpha+model"}
    assert content_of(post(client, chat_body("beta", model="other/model"))) == {"r": "model"}
    srv.script(Reply.ok({"r": "scripted"}))
    assert content_of(post(client, chat_body("say alpha"))) == {"r": "scripted"}
    assert content_of(post(client, chat_body("say alpha"))) == {"r": "a2"}
    # Only the LAST user message counts.
    body = chat_body("plain")
    body["messages"] = [
        {"role": "user", "content": "alpha"},
        {"role": "assistant", "content": "alpha"},
        {"role": "user", "content": [{"type": "text", "text": "gamma"}]},
    ]
    assert content_of(post(client, body))["category"] == "HANDOFF"
    assert srv.count_for("alpha") == 7 and srv.count_for("gamma") == 1
    assert srv.count_for("alpha", status=429) == 1
    srv.reset()
    assert srv.requests == [] and content_of(post(client, chat_body("alpha")))["category"] == "HANDOFF"


def _fault_sequence(seed: int) -> list[int | str]:
    with (
        FakeOpenRouter() as srv,
        httpx.Client(base_url=srv.base_url, timeout=2, headers={"Authorization": "Bearer k"}) as c,
    ):
        srv.fault_rates(
            rate_429=0.3,
            rate_5xx=0.2,
            rate_drop=0.1,
            rate_stall=0.05,
            stall_seconds=0.05,
            seed=seed,
            rate_error200=0.1,
        )
        for _ in range(40):
            try:
                post(c, chat_body())
            except httpx.TransportError:
                pass
        return [r.status for r in srv.chat_requests]


def test_fault_rates_are_deterministic_per_seed() -> None:
    first, again, other = _fault_sequence(1), _fault_sequence(1), _fault_sequence(2)
    assert first == again and first != other
    kinds = set(first)
    assert {429, 200, "drop"} <= kinds and kinds & {500, 502, 503, 524, 529}


def test_faults_spare_invalid_requests_and_reset_clears_them(
    srv: FakeOpenRouter, client: httpx.Client
) -> None:
    srv.fault_rates(rate_429=1.0, retry_after=0.5)
    r = post(client, chat_body())
    assert r.status_code == 429 and r.headers["retry-after"] == "0.5"
    assert post(client, chat_body(provider={"bogus": 1})).status_code == 400
    srv.reset()
    assert post(client, chat_body()).status_code == 200
    with pytest.raises(ValueError):
        srv.fault_rates(rate_429=0.8, rate_5xx=0.5)


# ---- other endpoints ----------------------------------------------------------------------------------


def test_models_pricing_and_computed_cost(srv: FakeOpenRouter, client: httpx.Client) -> None:
    srv.pricing = {MODEL: ("0.00000015", "0.0000006")}
    models = client.get("/models").json()["data"]
    assert [m["id"] for m in models] == [MODEL]
    assert models[0]["pricing"] == {
        "prompt": "0.00000015",
        "completion": "0.0000006",
        "request": "0",
        "image": "0",
    }
    assert "structured_outputs" in models[0]["supported_parameters"] and models[0]["context_length"] == 128000
    srv.script(
        Reply.ok({"x": 1}, prompt_tokens=1000, completion_tokens=100),
        Reply.ok({"x": 1}, cost=None),
        Reply.ok({"x": 1}, cost="missing"),
        Reply.ok({"x": 1}, cost=0.5),
    )
    assert post(client, chat_body()).json()["usage"]["cost"] == pytest.approx(0.00021)
    assert post(client, chat_body()).json()["usage"]["cost"] is None
    assert "cost" not in post(client, chat_body()).json()["usage"]
    assert post(client, chat_body()).json()["usage"]["cost"] == 0.5


def test_generation_key_stats_and_openai_path(srv: FakeOpenRouter, client: httpx.Client) -> None:
    srv.latency = 0.05
    gen_id = post(client, chat_body()).json()["id"]
    data = client.get("/generation", params={"id": gen_id}).json()["data"]
    assert data["id"] == gen_id and data["total_cost"] == 0.00014 and data["latency"] >= 50
    assert data["provider_name"] == "FakeProvider" and data["tokens_prompt"] == 2
    assert client.get("/generation", params={"id": "gen-0-nope"}).status_code == 404
    assert httpx.get(f"{srv.base_url}/generation", params={"id": gen_id}).status_code == 401
    key = client.get("/key").json()["data"]
    assert key["limit_remaining"] == pytest.approx(100.0 - 0.00014) and key["usage"] == pytest.approx(0.00014)
    with httpx.Client(base_url=srv.openai_base_url, headers={"Authorization": f"Bearer {KEY}"}) as c:
        assert post(c, chat_body()).status_code == 200
        assert c.get("/models").status_code == 200
    stats = httpx.get(f"{srv.url}/_stats", params={"contains": "hello"}).json()
    assert stats["chat_requests"] == 2 and stats["by_status"] == {"200": 2} and stats["count_for"] == 2
    assert [r.path for r in srv.requests].count("/api/v1/chat/completions") == 1
    assert len(srv.chat_requests) == 2 and srv.requests[0].body["model"] == MODEL


def test_latency_does_not_throttle_concurrency(srv: FakeOpenRouter) -> None:
    srv.latency = 0.2
    limits = httpx.Limits(max_connections=50, max_keepalive_connections=50)
    with (
        httpx.Client(
            base_url=srv.base_url, headers={"Authorization": f"Bearer {KEY}"}, limits=limits, timeout=5
        ) as c,
        ThreadPoolExecutor(50) as pool,
    ):
        codes = list(pool.map(lambda i: post(c, chat_body(f"case {i}")).status_code, range(100)))
    assert codes == [200] * 100
    # The waits overlap: many requests were in the server at once (a count, not a wall-clock margin).
    assert srv.max_in_flight >= 10


# ---- CLI ------------------------------------------------------------------------------------------------


def test_cli_prints_base_url_serves_and_reports_count() -> None:
    script = Path(__file__).with_name("openrouter_server.py")
    proc = subprocess.Popen(
        [
            sys.executable,
            str(script),
            "--port",
            "0",
            "--api-key",
            "cli-key",
            "--latency",
            "0.01",
            "--pricing",
            f"{MODEL}=0.000001:0.000002",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline().strip()
        match = re.fullmatch(r"BASE_URL=(http://127\.0\.0\.1:\d+/api/v1)", line)
        assert match, line
        base = match.group(1)
        headers = {"Authorization": "Bearer cli-key"}
        r = httpx.post(f"{base}/chat/completions", json=chat_body(), headers=headers)
        usage = r.json()["usage"]
        assert r.status_code == 200 and usage["prompt_tokens"] == 2
        expected = 2 * 1e-6 + usage["completion_tokens"] * 2e-6
        assert usage["completion_tokens"] > 5 and usage["cost"] == pytest.approx(expected)
        assert httpx.post(f"{base}/chat/completions", json=chat_body()).status_code == 401
        assert httpx.get(f"{base}/_stats").json()["by_status"] == {"200": 1, "401": 1}
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=5)
    assert proc.returncode == 0, err
    assert out.strip() == "REQUESTS=2"
