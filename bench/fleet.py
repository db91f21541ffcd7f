"""Teams and fleets: throughput against the loopback server, three shards into one PostgreSQL, and the
per-case storage cost of PostgreSQL against SQLite. Measured in one run, so the figures are ratios.

1. Throughput: 2,000 cases at 200 ms per call, --helmbench-concurrency 50, five consecutive runs
   (median <= 1.3x the ideal, worst <= 1.45x), and concurrency 10 (<= 1.1x).
2. Fleet: three shard processes (--helmbench-shard k/3, one --helmbench-run-key, each at concurrency
   50) into one PostgreSQL, 6,000 cases at 200 ms: every Result stored exactly once, one run, wall
   <= 1.5x the ideal of one process at concurrency 150.
3. Storage: 20,000 Results recorded by the recorder the plugin uses, as a run records them (content
   rows prepared up front, then each Result with the answers finished ahead of it: 50 at a time, a
   wave of concurrency-50 calls), into PostgreSQL with its default durability (fsync and synchronous
   commit on) and into SQLite: PostgreSQL's per-case cost <= 1.5x SQLite's. The same one Result at a
   time (every answer arriving after the previous one was stored) is printed for comparison.

PostgreSQL is a throwaway server (tests/postgres_server.py: Debian's binaries, a temp folder, a free
port on 127.0.0.1), started here with fsync on. Nothing talks to anything but 127.0.0.1.

    python bench/fleet.py [--runs 5] [--runs-10 1] [--fleet-runs 3] [--storage-cases 20000]
                          [--skip throughput,fleet,storage]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path

from common import REPO, Server, check, helm_env, median, run_pytest, write_project

sys.path.insert(0, str(REPO))
from pytest_helmbench.execution.prefetch import EARLY_BATCH  # noqa: E402
from tests.benchfiles import make_outcomes  # noqa: E402  (the outcomes a run would record)
from tests.postgres_server import PostgresServer  # noqa: E402

LATENCY = 0.2
TARGET_MEDIAN, TARGET_WORST, TARGET_10 = 1.3, 1.45, 1.1
TARGET_FLEET, TARGET_STORAGE = 1.5, 1.5
STORAGE_WAVE = 50  # answers finished together: a wave of concurrency-50 calls


def plain_env(base_url: str) -> dict[str, str]:
    """HELMBench (and xdist) alone, as in a user's environment: the dev extra's other pytest plugins
    (hypothesis, pytest-html, -cov, -timeout, -rerunfailures, ...) cost ~1 ms per test between them."""
    return helm_env(base_url) | {
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "PYTEST_PLUGINS": "pytest_helmbench.plugin,xdist.plugin",
    }


def verdict(ratio: float, target: float) -> str:
    return "OK" if ratio <= target else "MISSED"


def throughput(folder: Path, runs: int, runs_10: int) -> None:
    cases = write_project(folder / "throughput", 20)  # 20 scenarios x 100 = 2,000 cases
    with Server("--latency", str(LATENCY)) as server:
        env = plain_env(server.base_url)
        for concurrency, repeats, targets in ((50, runs, (TARGET_MEDIAN, TARGET_WORST)), (10, runs_10, None)):
            if repeats <= 0:
                continue
            ideal = cases * LATENCY / concurrency
            walls = []
            for attempt in range(repeats):
                db = folder / f"t{concurrency}-{attempt}.db"
                args = ["benchmark", "-q", f"--helmbench-db=sqlite:///{db}"]
                timed = run_pytest(
                    folder / "throughput", [*args, f"--helmbench-concurrency={concurrency}"], env
                )
                check(timed, f"concurrency {concurrency}")
                walls.append(timed.seconds)
            ratios = [wall / ideal for wall in walls]
            line = (
                f"throughput, {cases} cases at {LATENCY * 1000:.0f} ms, concurrency {concurrency}: "
                f"runs {', '.join(f'{w:.2f}' for w in walls)} s; ideal {ideal:.2f} s; "
                f"median {median(ratios):.2f}x, worst {max(ratios):.2f}x"
            )
            if targets:
                line += (
                    f" (targets <= {targets[0]}x / <= {targets[1]}x) -> "
                    f"{verdict(median(ratios), targets[0])} / {verdict(max(ratios), targets[1])}"
                )
            else:
                line += f" (target <= {TARGET_10}x) -> {verdict(median(ratios), TARGET_10)}"
            print(line, flush=True)


def fleet(folder: Path, postgres: PostgresServer, runs: int) -> None:
    """`runs` fleets one after the other (each into a fresh database): the machine's speed drifts, so
    one figure alone says little."""
    project = folder / "fleet"
    cases = write_project(project, 60)  # 6,000 cases
    walls = [_one_fleet(project, cases, postgres.new_database("fleet")) for _ in range(runs)]
    if runs > 1:
        ratios = [wall * 150 / (cases * LATENCY) for wall in walls]
        print(
            f"fleet, {runs} runs: median {median(ratios):.2f}x, worst {max(ratios):.2f}x, "
            f"best {min(ratios):.2f}x (target <= {TARGET_FLEET}x) -> {verdict(median(ratios), TARGET_FLEET)}",
            flush=True,
        )


def _one_fleet(project: Path, cases: int, url: str) -> float:
    with Server("--latency", str(LATENCY)) as server:
        env = plain_env(server.base_url)
        common = ["benchmark", "-q", "-p", "no:cacheprovider", "--helmbench-run-key=bench"]
        common += [f"--helmbench-db={url}", "--helmbench-concurrency=50"]
        started = time.perf_counter()
        shards = [
            subprocess.Popen(
                [sys.executable, "-m", "pytest", *common, f"--helmbench-shard={k}/3"],
                cwd=project,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for k in (1, 2, 3)
        ]
        outputs = [shard.communicate(timeout=900)[0] for shard in shards]
        wall = time.perf_counter() - started
    for shard, output in zip(shards, outputs, strict=True):
        if shard.returncode != 0:
            raise SystemExit(f"a shard failed (exit {shard.returncode}):\n{output[-3000:]}")
    runs, results, distinct, status = _fleet_rows(url)
    ideal = cases * LATENCY / 150
    stored = "every Result stored exactly once" if results == distinct == cases else "RESULTS WRONG"
    print(
        f"fleet, 3 shards x concurrency 50 into one PostgreSQL, {cases} cases at {LATENCY * 1000:.0f} ms: "
        f"wall {wall:.2f} s; ideal (one process at concurrency 150) {ideal:.2f} s -> {wall / ideal:.2f}x "
        f"(target <= {TARGET_FLEET}x) -> {verdict(wall / ideal, TARGET_FLEET)}; {runs} run ({status}), "
        f"{results} Results, {distinct} distinct cases: {stored}",
        flush=True,
    )
    return wall


def _fleet_rows(url: str) -> tuple[int, int, int, str]:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            runs = connection.execute(text("select count(*), min(status) from evaluationrun")).one()
            results = connection.execute(text("select count(*), count(distinct case_code) from result")).one()
    finally:
        engine.dispose()
    return int(runs[0]), int(results[0]), int(results[1]), str(runs[1])


def storage(folder: Path, postgres: PostgresServer, cases: int) -> None:
    from common import write_benchmark

    root = folder / "storage" / "benchmark"
    write_benchmark(root, scenarios=max(1, cases // 100))
    outcomes = make_outcomes(root, "bench/model")[:cases]
    for outcome in outcomes:
        outcome.raw_response = '{"category": "ANSWER", "response": "Mitochondria."}'
    for waiting, how in ((STORAGE_WAVE, "answers waiting"), (1, "one at a time")):
        per_case = {}
        for name, url in (
            ("SQLite", f"sqlite:///{folder / f'storage-{waiting}.db'}"),
            ("PostgreSQL", postgres.new_database("store")),
        ):
            per_case[name] = _record_all(url, outcomes, waiting)
        ratio = per_case["PostgreSQL"] / per_case["SQLite"]
        target = (
            f"(target <= {TARGET_STORAGE}x) -> {verdict(ratio, TARGET_STORAGE)}"
            if waiting > 1
            else "(for comparison)"
        )
        print(
            f"storage, {len(outcomes)} Results, {how} ({waiting} at a time): "
            f"SQLite {per_case['SQLite']:.3f} ms per case, "
            f"PostgreSQL (fsync and synchronous_commit on) {per_case['PostgreSQL']:.3f} ms per case -> "
            f"{ratio:.2f}x {target}",
            flush=True,
        )
    durable, relaxed = _commit_floor(postgres.new_database("floor"))
    print(
        f"  PostgreSQL's floor on this disk: a committed one-row INSERT from psycopg takes {durable:.3f} ms "
        f"({relaxed:.3f} ms with synchronous_commit off): the WAL flush each durable commit waits for",
        flush=True,
    )


def _commit_floor(url: str, rows: int = 2000) -> tuple[float, float]:
    """Milliseconds per autocommitted one-row INSERT, with synchronous_commit on and then off."""
    import psycopg

    figures = []
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
        conn.execute("create table floor (id serial primary key, body text)")
        for setting in ("on", "off"):
            conn.execute(f"set synchronous_commit = {setting}")
            started = time.perf_counter()
            for _ in range(rows):
                conn.execute("insert into floor (body) values (%s)", ("x" * 200,))
            figures.append((time.perf_counter() - started) * 1000 / rows)
    return figures[0], figures[1]


def _record_all(url: str, outcomes: list, waiting: int) -> float:
    """Milliseconds per Result, the recorder's own work only (migrations done before the clock), as a
    run records them: the content rows prepared up front, then each Result as its item reports it,
    with the answers already finished (`waiting` at a time: a wave of prefetched calls) as `ahead`."""
    from pytest_helmbench.storage.recorder import Recorder

    recorder = Recorder(url, "bench-session")
    try:
        started = time.perf_counter()
        recorder.prepare_content(outcome.provenance for outcome in outcomes)
        ready: deque = deque()
        for index, outcome in enumerate(outcomes):
            if index % waiting == 0:
                ready.extend(outcomes[index : index + waiting])
            ahead = [ready.popleft() for _ in range(min(len(ready), EARLY_BATCH))]
            recorder.record(outcome, {"temperature": 0}, ahead)
        elapsed = time.perf_counter() - started
        recorder.finish({"bench/model": "completed"})
    finally:
        recorder.close()
    return elapsed * 1000 / len(outcomes)


def durable_postgres() -> PostgresServer:
    """The test server, but with PostgreSQL's default durability (the tests turn fsync off); its
    folder is made with mkdtemp (a private temp folder's parent would shut the `postgres` user out)."""
    return PostgresServer(Path(tempfile.mkdtemp(prefix="helmbench-pg-")), durable=True).start()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="concurrency-50 runs (median and worst)")
    parser.add_argument("--runs-10", type=int, default=1, help="concurrency-10 runs (each ~40 s)")
    parser.add_argument("--fleet-runs", type=int, default=3, help="fleets of three shards (median and worst)")
    parser.add_argument("--storage-cases", type=int, default=20_000)
    parser.add_argument("--skip", default="", help="comma-separated: throughput, fleet, storage")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    with tempfile.TemporaryDirectory(prefix="helmbench-fleet-") as tmp:
        folder = Path(tmp)
        if "throughput" not in skip:
            throughput(folder, args.runs, args.runs_10)
        if {"fleet", "storage"} - skip:
            postgres = durable_postgres()
            try:
                if "fleet" not in skip:
                    fleet(folder, postgres, args.fleet_runs)
                if "storage" not in skip:
                    storage(folder, postgres, args.storage_cases)
            finally:
                postgres.stop()
                shutil.rmtree(postgres.folder, ignore_errors=True)


if __name__ == "__main__":
    main()
