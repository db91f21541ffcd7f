"""A loopback HTTP server that speaks the OpenRouter chat-completions protocol, errors included.

Used by the end-to-end tests (pytester runs, with and without pytest-xdist: workers connect over
TCP) and by the benchmark scripts in ``bench/``. Standard library only, so it can run as a
subprocess from any interpreter::

    python tests/openrouter_server.py --port 0 --latency 0.2 --fault-429 0.2 --seed 1

prints ``BASE_URL=http://127.0.0.1:PORT/api/v1``, serves until SIGTERM/SIGINT, then prints
``REQUESTS=<number of chat requests>``.

In-process use::

    with FakeOpenRouter(api_keys={"sk-test"}) as srv:
        srv.add_rule(contains="bridge", reply=Reply.ok({"category": "HANDOFF"}))
        ...  # point the client at srv.base_url

Every chat request is validated the way OpenRouter does it (auth, body, ``provider`` keys,
``response_format`` name, OpenAI strict-schema rules) before any fault, script or rule applies.
The answer then comes from, in order: random faults (``fault_rates``), the global ``script``
queue, the first matching rule, ``default_answer``, or a minimal instance of the request's schema.

The API key is never logged (request logging goes to ``logging`` at DEBUG level and only carries
the request line). It is kept in ``RecordedRequest.headers`` in memory so tests can check that a
client sends it.
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import math
import random
import re
import secrets
import signal
import socket
import string
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit

__all__ = ["FakeOpenRouter", "Reply", "RecordedRequest", "Rule", "Generation", "minimal_instance"]

logger = logging.getLogger(__name__)

#: Keys OpenRouter's ``provider`` routing object accepts (provider-routing docs and OpenAPI spec);
#: any other key is answered with 400, as OpenRouter does.
KNOWN_PROVIDER_KEYS: frozenset[str] = frozenset(
    {
        "order",
        "allow_fallbacks",
        "require_parameters",
        "data_collection",
        "zdr",
        "enforce_distillable_text",
        "only",
        "ignore",
        "quantizations",
        "sort",
        "max_price",
        "preferred_min_throughput",
        "preferred_max_latency",
        "experimental",
    }
)

#: ``response_format.json_schema.name`` must match this (OpenAI's rule, enforced by OpenRouter).
SCHEMA_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

#: Cost per call when the model has no pricing entry (the brief's example response).
DEFAULT_COST = 0.00014

#: Status codes a ``rate_5xx`` fault draws from (OpenRouter's retryable server-side errors).
FAULT_5XX: tuple[int, ...] = (500, 502, 503, 524, 529)

_ERROR_MESSAGES: dict[int, str] = {
    400: "Bad Request",
    401: "No auth credentials found",
    402: "Insufficient credits. Add more using https://example.invalid/credits",
    403: "Input was flagged by moderation",
    404: "No endpoints found that can handle the requested parameters.",
    408: "Request timed out",
    429: "Rate limit exceeded",
    500: "Internal Server Error",
    502: "Provider returned error",
    503: "Service Unavailable: no available provider",
    524: "Provider timed out",
    529: "Provider is overloaded",
}

_SUPPORTED_PARAMETERS: list[str] = [
    "max_tokens",
    "temperature",
    "top_p",
    "seed",
    "stop",
    "frequency_penalty",
    "presence_penalty",
    "response_format",
    "structured_outputs",
]

_USER_ID = "user_fake0000000000000000000"
_TOKEN_RE = re.compile(r"\w+|[^\w\s]")


class _Computed:
    """Sentinel: compute ``usage.cost`` from the server's pricing."""

    def __repr__(self) -> str:
        return "<computed>"


COMPUTED = _Computed()
CostSpec = float | None | Literal["missing"] | _Computed


# --------------------------------------------------------------------------------------------
# Replies
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """One scripted answer to a chat request. Build it with the class methods, not directly."""

    kind: Literal["ok", "error", "error_in_200", "empty_choices", "choice_error", "drop", "stall"]
    content: str | dict[str, Any] | list[Any] | None = None
    finish_reason: str | None = "stop"
    refusal_text: str | None = None
    reasoning: str | None = None
    cost: CostSpec = COMPUTED
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    fenced: bool = False
    keepalive_lines: int = 0
    model: str | None = None
    provider: str = "FakeProvider"
    status: int = 200
    message: str = ""
    code: int | None = None
    retry_after: float | None = None
    metadata: dict[str, Any] | None = None
    include_code: bool = True
    seconds: float = 0.0
    release: threading.Event | None = None  # with `seconds`: answer as soon as a test sets it

    @classmethod
    def ok(
        cls, content: str | dict[str, Any] | list[Any] | None, *, refusal: str | None = None, **fields: Any
    ) -> Reply:
        """A 200 completion. A dict/list ``content`` is sent as a JSON string, as models do.

        ``fields``: any other Reply field by name (finish_reason, reasoning, cost, prompt_tokens,
        completion_tokens, fenced, keepalive_lines, model, provider), with the field's default;
        ``seconds``: answer only after that long (a slow model), or once ``release`` (a
        threading.Event) is set, whichever comes first.
        ``cost``: a number, ``None`` (``"cost": null``), ``"missing"`` (no ``cost`` key), or by
        default computed from ``FakeOpenRouter.pricing`` (else 0.00014).
        """
        return cls(kind="ok", content=content, refusal_text=refusal, **fields)

    @classmethod
    def refusal(cls, text: str = "I can't help with that.", **kwargs: Any) -> Reply:
        """A structured-output refusal: ``content`` null and ``message.refusal`` set."""
        return cls.ok(None, refusal=text, **kwargs)

    @classmethod
    def truncated(cls, partial_content: str = '{"categ', **kwargs: Any) -> Reply:
        """Output cut at ``max_tokens``: ``finish_reason`` "length" and partial JSON."""
        return cls.ok(partial_content, finish_reason="length", **kwargs)

    @classmethod
    def error(
        cls,
        status: int,
        message: str | None = None,
        *,
        retry_after: float | None = None,
        metadata: dict[str, Any] | None = None,
        include_code: bool = True,
    ) -> Reply:
        """An HTTP error with OpenRouter's body ``{"error": {code, message, metadata}, "user_id"}``.

        ``retry_after`` adds a ``Retry-After`` header (seconds). Without ``metadata``, a 429
        carries OpenRouter's own ``metadata.headers`` X-RateLimit-* (Reset in epoch ms).
        """
        return cls(
            kind="error",
            status=status,
            message=message if message is not None else _ERROR_MESSAGES.get(status, "Error"),
            retry_after=retry_after,
            metadata=metadata,
            include_code=include_code,
        )

    @classmethod
    def error_in_200(cls, message: str = "Provider returned error", code: int = 502) -> Reply:
        """HTTP 200 whose body is only ``{"error": {...}}``: a provider failure, no choices."""
        return cls(kind="error_in_200", message=message, code=code)

    @classmethod
    def empty_choices(cls) -> Reply:
        """HTTP 200 with ``"choices": []``."""
        return cls(kind="empty_choices")

    @classmethod
    def choice_error(cls, message: str = "upstream error", code: int = 502) -> Reply:
        """HTTP 200 with ``choices[0].finish_reason == "error"`` and ``choices[0].error``."""
        return cls(kind="choice_error", message=message, code=code, finish_reason="error")

    @classmethod
    def drop(cls) -> Reply:
        """Close the connection without sending any response."""
        return cls(kind="drop")

    @classmethod
    def stall(cls, seconds: float) -> Reply:
        """Wait ``seconds`` (cut short by ``stop()``), then close without responding."""
        return cls(kind="stall", seconds=seconds)


# --------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------


@dataclass
class RecordedRequest:
    """One request as received. ``status`` is filled once answered: an int, "drop" or "stall"."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: dict[str, Any] | None
    status: int | str | None = None
    #: When it arrived (seconds since the epoch: comparable with times other processes write).
    received_at: float = field(default_factory=time.time)

    @property
    def is_chat(self) -> bool:
        return self.method == "POST" and self.path.endswith("/chat/completions")

    @property
    def model(self) -> str | None:
        model = (self.body or {}).get("model")
        return model if isinstance(model, str) else None

    @property
    def last_user_content(self) -> str:
        """The text of the last ``user`` message ("" when there is none)."""
        return last_user_text(self.body)


@dataclass
class Rule:
    """Answers chat requests matching ``contains`` (last user message), ``system`` (the system
    message) and/or ``model``."""

    contains: str | None
    model: str | None
    replies: list[Reply]
    hits: int = 0
    system: str | None = None

    def matches(self, model: str | None, last_user: str, system: str = "") -> bool:
        if self.contains is not None and self.contains not in last_user:
            return False
        if self.system is not None and self.system not in system:
            return False
        if self.model is not None and self.model != model:
            return False
        return True

    def next_reply(self) -> Reply:
        """Consume the list in order; its last element then repeats. Caller holds the lock."""
        reply = self.replies[min(self.hits, len(self.replies) - 1)]
        self.hits += 1
        return reply


@dataclass
class Generation:
    """What ``GET /generation?id=`` reports for a served completion."""

    id: str
    model: str
    provider_name: str
    total_cost: float | None
    tokens_prompt: int
    tokens_completion: int
    latency_ms: int
    finish_reason: str | None
    created_at: float

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "model": self.model,
            "provider_name": self.provider_name,
            "total_cost": self.total_cost,
            "usage": self.total_cost,
            "is_byok": False,
            "upstream_inference_cost": None,
            "latency": self.latency_ms,
            "generation_time": self.latency_ms,
            "moderation_latency": None,
            "tokens_prompt": self.tokens_prompt,
            "tokens_completion": self.tokens_completion,
            "native_tokens_prompt": self.tokens_prompt,
            "native_tokens_completion": self.tokens_completion,
            "native_tokens_reasoning": 0,
            "finish_reason": self.finish_reason,
            "native_finish_reason": self.finish_reason,
            "streamed": False,
            "cancelled": False,
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.created_at)),
        }


@dataclass
class _Faults:
    rate_429: float = 0.0
    rate_5xx: float = 0.0
    rate_drop: float = 0.0
    rate_stall: float = 0.0
    rate_error200: float = 0.0
    stall_seconds: float = 5.0
    retry_after: float | None = None
    rng: random.Random = field(default_factory=lambda: random.Random(0))

    @property
    def total(self) -> float:
        return self.rate_429 + self.rate_5xx + self.rate_drop + self.rate_stall + self.rate_error200

    @property
    def active(self) -> bool:
        return self.total > 0

    def draw(self) -> Reply | None:
        """One deterministic draw per chat call. Caller holds the lock."""
        r = self.rng.random()
        if r < (edge := self.rate_429):
            return Reply.error(429, "Rate limit exceeded: free-models-per-min", retry_after=self.retry_after)
        if r < (edge := edge + self.rate_5xx):
            return Reply.error(self.rng.choice(FAULT_5XX))
        if r < (edge := edge + self.rate_drop):
            return Reply.drop()
        if r < (edge := edge + self.rate_stall):
            return Reply.stall(self.stall_seconds)
        if r < edge + self.rate_error200:
            return self.rng.choice([Reply.error_in_200(), Reply.empty_choices(), Reply.choice_error()])
        return None


class _ProtocolError(Exception):
    """A request OpenRouter would reject; carries the error reply to send."""

    def __init__(self, reply: Reply) -> None:
        super().__init__(reply.message)
        self.reply = reply


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def message_text(content: Any) -> str:
    """Text of a message ``content``: a string, or the text parts of a content-part list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""


def _system_text(body: dict[str, Any] | None) -> str:
    """Text of the first ``system`` message of a chat body (a ``system=`` rule matches on it)."""
    messages = (body or {}).get("messages")
    for message in messages if isinstance(messages, list) else ():
        if isinstance(message, dict) and message.get("role") == "system":
            return message_text(message.get("content"))
    return ""


def last_user_text(body: dict[str, Any] | None) -> str:
    """Text of the last ``user`` message of a chat body; rules and ``count_for`` match on it."""
    messages = (body or {}).get("messages")
    if not isinstance(messages, list):
        return ""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return message_text(message.get("content"))
    return ""


def estimate_tokens(text: str) -> int:
    """Word-count token estimate (words and punctuation marks), at least 1."""
    return max(1, len(_TOKEN_RE.findall(text)))


def new_generation_id() -> str:
    """``gen-<unix time>-<20 random alphanumerics>``, OpenRouter's id format."""
    alphabet = string.ascii_letters + string.digits
    return f"gen-{int(time.time())}-" + "".join(secrets.choice(alphabet) for _ in range(20))


def _resolve_ref(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#"):
        return schema
    node: Any = root
    for part in ref.lstrip("#").strip("/").split("/"):
        if not part:
            continue
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            return {}
        node = node[part]
    return node if isinstance(node, dict) else {}


_NO_COMBINATION = object()


def minimal_instance(schema: Any, root: Any = None, depth: int = 0) -> Any:
    """A small instance valid for a JSON schema: first enum value, "ok" for strings, [] arrays,
    0, false, objects with every property filled recursively (why: a default answer that passes
    the client's schema validation without the test spelling it out)."""
    if not isinstance(schema, dict) or depth > 32:
        return None if schema is False else {}
    root = schema if root is None else root
    schema = _resolve_ref(schema, root)
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    combined = _combined_schema(schema, root)
    if combined is not _NO_COMBINATION:
        return minimal_instance(combined, root, depth + 1)
    kind = _schema_kind(schema)
    if kind == "object":
        props = schema.get("properties") or {}
        return {name: minimal_instance(sub, root, depth + 1) for name, sub in props.items()}
    if kind == "array":
        count = int(schema.get("minItems", 0) or 0)
        return [minimal_instance(schema.get("items", {}), root, depth + 1) for _ in range(count)]
    if kind == "string":
        return _minimal_string(schema)
    if kind in ("integer", "number"):
        return _minimal_number(schema)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return {}


def _combined_schema(schema: dict[str, Any], root: Any) -> Any:
    """The schema to fill for the first non-empty anyOf/oneOf (its first option) or allOf (its options
    merged); _NO_COMBINATION without one."""
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            if key == "allOf":
                merged: dict[str, Any] = {}
                for option in options:
                    merged.update(_resolve_ref(option, root) if isinstance(option, dict) else {})
                return merged
            return options[0]
    return _NO_COMBINATION


def _schema_kind(schema: dict[str, Any]) -> Any:
    """The schema's type: the first non-null one of a list; guessed from properties/items when absent."""
    kind = schema.get("type")
    if isinstance(kind, list):
        non_null = [k for k in kind if k != "null"]
        kind = non_null[0] if non_null else "null"
    if kind is None:
        kind = "object" if "properties" in schema else ("array" if "items" in schema else None)
    return kind


def _minimal_string(schema: dict[str, Any]) -> str:
    text = "ok"
    min_len = int(schema.get("minLength", 0) or 0)
    if len(text) < min_len:
        text = text + "k" * (min_len - len(text))
    max_len = schema.get("maxLength")
    return text[: int(max_len)] if isinstance(max_len, int) else text


def _minimal_number(schema: dict[str, Any]) -> int:
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    if isinstance(low, (int, float)) and low > 0:
        value: float = math.floor(low) + 1 if "exclusiveMinimum" in schema else math.ceil(low)
        return int(value)
    high = schema.get("maximum", schema.get("exclusiveMaximum"))
    if isinstance(high, (int, float)) and high < 0:
        return int(math.ceil(high) - 1 if "exclusiveMaximum" in schema else math.floor(high))
    return 0


def _is_object_schema(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    return kind == "object" or (isinstance(kind, list) and "object" in kind) or "properties" in schema


def strict_schema_problem(schema: Any, path: tuple[str, ...] = ()) -> str | None:
    """The first violation of OpenAI's strict-mode rules, worded like OpenAI, or None."""
    if not isinstance(schema, dict):
        return None
    if _is_object_schema(schema) and (problem := _object_problem(schema, path)):
        return problem
    for sub, where in _subschemas(schema, path):
        if problem := strict_schema_problem(sub, where):
            return problem
    return None


def _object_problem(schema: dict[str, Any], path: tuple[str, ...]) -> str | None:
    """An object schema's own violation: not closed, or a property not required."""
    context = "(" + ", ".join(repr(p) for p in path) + ("," if len(path) == 1 else "") + ")"
    if schema.get("additionalProperties") is not False:
        return f"In context={context}, 'additionalProperties' is required to be supplied and to be false."
    props = schema.get("properties") or {}
    required = schema.get("required") or []
    missing = [name for name in props if name not in required]
    if missing:
        return (
            f"In context={context}, 'required' is required to be supplied and to be an array "
            f"including every key in properties. Missing '{missing[0]}'."
        )
    return None


def _subschemas(schema: dict[str, Any], path: tuple[str, ...]) -> Iterator[tuple[Any, tuple[str, ...]]]:
    """Every schema nested one level down, with its path, in the order the rules are checked: an
    object's properties, items, combinations, definitions."""
    if _is_object_schema(schema):
        for name, sub in (schema.get("properties") or {}).items():
            yield sub, path + ("properties", name)
    for key in ("items", "additionalItems"):
        if isinstance(schema.get(key), dict):
            yield schema[key], path + (key,)
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        for index, sub in enumerate(schema.get(key) or []):
            yield sub, path + (key, str(index))
    for key in ("$defs", "definitions"):
        for name, sub in (schema.get(key) or {}).items():
            yield sub, path + (key, name)


def _parse_body(raw: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """A request's JSON object body, or None and why it is not one (None, None: no body)."""
    if not raw:
        return None, None
    try:
        parsed = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        return None, f"Invalid JSON in request body: {exc}"
    if not isinstance(parsed, dict):
        return None, "Request body must be a JSON object"
    return parsed, None


def _format_seconds(seconds: float) -> str:
    return str(int(seconds)) if float(seconds).is_integer() else repr(float(seconds))


# --------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------


class _HTTPServer(ThreadingHTTPServer):
    """Threaded server with a large backlog (2,000 requests at concurrency 50 must not queue)."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024
    fake: FakeOpenRouter

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that time out or hang up mid-response are routine here, not tracebacks.
        logger.debug("connection from %s ended abruptly", client_address, exc_info=True)


@dataclass
class _Response:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    close: Literal["drop", "stall"] | None = None
    stall_seconds: float = 0.0


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeOpenRouter/1.0"
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes: without NODELAY, Nagle + delayed ACK add
        # ~40 ms per keep-alive response.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.fake._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.fake._track(self.connection, add=False)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        # The request line never carries the key; headers are never logged.
        logger.debug("%s %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_PUT(self) -> None:
        self._dispatch()

    def do_DELETE(self) -> None:
        self._dispatch()

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _dispatch(self) -> None:
        raw = self._read_body()
        response = self.server.fake._handle(self.command, self.path, dict(self.headers.items()), raw)
        self._send(response)

    def _send(self, response: _Response) -> None:
        if response.close is not None:
            if response.close == "stall":
                self.server.fake._stop_event.wait(response.stall_seconds)
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        self.send_response(response.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(response.body)))
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(response.body)


class FakeOpenRouter:
    """The loopback OpenRouter. Configure it through attributes and methods; thread-safe."""

    def __init__(
        self,
        api_keys: Iterable[str] | None = None,
        latency: float = 0.0,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.api_keys: set[str] | None = set(api_keys) if api_keys is not None else None
        self.latency = latency
        self.host = host
        self.port = port
        #: USD per token as strings: ``{"model": ("prompt", "completion"[, "request"])}``.
        self.pricing: dict[str, tuple[str, ...]] = {}
        #: When a set, other model ids are answered 400 "<id> is not a valid model ID".
        self.known_models: set[str] | None = None
        #: Models with no structured-outputs endpoint: a json_schema request with
        #: ``provider.require_parameters`` gets OpenRouter's 404 "No endpoints found ...".
        self.no_structured_outputs: set[str] = set()
        #: Answer when no script/rule applies: a dict/list (sent as JSON), a str, or None for a
        #: minimal instance of the request's schema.
        self.default_answer: Any = None
        self.credit_limit: float = 100.0
        #: llama.cpp's slots: when set, ``GET /props`` publishes ``total_slots`` and at most that many
        #: chat requests are answered at once (the others wait in a queue, as llama.cpp's do).
        self.total_slots: int | None = None
        #: False: a keyless local server (a request without ``Authorization`` is answered).
        self.require_key = True
        self._slot_gate: threading.Semaphore | None = None
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._rules: list[Rule] = []
        self._script: collections.deque[Reply] = collections.deque()
        self._faults = _Faults()
        self._generations: dict[str, Generation] = {}
        self._by_status: collections.Counter[str] = collections.Counter()
        self._usage = 0.0
        self._connections: set[socket.socket] = set()
        self._stop_event = threading.Event()
        self._in_flight = 0
        #: The most chat requests this server was handling at one moment (a measure of client
        #: concurrency that does not depend on how fast the machine is).
        self.max_in_flight = 0
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle -------------------------------------------------------------------------

    def start(self) -> FakeOpenRouter:
        """Bind (a free port when ``port`` is 0) and serve in a daemon thread."""
        if self._httpd is not None:
            return self
        self._stop_event = threading.Event()
        httpd = _HTTPServer((self.host, self.port), _Handler)
        httpd.fake = self
        self._httpd = httpd
        self.port = httpd.server_address[1]
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.01},
            daemon=True,
            name=f"FakeOpenRouter:{self.port}",
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, wake sleeping/stalled handlers and close every open connection."""
        httpd = self._httpd
        if httpd is None:
            return
        self._stop_event.set()
        httpd.shutdown()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> FakeOpenRouter:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    @property
    def open_connections(self) -> int:
        """Client connections open right now (a keep-alive connection stays open between requests)."""
        with self._lock:
            return len(self._connections)

    # ---- addresses ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """OpenRouter-style base: ``http://127.0.0.1:PORT/api/v1``."""
        return f"{self.url}/api/v1"

    @property
    def openai_base_url(self) -> str:
        """OpenAI-compatible base: ``http://127.0.0.1:PORT/v1`` (same behaviour)."""
        return f"{self.url}/v1"

    # ---- configuration -------------------------------------------------------------------------

    def add_rule(
        self,
        *,
        contains: str | None = None,
        model: str | None = None,
        reply: Reply | list[Reply],
        system: str | None = None,
    ) -> Rule:
        """Answer matching chat requests with ``reply`` (a list is consumed in order, its last
        element then repeats). First matching rule wins, in insertion order."""
        replies = list(reply) if isinstance(reply, (list, tuple)) else [reply]
        if not replies:
            raise ValueError("reply list must not be empty")
        rule = Rule(contains=contains, model=model, replies=replies, system=system)
        with self._lock:
            self._rules.append(rule)
        return rule

    def script(self, *replies: Reply) -> None:
        """Queue replies consumed, one each, by the next chat calls before any rule."""
        with self._lock:
            self._script.extend(replies)

    def fault_rates(self, *, seed: int | None = 0, **rates: Any) -> None:
        """Random faults on valid chat calls, from a seeded RNG (one draw per call, so a serial
        client sees the same sequence for the same seed). ``rates`` by name, each 0 unless given:
        ``rate_429``, ``rate_5xx``, ``rate_drop``, ``rate_stall`` (a stall lasts ``stall_seconds``,
        default 5) and ``rate_error200`` (200s holding an error, no choices or a choice error);
        ``retry_after`` is sent with fault 429s."""
        faults = _Faults(**rates, rng=random.Random(seed))
        if faults.total > 1.0:
            raise ValueError(f"fault rates add up to {faults.total} > 1")
        with self._lock:
            self._faults = faults

    def reset(self) -> None:
        """Forget requests, rules, script, faults, generations and counters (keeps pricing,
        known models, default answer and latency)."""
        with self._lock:
            self._requests.clear()
            self._rules.clear()
            self._script.clear()
            self._faults = _Faults()
            self._generations.clear()
            self._by_status.clear()
            self._usage = 0.0

    # ---- inspection ------------------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received (except ``/_stats``), in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        """Only ``POST .../chat/completions`` requests."""
        return [r for r in self.requests if r.is_chat]

    def count_for(self, text: str, *, status: int | str | None = None) -> int:
        """How many chat requests had a last user message containing ``text`` (optionally only
        those answered with ``status``)."""
        return sum(
            1
            for r in self.chat_requests
            if text in r.last_user_content and (status is None or r.status == status)
        )

    @property
    def generations(self) -> dict[str, Generation]:
        with self._lock:
            return dict(self._generations)

    def stats(self) -> dict[str, Any]:
        """What ``GET /_stats`` serves."""
        with self._lock:
            chat = sum(1 for r in self._requests if r.is_chat)
            return {
                "chat_requests": chat,
                "by_status": dict(self._by_status),
                "generations": len(self._generations),
                "usage": self._usage,
            }

    # ---- request handling --------------------------------------------------------------------------

    def _handle(self, method: str, target: str, headers: dict[str, str], raw: bytes) -> _Response:
        split = urlsplit(target)
        path = split.path.rstrip("/") or "/"
        query = dict(parse_qsl(split.query, keep_blank_values=True))
        lower_headers = {k.lower(): v for k, v in headers.items()}
        if path.endswith("/_stats"):
            stats = self.stats()
            if "contains" in query:
                stats["count_for"] = self.count_for(query["contains"])
            return _json(200, stats)
        body, body_error = _parse_body(raw)
        record = RecordedRequest(method, path, query, lower_headers, body)
        with self._lock:
            self._requests.append(record)
        response = self._route(record, body_error)
        status: int | str = response.close or response.status
        record.status = status
        if record.is_chat:
            with self._lock:
                self._by_status[str(status)] += 1
        return response

    def _route(self, record: RecordedRequest, body_error: str | None) -> _Response:
        """The endpoint's answer to a recorded request."""
        method, path = record.method, record.path
        if path.endswith("/chat/completions"):
            if method != "POST":
                return _error(405, "Method Not Allowed")
            return self._chat(record, body_error)
        if path.endswith("/models") and method == "GET":
            return _json(200, self._models_json())
        if path.endswith("/generation") and method == "GET":
            return self._generation(record)
        if path.endswith("/key") and method == "GET":
            return self._key(record)
        if path.endswith("/props") and method == "GET" and self.total_slots:
            return _json(200, {"total_slots": self.total_slots, "default_generation_settings": {}})
        return _error(404, "Not Found")

    def _auth_problem(self, headers: dict[str, str]) -> _Response | None:
        value = headers.get("authorization", "")
        if not value and not self.require_key:
            return None
        scheme, _, key = value.partition(" ")
        key = key.strip()
        if scheme.lower() != "bearer" or not key:
            return _json(401, {"error": {"code": 401, "message": "No auth credentials found"}})
        if self.api_keys is not None and key not in self.api_keys:
            return _json(401, {"error": {"code": 401, "message": "User not found."}})
        return None

    def _chat(self, record: RecordedRequest, body_error: str | None) -> _Response:
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            if self.total_slots and self._slot_gate is None:
                self._slot_gate = threading.Semaphore(self.total_slots)
            gate = self._slot_gate if self.total_slots else None
        try:
            if gate is None:
                return self._chat_answer(record, body_error)
            with gate:  # queued until a slot is free, as a llama.cpp server queues requests
                return self._chat_answer(record, body_error)
        finally:
            with self._lock:
                self._in_flight -= 1

    def _chat_answer(self, record: RecordedRequest, body_error: str | None) -> _Response:
        started = time.monotonic()
        if self.latency > 0:
            self._stop_event.wait(self.latency)
        if self._stop_event.is_set():
            return _Response(0, close="drop")
        if (problem := self._auth_problem(record.headers)) is not None:
            return problem
        try:
            self._validate(record.body, body_error)
        except _ProtocolError as exc:
            return self._render(exc.reply, record.body or {}, started)
        reply = self._choose_reply(record)
        return self._render(reply, record.body or {}, started)

    def _validate(self, body: dict[str, Any] | None, body_error: str | None) -> None:
        """Raise ``_ProtocolError`` for a request OpenRouter would reject (400/404)."""
        if body is None:
            raise _ProtocolError(Reply.error(400, body_error or "Request body is required"))
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise _ProtocolError(Reply.error(400, "No models provided"))
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise _ProtocolError(Reply.error(400, 'Input required: specify "prompt" or "messages"'))
        for index, message in enumerate(messages):
            if not isinstance(message, dict) or not isinstance(message.get("role"), str):
                raise _ProtocolError(
                    Reply.error(400, f"Invalid messages[{index}]: expected an object with a role")
                )
        if self.known_models is not None and model not in self.known_models:
            raise _ProtocolError(Reply.error(400, f"{model} is not a valid model ID"))
        provider = body.get("provider")
        if provider is not None:
            if not isinstance(provider, dict):
                raise _ProtocolError(Reply.error(400, "Invalid provider preferences: expected object"))
            unknown = sorted(set(provider) - KNOWN_PROVIDER_KEYS)
            if unknown:
                keys = ", ".join(f"'{k}'" for k in unknown)
                raise _ProtocolError(
                    Reply.error(
                        400,
                        f"Invalid provider preferences: Unrecognized key(s) in object: {keys}",
                    )
                )
        self._validate_response_format(body, model, provider or {})

    def _validate_response_format(self, body: dict[str, Any], model: str, provider: dict[str, Any]) -> None:
        fmt = body.get("response_format")
        if fmt is None:
            return
        if not isinstance(fmt, dict) or fmt.get("type") not in ("json_schema", "json_object", "text"):
            raise _ProtocolError(
                Reply.error(400, "Invalid 'response_format.type': expected json_schema, json_object or text")
            )
        if fmt["type"] != "json_schema":
            return
        spec = fmt.get("json_schema")
        if not isinstance(spec, dict):
            raise _ProtocolError(
                Reply.error(400, "Missing required parameter: 'response_format.json_schema'.")
            )
        name = spec.get("name")
        if not isinstance(name, str) or not SCHEMA_NAME_RE.match(name):
            raise _ProtocolError(
                Reply.error(
                    400,
                    "Invalid 'response_format.json_schema.name': string does not match pattern. "
                    "Expected a string that matches the pattern '^[a-zA-Z0-9_-]{1,64}$'.",
                )
            )
        schema = spec.get("schema")
        if schema is not None and not isinstance(schema, dict):
            raise _ProtocolError(
                Reply.error(400, "Invalid 'response_format.json_schema.schema': expected an object.")
            )
        if model in self.no_structured_outputs and provider.get("require_parameters"):
            raise _ProtocolError(
                Reply.error(404, "No endpoints found that can handle the requested parameters.")
            )
        if model.startswith("openai/") and spec.get("strict") is True:
            problem = strict_schema_problem(schema or {})
            if problem:
                raise _ProtocolError(
                    Reply.error(
                        400,
                        f"Invalid schema for response_format '{name}': {problem}",
                        metadata={"provider_name": "OpenAI", "raw": problem},
                    )
                )

    def _choose_reply(self, record: RecordedRequest) -> Reply:
        model = record.model
        last_user = record.last_user_content
        with self._lock:
            if self._faults.active and (fault := self._faults.draw()) is not None:
                return fault
            if self._script:
                return self._script.popleft()
            system = _system_text(record.body)
            for rule in self._rules:
                if rule.matches(model, last_user, system):
                    return rule.next_reply()
            default = self.default_answer
        if default is None:
            default = self._schema_answer(record.body or {})
        return Reply.ok(default)

    @staticmethod
    def _schema_answer(body: dict[str, Any]) -> Any:
        fmt = body.get("response_format")
        if not isinstance(fmt, dict):
            return "ok"
        if fmt.get("type") == "json_object":
            return {}
        spec = fmt.get("json_schema")
        if fmt.get("type") == "json_schema" and isinstance(spec, dict):
            return minimal_instance(spec.get("schema") or {})
        return "ok"

    # ---- rendering ---------------------------------------------------------------------------------

    def _render(self, reply: Reply, body: dict[str, Any], started: float) -> _Response:
        model = reply.model or (body.get("model") if isinstance(body.get("model"), str) else "unknown")
        if reply.kind == "ok" and reply.seconds > 0:  # a slow model: answers after `seconds`
            (reply.release or self._stop_event).wait(reply.seconds)
        if reply.kind == "drop":
            return _Response(0, close="drop")
        if reply.kind == "stall":
            return _Response(0, close="stall", stall_seconds=reply.seconds)
        if reply.kind == "error":
            return self._render_error(reply)
        if reply.kind == "error_in_200":
            payload = {
                "error": {
                    "code": reply.code,
                    "message": reply.message,
                    "metadata": {"provider_name": reply.provider, "raw": reply.message},
                },
                "user_id": _USER_ID,
            }
            return _json(200, payload)
        gen_id = new_generation_id()
        envelope: dict[str, Any] = {
            "id": gen_id,
            "provider": reply.provider,
            "model": model,
            "object": "chat.completion",
            "created": int(time.time()),
            "system_fingerprint": None,
        }
        if reply.kind == "empty_choices":
            envelope["choices"] = []
            return _json(200, envelope)
        if reply.kind == "choice_error":
            envelope["choices"] = [
                {
                    "index": 0,
                    "finish_reason": "error",
                    "native_finish_reason": "error",
                    "message": {"role": "assistant", "content": "", "refusal": None, "reasoning": None},
                    "error": {
                        "code": reply.code,
                        "message": reply.message,
                        "metadata": {"provider_name": reply.provider, "raw": reply.message},
                    },
                }
            ]
            return _json(200, envelope)
        return self._render_ok(reply, body, model, envelope, started)

    def _render_ok(
        self,
        reply: Reply,
        body: dict[str, Any],
        model: str,
        envelope: dict[str, Any],
        started: float,
    ) -> _Response:
        content = reply.content
        if content is not None and not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False)
        if content is not None and reply.fenced:
            content = f"```json\n{content}\n```"
        messages = body.get("messages") if isinstance(body.get("messages"), list) else []
        prompt_text = "\n".join(message_text(m.get("content")) for m in messages if isinstance(m, dict))
        prompt_tokens = (
            reply.prompt_tokens if reply.prompt_tokens is not None else estimate_tokens(prompt_text)
        )
        completion_tokens = (
            reply.completion_tokens
            if reply.completion_tokens is not None
            else estimate_tokens(content or reply.refusal_text or "")
        )
        cost = self._cost(reply.cost, model, prompt_tokens, completion_tokens)
        usage: dict[str, Any] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        if cost != "missing":
            usage["cost"] = cost
        usage.update(
            {
                "is_byok": False,
                "prompt_tokens_details": {"cached_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 0},
                "cost_details": {"upstream_inference_cost": None},
            }
        )
        envelope["choices"] = [
            {
                "index": 0,
                "finish_reason": reply.finish_reason,
                "native_finish_reason": reply.finish_reason,
                "message": {
                    "role": "assistant",
                    "content": content,
                    "refusal": reply.refusal_text,
                    "reasoning": reply.reasoning,
                },
            }
        ]
        envelope["usage"] = usage
        numeric_cost = cost if isinstance(cost, (int, float)) else None
        generation = Generation(
            id=envelope["id"],
            model=model,
            provider_name=reply.provider,
            total_cost=numeric_cost,
            tokens_prompt=prompt_tokens,
            tokens_completion=completion_tokens,
            latency_ms=int((time.monotonic() - started) * 1000),
            finish_reason=reply.finish_reason,
            created_at=time.time(),
        )
        with self._lock:
            self._generations[generation.id] = generation
            self._usage += numeric_cost or 0.0
        text = "\n" * reply.keepalive_lines + json.dumps(envelope, ensure_ascii=False)
        return _Response(200, text.encode("utf-8"))

    def _cost(
        self, spec: CostSpec, model: str, prompt_tokens: int, completion_tokens: int
    ) -> float | None | Literal["missing"]:
        if not isinstance(spec, _Computed):
            return spec
        prices = self.pricing.get(model)
        if prices is None:
            return DEFAULT_COST
        prompt, completion = Decimal(prices[0]), Decimal(prices[1])
        per_request = Decimal(prices[2]) if len(prices) > 2 else Decimal(0)
        return float(prompt * prompt_tokens + completion * completion_tokens + per_request)

    @staticmethod
    def _render_error(reply: Reply) -> _Response:
        error: dict[str, Any] = {"message": reply.message}
        if reply.include_code:
            error = {"code": reply.status, **error}
        metadata = reply.metadata
        if metadata is None and reply.status == 429:
            reset_ms = int((time.time() + (reply.retry_after or 60)) * 1000)
            metadata = {
                "headers": {
                    "X-RateLimit-Limit": "20",
                    "X-RateLimit-Remaining": "0",
                    "X-RateLimit-Reset": str(reset_ms),
                }
            }
        if metadata is not None:
            error["metadata"] = metadata
        headers = {}
        if reply.retry_after is not None:
            headers["Retry-After"] = _format_seconds(reply.retry_after)
        payload = {"error": error, "user_id": _USER_ID}
        return _Response(reply.status, json.dumps(payload).encode("utf-8"), headers)

    # ---- other endpoints ---------------------------------------------------------------------------

    def _models_json(self) -> dict[str, Any]:
        ids = sorted(set(self.pricing) | set(self.known_models or ()))
        data = []
        for model_id in ids:
            prices = self.pricing.get(model_id, ("0", "0"))
            supported = [
                p
                for p in _SUPPORTED_PARAMETERS
                if model_id not in self.no_structured_outputs
                or p not in ("response_format", "structured_outputs")
            ]
            data.append(
                {
                    "id": model_id,
                    "canonical_slug": model_id,
                    "name": f"Fake: {model_id}",
                    "created": 1700000000,
                    "description": "A model served by the HELMBench loopback test server.",
                    "context_length": 128000,
                    "architecture": {
                        "modality": "text->text",
                        "input_modalities": ["text"],
                        "output_modalities": ["text"],
                        "tokenizer": "Other",
                    },
                    "pricing": {
                        "prompt": prices[0],
                        "completion": prices[1],
                        "request": prices[2] if len(prices) > 2 else "0",
                        "image": "0",
                    },
                    "top_provider": {
                        "context_length": 128000,
                        "max_completion_tokens": 16384,
                        "is_moderated": False,
                    },
                    "supported_parameters": supported,
                }
            )
        return {"data": data}

    def _generation(self, record: RecordedRequest) -> _Response:
        if (problem := self._auth_problem(record.headers)) is not None:
            return problem
        with self._lock:
            generation = self._generations.get(record.query.get("id", ""))
        if generation is None:
            return _error(404, f"Generation {record.query.get('id', '')} not found")
        return _json(200, {"data": generation.as_json()})

    def _key(self, record: RecordedRequest) -> _Response:
        if (problem := self._auth_problem(record.headers)) is not None:
            return problem
        with self._lock:
            usage = self._usage
        return _json(
            200,
            {
                "data": {
                    "label": "sk-or-v1-fak...e00",
                    "limit": self.credit_limit,
                    "limit_remaining": self.credit_limit - usage,
                    "usage": usage,
                    "is_free_tier": False,
                    "is_provisioning_key": False,
                }
            },
        )


def _json(status: int, payload: Any) -> _Response:
    return _Response(status, json.dumps(payload, ensure_ascii=False).encode("utf-8"))


def _error(status: int, message: str) -> _Response:
    return _json(status, {"error": {"code": status, "message": message}})


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Loopback OpenRouter protocol server for tests and benchmarks."
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds slept before every chat response")
    parser.add_argument(
        "--api-key", action="append", default=None, help="accepted key (repeatable); default any"
    )
    parser.add_argument("--fault-429", type=float, default=0.0)
    parser.add_argument("--fault-5xx", type=float, default=0.0)
    parser.add_argument("--fault-drop", type=float, default=0.0)
    parser.add_argument("--fault-stall", type=float, default=0.0)
    parser.add_argument("--fault-error200", type=float, default=0.0)
    parser.add_argument("--stall-seconds", type=float, default=5.0)
    parser.add_argument("--retry-after", type=float, default=None, help="Retry-After sent with fault 429s")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--default-answer", default=None, help="JSON answer for every call (default: schema minimum)"
    )
    parser.add_argument(
        "--pricing",
        action="append",
        default=[],
        metavar="MODEL=PROMPT:COMPLETION",
        help="USD per token, e.g. openai/gpt-4o-mini=0.00000015:0.0000006 (repeatable)",
    )
    parser.add_argument(
        "--known-model", action="append", default=None, help="restrict valid model ids (repeatable)"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Serve until SIGTERM/SIGINT; print ``BASE_URL=...`` first and ``REQUESTS=<n>`` last."""
    args = _parse_args(argv)
    pricing: dict[str, tuple[str, ...]] = {}
    for item in args.pricing:
        model, _, prices = item.partition("=")
        pricing[model] = tuple(prices.split(":"))
    server = FakeOpenRouter(api_keys=args.api_key, latency=args.latency, host=args.host, port=args.port)
    server.pricing = pricing
    server.known_models = set(args.known_model) if args.known_model else None
    server.default_answer = json.loads(args.default_answer) if args.default_answer else None
    server.fault_rates(
        rate_429=args.fault_429,
        rate_5xx=args.fault_5xx,
        rate_drop=args.fault_drop,
        rate_stall=args.fault_stall,
        stall_seconds=args.stall_seconds,
        seed=args.seed,
        rate_error200=args.fault_error200,
        retry_after=args.retry_after,
    )
    done = threading.Event()

    def _on_signal(signum: int, frame: Any) -> None:
        done.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    server.start()
    print(f"BASE_URL={server.base_url}", flush=True)
    try:
        while not done.wait(0.2):
            pass
    finally:
        count = len(server.chat_requests)
        server.stop()
        print(f"REQUESTS={count}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
