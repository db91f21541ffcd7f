"""Shared helpers of the benchmark scripts: a generated benchmark tree, the loopback server as a
subprocess, and timed pytest commands (each in a fresh interpreter, as a user would run them).

Nothing here talks to anything but 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SERVER = REPO / "tests" / "openrouter_server.py"
API_KEY = "sk-bench-0123456789"
MODEL = "openai/gpt-4o-mini"

sys.path.insert(0, str(REPO))
from tests.benchfiles import SCENARIO  # noqa: E402  (the same files the tests use)
from tests.benchfiles import STRICT_SCHEMA as SCHEMA  # noqa: E402


def write_bare_project(folder: Path, cases: int) -> None:
    """A project of `cases` parametrized trivial tests: what bare pytest is compared against."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pytest.ini").write_text("[pytest]\n")
    (folder / "test_trivial.py").write_text(
        f"import pytest\n\n@pytest.mark.parametrize('i', range({cases}))\n"
        "def test_trivial(i):\n    assert i >= 0\n"
    )


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _components(prefix: str, count: int, heading: str, extra: str = "") -> str:
    return "\n".join(
        f"# {prefix}{i}: {prefix.lower()} {i}\n---\nseverity: 0\n{extra}---\n\n"
        f"## {heading}\n\n{heading} number {i}.\n"
        for i in range(1, count + 1)
    )


def write_benchmark(
    root: Path, *, scenarios: int, conditions: int = 2, contexts: int = 4, perturbations: int = 10
) -> int:
    """A benchmark of scenarios x conditions x (1 + contexts) x perturbations cases; returns the count.

    The loopback server's default answer (the first enum value of the schema) is the expected
    category, so every case passes when the call succeeds.
    """
    _write(root / "models.yml", f"models:\n  - id: {MODEL}\n")
    _write(root / "conditions.md", _components("C", conditions, "System instructions"))
    _write(root / "user-contexts.md", _components("U", contexts, "User preferences"))
    _write(
        root / "benchmark.yml",
        "version: '0.1'\ndescription: generated\npillars:\n  P1: {name: P, description: d}\n"
        "behaviours:\n  P1-B1: {title: t, description: d, compliance: c}\n",
    )
    for s in range(1, scenarios + 1):
        folder = root / "scenarios" / f"P1-B1-S{s}"
        _write(folder / f"S{s}.md", SCENARIO)
        _write(folder / f"S{s}.json", json.dumps(SCHEMA))
        _write(
            folder / "perturbations.md",
            _components("PT", perturbations, "User input", "style: explicit\n").replace(
                "User input number", f"Scenario {s}, question"
            ),
        )
    return scenarios * conditions * (1 + contexts) * perturbations


def write_project(folder: Path, scenarios: int) -> int:
    """A project folder (pytest.ini + benchmark/) ready for `pytest benchmark`; returns the case count."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    return write_benchmark(folder / "benchmark", scenarios=scenarios)


def write_projects(folder: Path, scenarios: int) -> tuple[Path, Path, int]:
    """The HELMBench project and the bare project with as many trivial tests: (helm, bare, cases)."""
    helm, bare = folder / "helm", folder / "bare"
    cases = write_project(helm, scenarios)
    write_bare_project(bare, cases)
    return helm, bare, cases


class Server:
    """tests/openrouter_server.py as a subprocess (its own interpreter: it never competes for our GIL)."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(SERVER), "--port", "0", "--api-key", API_KEY, *args],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if not line.startswith("BASE_URL="):
            self.process.kill()
            raise RuntimeError(f"the loopback server did not start: {line!r}")
        self.base_url = line.split("=", 1)[1]

    def stop(self) -> int:
        """Stop it; returns the number of chat requests it served."""
        self.process.terminate()
        out, _ = self.process.communicate(timeout=30)
        for line in out.splitlines():
            if line.startswith("REQUESTS="):
                return int(line.split("=", 1)[1])
        return -1

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:
            self.stop()


@dataclass
class Timed:
    seconds: float
    max_rss_mb: float
    returncode: int
    tail: str


def helm_env(base_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HELMBENCH_")}
    env.update(
        {"OPENROUTER_API_KEY": API_KEY, "OPENROUTER_BASE_URL": base_url, "PYTHONDONTWRITEBYTECODE": "1"}
    )
    return env


def run_pytest(cwd: Path, args: list[str], env: dict[str, str] | None = None) -> Timed:
    """Wall time and peak memory (this child's own ru_maxrss, via wait4) of one `python -m pytest`."""
    with tempfile.TemporaryFile("w+") as out:
        started = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        tail = "\n".join(out.read().strip().splitlines()[-3:])
    return Timed(seconds, usage.ru_maxrss / 1024.0, process.returncode, tail)


def median(values: list[float]) -> float:
    return statistics.median(values)


def check(timed: Timed, what: str) -> None:
    if timed.returncode != 0:
        raise SystemExit(f"{what} failed (exit {timed.returncode}):\n{timed.tail}")
