"""Throughput: 2,000 cases against the loopback server answering each call after 200 ms.

The whole `pytest` command's wall time (median of 3, fresh database each time) against the ideal
`cases x latency / concurrency` at --helmbench-concurrency 50 (target <= 1.3x), and the same run
with `-n 2` alone (one call at a time per worker) for comparison.

    python bench/throughput.py [--cases 2000] [--latency 0.2] [--concurrency 50] [--repeats 3]
                               [--xdist-repeats 1]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from common import Server, check, helm_env, median, run_pytest, write_project

TARGET_RATIO = 1.3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2000, help="a multiple of 100")
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--xdist-repeats",
        type=int,
        default=1,
        help="-n 2 runs (each takes cases x latency / 2); 0 skips them",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="helmbench-bench-") as tmp:
        folder = Path(tmp)
        cases = write_project(folder, args.cases // 100)
        ideal = cases * args.latency / args.concurrency
        runs: list[float] = []
        xdist: list[float] = []
        with Server("--latency", str(args.latency)) as server:
            env = helm_env(server.base_url)
            for attempt in range(args.repeats):
                timed = run_pytest(
                    folder,
                    [
                        "benchmark",
                        "-q",
                        f"--helmbench-db=sqlite:///{folder / f'c{attempt}.db'}",
                        f"--helmbench-concurrency={args.concurrency}",
                    ],
                    env,
                )
                check(timed, "HELMBench run")
                runs.append(timed.seconds)
            for attempt in range(args.xdist_repeats):
                timed = run_pytest(
                    folder,
                    ["benchmark", "-q", "-n", "2", f"--helmbench-db=sqlite:///{folder / f'x{attempt}.db'}"],
                    env,
                )
                check(timed, "HELMBench run with -n 2")
                xdist.append(timed.seconds)
            requests = server.stop()
    wall = median(runs)
    latency_ms = args.latency * 1000
    print(f"cases: {cases}, server latency {latency_ms:.0f} ms per call, {requests} chat requests in all")
    verdict = "OK" if wall / ideal <= TARGET_RATIO else "MISSED"
    print(
        f"--helmbench-concurrency {args.concurrency}: median {wall:.2f} s "
        f"(runs: {', '.join(f'{t:.2f}' for t in runs)}); "
        f"ideal {ideal:.2f} s -> {wall / ideal:.2f}x (target <= {TARGET_RATIO}x) -> {verdict}"
    )
    if xdist:
        ideal_x, wall_x = cases * args.latency / 2, median(xdist)
        print(
            f"-n 2 (one call at a time per worker): median {wall_x:.2f} s "
            f"(runs: {', '.join(f'{t:.2f}' for t in xdist)}); its own ideal {ideal_x:.1f} s -> "
            f"{wall_x / ideal_x:.2f}x; {wall_x / wall:.1f}x slower than concurrency {args.concurrency}"
        )


if __name__ == "__main__":
    main()
