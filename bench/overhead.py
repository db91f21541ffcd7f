"""Per-case overhead of HELMBench: a whole run against a zero-latency loopback server, against bare
pytest (HELMBench disabled) running the same number of trivial tests. Target: <= 2 ms per case.

The two commands alternate, and the figure is the median of the paired differences: the machine's
speed drifts by tens of percent over a minute, and each pair shares its moment (the difference of
the two medians is printed too).

    python bench/overhead.py [--cases 2000] [--repeats 5] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from common import Server, check, helm_env, median, run_pytest, write_projects

TARGET_MS = 2.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2000, help="a multiple of 100")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=8, help="HELMBench's default")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="helmbench-bench-") as tmp:
        folder = Path(tmp)
        helm_dir, bare, cases = write_projects(folder, args.cases // 100)
        bare_times, helm_times = [], []
        with Server() as server:
            env = helm_env(server.base_url)
            for attempt in range(args.repeats):
                timed = run_pytest(bare, ["-q", "-p", "no:helmbench"], env)
                check(timed, "bare pytest")
                bare_times.append(timed.seconds)
                db = folder / f"run{attempt}.db"
                timed = run_pytest(
                    helm_dir,
                    [
                        "benchmark",
                        "-q",
                        f"--helmbench-db=sqlite:///{db}",
                        f"--helmbench-concurrency={args.concurrency}",
                    ],
                    env,
                )
                check(timed, "HELMBench run")
                helm_times.append(timed.seconds)
            requests = server.stop()
    bare_s, helm_s = median(bare_times), median(helm_times)
    per_case_ms = median([(h - b) for h, b in zip(helm_times, bare_times, strict=True)]) / cases * 1000.0
    of_medians_ms = (helm_s - bare_s) / cases * 1000.0
    bare_runs = ", ".join(f"{t:.2f}" for t in bare_times)
    helm_runs = ", ".join(f"{t:.2f}" for t in helm_times)
    verdict = "OK" if per_case_ms <= TARGET_MS else "MISSED"
    print(
        f"cases: {cases} (zero-latency loopback server, concurrency {args.concurrency}, "
        f"{requests} chat requests in all)"
    )
    print(f"bare pytest, {cases} trivial tests: median {bare_s:.2f} s  (runs: {bare_runs})")
    print(f"HELMBench, {cases} cases:            median {helm_s:.2f} s  (runs: {helm_runs})")
    print(
        f"overhead per case (median of the paired differences): {per_case_ms:.2f} ms "
        f"(target <= {TARGET_MS:.1f} ms) -> {verdict}  [difference of the medians: {of_medians_ms:.2f} ms]"
    )


if __name__ == "__main__":
    main()
