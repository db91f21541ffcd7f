"""The embedded local model's llama.cpp server (xllamacpp) on 127.0.0.1, and its child-process side.

The server runs in a child process (``python -m pytest_helmbench.providers.local.server serve ...``)
so that it can always be stopped: the child exits when its stdin pipe from the parent closes, which
happens on ``stop()``, on normal interpreter exit and also when the parent is killed with SIGKILL.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib
import importlib.util
import logging
import os
import secrets
import select
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType, TracebackType
from typing import NoReturn

from .ids import INSTALL_HINT, LocalProviderError

log = logging.getLogger(__name__)

KEY_ENV_NAME = "HELMBENCH_LOCAL_SERVER_KEY"  # how the parent hands the child its key

_LOG_TAIL_LINES = 40
# Health checks go straight to 127.0.0.1, never through a proxy configured in the environment.
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))

# --------------------------------------------------------------------------------------------------
# Optional dependency
# --------------------------------------------------------------------------------------------------


def _missing_xllamacpp(detail: str = "") -> LocalProviderError:
    extra = f" ({detail})" if detail else ""
    return LocalProviderError(
        f"the local model provider needs the optional package xllamacpp, which is not importable{extra}. "
        f"Install it with: {INSTALL_HINT}"
    )


def ensure_xllamacpp() -> None:
    """Fail early with the install command, without loading the large native library in this process."""
    try:
        spec = importlib.util.find_spec("xllamacpp")
    except (ImportError, ValueError) as exc:
        raise _missing_xllamacpp(str(exc)) from exc
    if spec is None:
        raise _missing_xllamacpp()


def import_xllamacpp() -> ModuleType:
    """Import xllamacpp, turning ImportError into the one clear install message."""
    try:
        return importlib.import_module("xllamacpp")
    except ImportError as exc:
        raise _missing_xllamacpp(str(exc)) from exc


# --------------------------------------------------------------------------------------------------
# Server lifecycle (parent side)
# --------------------------------------------------------------------------------------------------


def _log_tail(path: Path, offset: int, lines: int = _LOG_TAIL_LINES) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.strip().splitlines()[-lines:]) or "(log is empty)"


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity, as a container sets it)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 2


def default_threads() -> int:
    """One fewer than the CPUs this process may run on, so the harness keeps a core of its own; at
    least one."""
    return max(1, usable_cpus() - 1)


SMALL_WEIGHTS_BYTES = 1 << 30
MAX_REPLICAS = 4


@dataclass(frozen=True)
class ServerPlan:
    """How a model is served: `servers` llama.cpp servers (its replicas), each of `threads` threads
    decoding `slots` requests at once."""

    servers: int
    threads: int
    slots: int


def replica_plan(weights_bytes: int) -> ServerPlan:
    """How to serve one model.

    A small model (under 1 GiB of weights) gets one single-thread server per CPU, up to MAX_REPLICAS,
    each decoding one request at a time, and its calls are spread over them: one llama.cpp server of
    one thread reads a prompt on one core only (SmolLM2-135M: about 130 tokens/s on this project's
    two-core machines), one server of two threads stalls whenever the harness takes a core
    (LocalServer's docstring), and two requests in one single-thread server interleave, so one's
    generation waits for the other's whole prompt at each step (7 tokens/s instead of 25-47 in the
    first run). A larger model gets one server of `default_threads()` and two slots: each replica
    would hold its own context memory, gigabytes for a 7B model."""
    cpus = usable_cpus()
    if weights_bytes >= SMALL_WEIGHTS_BYTES or cpus < 2:
        return ServerPlan(1, default_threads(), 2)
    replicas = min(cpus, MAX_REPLICAS)
    return ServerPlan(replicas, max(1, (cpus - 1) // replicas), 1)


def _package_root() -> str:
    return str(Path(__file__).resolve().parent.parent.parent)


class LocalServer:
    """A llama.cpp server for one GGUF file in a child process, on a free 127.0.0.1 port.

    ``ctx_size`` is the context of one request; the server holds ``parallel`` such slots.
    ``repeat_penalty`` is the server's default for requests that do not send one: at 1.0 the small
    SmolLM2 loops inside JSON strings until ``max_tokens`` on about half of the prompts tried; 1.1 cut
    that to 1 in 16 and made answers ~5x faster.
    ``threads`` defaults to one fewer than the CPUs this process may use (at least one): llama.cpp's
    threads spin at a barrier each step, so when the harness (or anything else) takes a core they
    all wait. On two cores, two threads decoded at 1-9 tokens/s whenever pytest was busy, one thread
    at a steady 25-47 (bench/first_run.py).
    """

    # The keyword-only options are llama-server's own flags (--ctx-size, --threads, --parallel, --alias,
    # --repeat-penalty) plus the start timeout and the key, each with its default: callers name the one
    # they change.
    def __init__(  # noqa: PLR0913
        self,
        weights: Path,
        *,
        log_path: Path,
        ctx_size: int = 4096,
        threads: int | None = None,
        parallel: int = 2,
        startup_timeout: float = 180.0,
        alias: str | None = None,
        repeat_penalty: float = 1.1,
        port: int = 0,
        api_key: str | None = None,
    ) -> None:
        self.weights = Path(weights)
        self.log_path = Path(log_path)
        self.ctx_size = ctx_size
        self.threads = threads or default_threads()
        self.parallel = parallel
        self.startup_timeout = startup_timeout
        self.alias = alias or self.weights.stem  # reported as "model" instead of the local file path
        self.repeat_penalty = repeat_penalty
        self.port = port  # 0: a free port (a run's server); `helmbench local-server` may fix one
        self.base_url: str | None = None
        # This session's key: the server answers no other local user's calls (passed to the child in
        # its environment, never on its command line, which every user can read). A model's replicas
        # share one.
        self.api_key = api_key or secrets.token_urlsafe(24)
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """Process id of the server process while started."""
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        """False once stopped, or if the server process died after start."""
        return self._proc is not None and self._proc.poll() is None

    def death(self) -> str | None:
        """Why the started server is no longer there (None while it runs, or before it started)."""
        if self._proc is None or self._proc.poll() is None:
            return None
        return f"the local model server died (exit code {self._proc.returncode}); its log: {self.log_path}"

    def start(self) -> str:
        """Start the server, wait until /health answers, and return ``http://127.0.0.1:PORT/v1``."""
        if self.base_url is not None:
            return self.base_url
        ensure_xllamacpp()
        if not self.weights.is_file():
            raise LocalProviderError(f"local model weights not found: {self.weights}")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        try:
            with open(self.log_path, "ab") as log_file:  # the child keeps its own copy of the descriptor
                offset = log_file.tell()
                stamp = datetime.now(UTC).isoformat(timespec="seconds")
                log_file.write(self._start_line(stamp).encode())
                log_file.flush()
                self._proc = subprocess.Popen(  # noqa: S603 - our own interpreter and module
                    self._command(),
                    stdin=subprocess.PIPE,  # its EOF tells the child to exit, also when we are SIGKILLed
                    stdout=subprocess.PIPE,  # carries the listening address once the model is loaded
                    stderr=log_file,
                    start_new_session=True,  # a terminal Ctrl-C reaches only pytest, which then calls stop()
                    env=self._child_env(),
                )
            atexit.register(self.stop)
            address = self._read_address(deadline=started + self.startup_timeout, offset=offset)
            self._wait_healthy(address, deadline=started + self.startup_timeout, offset=offset)
        except BaseException:
            self.stop()
            raise
        self.base_url = f"{address}/v1"
        log.info("local model server for %s ready at %s in %.1f s", self.weights.name, self.base_url,
                 time.monotonic() - started)  # fmt: skip
        return self.base_url

    def _start_line(self, stamp: str) -> str:
        return (
            f"\n=== {stamp} helmbench: starting local server, weights={self.weights}, "
            f"port={self.port or 'auto'} (127.0.0.1), "
            f"ctx_size={self.ctx_size}, parallel={self.parallel}, threads={self.threads or 'auto'}, "
            f"repeat_penalty={self.repeat_penalty}\n"
        )

    def _command(self) -> list[str]:
        command = [sys.executable, "-m", "pytest_helmbench.providers.local.server", "serve",
                   "--weights", str(self.weights), "--port", str(self.port), "--log", str(self.log_path),
                   "--ctx-size", str(self.ctx_size), "--parallel", str(self.parallel),
                   "--alias", self.alias, "--repeat-penalty", str(self.repeat_penalty)]  # fmt: skip
        if self.threads:
            command += ["--threads", str(self.threads)]
        return command

    def _child_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env[KEY_ENV_NAME] = self.api_key
        paths = [_package_root(), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
        env["PYTHONPATH"] = os.pathsep.join(paths)
        return env

    def _fail(self, message: str, offset: int) -> LocalProviderError:
        return LocalProviderError(
            f"{message}\nlast lines of the server log {self.log_path}:\n{_log_tail(self.log_path, offset)}"
        )

    def _read_address(self, *, deadline: float, offset: int) -> str:
        """The child writes its listening address on stdout once the model is loaded."""
        assert self._proc is not None and self._proc.stdout is not None
        stream = self._proc.stdout
        buffer = b""
        while b"\n" not in buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._fail(
                    f"local model server did not start within {self.startup_timeout:.0f} s", offset
                )
            ready, _, _ = select.select([stream], [], [], min(remaining, 0.5))
            if not ready:
                continue
            chunk = os.read(stream.fileno(), 4096)
            if not chunk:  # the child closed stdout: it died during startup
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._proc.wait(timeout=10)
                raise self._fail(
                    f"local model server exited during startup (exit code {self._proc.poll()})", offset
                )
            buffer += chunk
        return buffer.split(b"\n", 1)[0].decode().strip().rstrip("/")

    def _wait_healthy(self, address: str, *, deadline: float, offset: int) -> None:
        assert self._proc is not None
        while True:
            code = self._proc.poll()
            if code is not None:
                raise self._fail(f"local model server exited during startup (exit code {code})", offset)
            try:
                with _NO_PROXY.open(f"{address}/health", timeout=5) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass  # 503 while loading, or not listening yet
            if time.monotonic() >= deadline:
                raise self._fail(
                    f"local model server not healthy within {self.startup_timeout:.0f} s", offset
                )
            time.sleep(0.1)

    def stop(self) -> None:
        """Stop the child (closing its stdin asks it to exit; escalate to SIGTERM, SIGKILL). Idempotent."""
        proc, self._proc = self._proc, None
        was_ready, self.base_url = self.base_url is not None, None
        atexit.unregister(self.stop)
        if proc is not None:
            if proc.poll() is None and not was_ready:
                proc.kill()  # still loading (failed or interrupted start): native code may not notice EOF
                proc.wait()
            elif proc.poll() is None:
                with contextlib.suppress(OSError):
                    assert proc.stdin is not None
                    proc.stdin.close()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.terminate()
                    try:
                        proc.wait(timeout=3)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait()
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()

    def __enter__(self) -> LocalServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


# --------------------------------------------------------------------------------------------------
# Server process (child side)
# --------------------------------------------------------------------------------------------------


def _build_params(xlc: ModuleType, args: argparse.Namespace, api_key: str = "") -> object:
    params = xlc.CommonParams()
    if api_key:  # every completion needs it (/health stays open)
        params.api_keys = [api_key]
    params.model.path = str(args.weights)
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    params.n_parallel = args.parallel
    params.n_ctx = args.ctx_size * args.parallel  # llama.cpp splits n_ctx between the slots
    params.model_alias = {args.alias}
    params.sampling.penalty_repeat = args.repeat_penalty  # default; a request's repeat_penalty wins
    if args.threads:
        params.cpuparams.n_threads = args.threads
        params.cpuparams_batch.n_threads = args.threads
    return params


def _watch_parent() -> None:
    """Exit when stdin (a pipe from the parent) reaches EOF: the parent closed it or died."""
    with contextlib.suppress(OSError, ValueError):
        while os.read(sys.stdin.fileno(), 4096):
            pass
    log.info("stopping: parent closed the pipe (pid=%d)", os.getpid())
    _hard_exit(0)


def _on_signal(signum: int, _frame: object) -> None:
    log.info("stopping: signal %d (pid=%d)", signum, os.getpid())
    _hard_exit(0)


def serve(args: argparse.Namespace) -> int:  # returns only on failure
    """Child process: run the server until the parent goes away or sends SIGTERM."""
    ready = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # native library output goes to the log too
    parent = os.getppid()
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    threading.Thread(target=_watch_parent, daemon=True).start()
    key = os.environ.pop(KEY_ENV_NAME, "")  # kept out of anything the server's children inherit
    try:
        xlc = import_xllamacpp()
        server = xlc.Server(_build_params(xlc, args, key))
    except (LocalProviderError, RuntimeError) as exc:
        log.error("could not start the server: %s", exc)
        return 1
    address = str(server.listening_address)
    log.info("listening on %s (weights=%s, pid=%d)", address, args.weights, os.getpid())
    try:
        ready.write(address + "\n")
        ready.close()
    except OSError:  # the parent is already gone
        _hard_exit(0)
    # Poll too: a forked (not exec'd) sibling could keep the pipe open after the parent died.
    while os.getppid() == parent:
        time.sleep(0.5)
    log.info("stopping: parent %d is gone (pid=%d)", parent, os.getpid())
    # Every exit path uses os._exit while `server` is still referenced: its destructor waits for
    # in-flight requests while holding the GIL. The OS closes the socket and frees the model.
    _hard_exit(0)


def main(argv: list[str] | None = None) -> NoReturn:
    parser = argparse.ArgumentParser(prog="python -m pytest_helmbench.providers.local.server")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("serve", help="run a llama.cpp server until stdin closes")
    run.add_argument("--weights", type=Path, required=True)
    run.add_argument("--port", type=int, default=0, help="0 picks a free port")
    run.add_argument("--log", type=Path, help="log file (default: stderr)")
    run.add_argument("--ctx-size", type=int, default=4096)
    run.add_argument("--parallel", type=int, default=2)
    run.add_argument("--threads", type=int, default=None)
    run.add_argument("--alias", default="local")
    run.add_argument("--repeat-penalty", type=float, default=1.1)
    args = parser.parse_args(argv)
    handler: logging.Handler = logging.StreamHandler(sys.stderr)
    if args.log is not None and not _stderr_is(args.log):
        handler = logging.FileHandler(args.log)
    handler.setFormatter(logging.Formatter("%(asctime)s helmbench-local %(levelname)s %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    _hard_exit(serve(args))


def _hard_exit(code: int) -> NoReturn:
    """Exit now, skipping interpreter teardown: native server threads must not block the exit."""
    logging.shutdown()
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def _stderr_is(path: Path) -> bool:
    """True when stderr already is ``path`` (the parent passes the log as stderr)."""
    try:
        return os.path.samestat(os.fstat(sys.stderr.fileno()), os.stat(path))
    except OSError:
        return False


if __name__ == "__main__":
    main()
