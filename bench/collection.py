"""Collection: `pytest --collect-only -q` of a generated 20,000-case benchmark against pytest
collecting 20,000 parametrized trivial tests (median of 5 each), with the peak memory (ru_maxrss)
of each collecting process. Target: no slower, under 400 MB.

    python bench/collection.py [--cases 20000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from common import check, helm_env, median, run_pytest, write_projects

TARGET_MB = 400.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=20000, help="a multiple of 100")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="helmbench-bench-") as tmp:
        folder = Path(tmp)
        helm_dir, bare, cases = write_projects(folder, args.cases // 100)
        env = helm_env("http://127.0.0.1:9/api/v1")  # never contacted: collection sends nothing
        plain, plain_plugin, helm = [], [], []
        for _ in range(args.repeats):
            for target, cwd, extra in (
                (plain, bare, ["-p", "no:helmbench"]),
                (plain_plugin, bare, []),
                (helm, helm_dir, ["benchmark"]),
            ):
                timed = run_pytest(cwd, ["--collect-only", "-q", *extra], env)
                check(timed, "collection")
                if f"{cases} tests collected" not in timed.tail:
                    raise SystemExit(f"expected {cases} tests collected, got: {timed.tail}")
                target.append(timed)
    for label, timings in (
        ("pytest, parametrized trivial tests (HELMBench disabled)", plain),
        ("pytest, parametrized trivial tests (HELMBench installed)", plain_plugin),
        ("HELMBench benchmark", helm),
    ):
        seconds = [t.seconds for t in timings]
        print(
            f"{label}: median {median(seconds):.2f} s (runs: {', '.join(f'{s:.2f}' for s in seconds)}), "
            f"peak memory {max(t.max_rss_mb for t in timings):.0f} MB"
        )
    ratio = median([t.seconds for t in helm]) / median([t.seconds for t in plain])
    memory = max(t.max_rss_mb for t in helm)
    speed_ok = "OK" if ratio <= 1.0 else "MISSED"
    memory_ok = "OK" if memory < TARGET_MB else "MISSED"
    print(
        f"cases: {cases}; HELMBench / plain pytest: {ratio:.2f}x (target <= 1.0x) -> {speed_ok}; "
        f"peak memory {memory:.0f} MB (target < {TARGET_MB:.0f} MB) -> {memory_ok}"
    )


if __name__ == "__main__":
    main()
