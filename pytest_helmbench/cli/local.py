"""`helmbench local-server [MODEL]`: the embedded llama.cpp model as a server for another tool.

A run starts its own server and stops it at the end; this keeps one running in the foreground
(Ctrl-C stops it) on a port of your choice, on 127.0.0.1 only, with a key of its own that it
prints: any OpenAI-compatible client (another harness, curl, or HELMBench itself with
`--helmbench-api openai --helmbench-base-url …`) can call it. The weights are fetched once, as a
run fetches them.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import typer

from ..errors import HelmbenchError
from .results import fail

DEFAULT_PORT = 8080


def local_server(
    model: str = typer.Argument(
        "local/smollm2", help="A local/ model id: local/smollm2 or local/<path>.gguf."
    ),
    port: int = typer.Option(DEFAULT_PORT, help="Port on 127.0.0.1 (0: any free port)."),
    parallel: int = typer.Option(2, min=1, help="Requests decoded at once (llama.cpp slots)."),
    ctx_size: int = typer.Option(4096, min=256, help="Context of one request, in tokens."),
) -> None:
    """Serve an embedded local model (llama.cpp, OpenAI-compatible) until Ctrl-C."""
    from ..providers.local.ids import is_local_model
    from ..providers.local.server import LocalServer
    from ..providers.local.weights import resolve_weights

    if not is_local_model(model):
        fail(f"{model!r} is not a local model id: use local/smollm2 or local/<path to a .gguf file>")
    if not 0 <= port <= 65535:
        fail(f"--port {port}: use 0..65535")
    project = Path.cwd()
    try:
        weights = resolve_weights(model, base_dir=project)
    except HelmbenchError as exc:
        fail(str(exc))
    slug = "".join(ch if ch.isalnum() else "_" for ch in model)
    log_path = project / ".helmbench" / f"{slug}-server.log"
    server = LocalServer(
        weights, log_path=log_path, alias=model, port=port, parallel=parallel, ctx_size=ctx_size
    )
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda _signum, _frame: stop.set())
    try:
        typer.echo(f"starting {model} ({weights.name}) on 127.0.0.1 …")
        try:
            base_url = server.start()
        except HelmbenchError as exc:
            fail(f"{exc} (the server's log: {log_path})")
        _say_ready(model, base_url, server.api_key, log_path)
        _wait(server, stop)
    finally:
        server.stop()
        signal.signal(signal.SIGTERM, previous)


def _say_ready(model: str, base_url: str, key: str, log_path: Path) -> None:
    typer.echo(f"{model} is served at {base_url} (OpenAI-compatible: /chat/completions, /models)")
    typer.echo(f"key: {key}   (send `Authorization: Bearer <key>`; the server answers no call without it)")
    typer.echo(f"log: {log_path}")
    typer.echo(  # a model id outside local/: the run calls this server instead of starting its own
        "HELMBench against it: OPENROUTER_API_KEY=<key> pytest --helmbench-api openai "
        f"--helmbench-base-url {base_url} --helmbench-model served/{model.removeprefix('local/')} "
        f"--helmbench-marking-model served/{model.removeprefix('local/')} --helmbench-sample 10"
    )
    typer.echo("Ctrl-C stops it.")


def _wait(server: object, stop: threading.Event) -> None:
    """Until Ctrl-C (or SIGTERM); a server that died says so and exits 1."""
    try:
        while not stop.wait(0.5):
            death = server.death()  # type: ignore[attr-defined]
            if death is not None:
                fail(death)
    except KeyboardInterrupt:
        pass
    typer.echo("stopped")


def register(app: typer.Typer) -> None:
    app.command("local-server")(local_server)
