"""The first run's time (`python bench/first_run.py`): `python3 dev.py bench`'s pytest command, timed
as a newcomer meets it, with where the time goes.

It runs exactly dev.py's BENCH_ARGS (the FIRST_RUN_CASES on local/smollm2, every reply judged by
the same model) in the project root, in a fresh interpreter, into a throwaway database, with pytest's
`--log-file` collecting the local provider's lines: how long the weights took to resolve (a download
on the very first run), how long the llama.cpp server took to start, and one line per call with
llama.cpp's own timings. It prints the wall time, the time per phase (weights, server start, model,
judge and simulated-user calls: their summed busy time, which overlaps when the server decodes two
requests at once) and the tokens per second of prompt reading and of generation, then the outcome
line. Target (issue #31): under 3 minutes on two cores. Nothing here talks to anything but 127.0.0.1.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
import dev  # noqa: E402  (the command dev.py bench runs)

TARGET_S = 180.0
CALL = re.compile(
    r"local call role=(?P<role>\w+) prompt_n=(?P<prompt_n>\d+) prompt_ms=(?P<prompt_ms>\d+) "
    r"cached_n=(?P<cached_n>\w+) predicted_n=(?P<predicted_n>\d+) predicted_ms=(?P<predicted_ms>\d+) "
    r"wall_ms=(?P<wall_ms>\d+)"
)
WEIGHTS = re.compile(r"local weights \S+ resolved in (?P<s>[\d.]+) s")
SERVER = re.compile(r"local model \S+ serving at .+? in (?P<s>[\d.]+) s \(log")
OUTCOME = re.compile(r"^=+ (?P<line>.*\d+ (passed|failed|error).*) =+$", re.MULTILINE)


@dataclass
class Calls:
    """The summed llama.cpp timings of one role's calls."""

    count: int = 0
    prompt_n: int = 0
    prompt_ms: float = 0.0
    cached_n: int = 0
    predicted_n: int = 0
    predicted_ms: float = 0.0
    wall_ms: float = 0.0


@dataclass
class Phases:
    weights_s: float | None = None
    server_s: float | None = None
    calls: dict[str, Calls] = field(default_factory=lambda: defaultdict(Calls))


def read_log(text: str) -> Phases:
    phases = Phases()
    if found := WEIGHTS.search(text):
        phases.weights_s = float(found["s"])
    if found := SERVER.search(text):
        phases.server_s = float(found["s"])
    for found in CALL.finditer(text):
        calls = phases.calls[found["role"]]
        calls.count += 1
        calls.prompt_n += int(found["prompt_n"])
        calls.prompt_ms += float(found["prompt_ms"])
        calls.cached_n += int(found["cached_n"]) if found["cached_n"].isdigit() else 0
        calls.predicted_n += int(found["predicted_n"])
        calls.predicted_ms += float(found["predicted_ms"])
        calls.wall_ms += float(found["wall_ms"])
    return phases


def per_second(tokens: int, ms: float) -> str:
    return f"{tokens / (ms / 1000):.0f} tok/s" if ms > 0 else "-"


def report(wall_s: float, phases: Phases, outcome: str) -> list[str]:
    lines = [f"first run: {wall_s:.0f} s wall ({'under' if wall_s < TARGET_S else 'OVER'} the 180 s target)"]
    if phases.weights_s is not None:
        lines.append(f"  weights          {phases.weights_s:6.1f} s")
    if phases.server_s is not None:
        lines.append(f"  server start     {phases.server_s:6.1f} s")
    total = Calls()
    for role in ("model", "judge", "user"):
        calls = phases.calls.get(role)
        if calls is None:
            continue
        for name in ("count", "prompt_n", "prompt_ms", "cached_n", "predicted_n", "predicted_ms"):
            setattr(total, name, getattr(total, name) + getattr(calls, name))
        lines.append(
            f"  {role + ' calls':<16} {calls.wall_ms / 1000:6.1f} s busy over {calls.count} calls: "
            f"prompt {calls.prompt_n} tokens ({calls.cached_n} cached) at "
            f"{per_second(calls.prompt_n, calls.prompt_ms)}, generated {calls.predicted_n} tokens at "
            f"{per_second(calls.predicted_n, calls.predicted_ms)}"
        )
    lines.append(
        f"  all calls: prompt {per_second(total.prompt_n, total.prompt_ms)}, "
        f"generation {per_second(total.predicted_n, total.predicted_ms)}"
    )
    lines.append(f"  outcome: {outcome}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("extra", nargs="*", help="more pytest arguments")
    args = parser.parse_args(argv)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HELMBENCH_", "PYTEST_"))}
    env["PYTHONUNBUFFERED"] = "1"  # the run's own progress lines as they come, not in blocks
    with tempfile.TemporaryDirectory(prefix="helmbench-first-run-") as tmp:
        log_file = Path(tmp) / "first_run.log"
        command = [
            str(Path(sys.executable).parent / "pytest"),
            *dev.BENCH_ARGS,
            f"--helmbench-db=sqlite:///{tmp}/first_run.db",
            f"--log-file={log_file}",
            "--log-file-level=INFO",
            *args.extra,
        ]
        started = time.monotonic()
        printed: list[str] = []
        with subprocess.Popen(
            command, cwd=REPO, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        ) as child:
            assert child.stdout is not None
            for line in child.stdout:  # shown as it comes: the run's own progress
                sys.stdout.write(line)
                printed.append(line)
        wall_s = time.monotonic() - started
        text = log_file.read_text(encoding="utf-8", errors="replace") if log_file.exists() else ""
    found = OUTCOME.findall("".join(printed))
    outcome = found[-1][0] if found else f"exit {child.returncode}"
    print("\n".join(report(wall_s, read_log(text), outcome)))
    return 0 if child.returncode in (0, 1) else child.returncode


if __name__ == "__main__":
    sys.exit(main())
