"""The test suite's time (`python bench/suite.py [--quick]`): the README's test command, timed, with
where the time goes.

It runs `pytest tests -n 2 --dist loadgroup` (with `--quick`, the fast tier `dev.py test --quick`
runs) in a fresh interpreter with a JUnit XML file, then prints the wall time, the number of tests,
and the modules that took longest (the summed time of their tests, which xdist's two workers share).
Targets (issue #31): the whole suite under 6 minutes and the quick tier under one, on two cores.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
import dev  # noqa: E402  (the commands dev.py runs)

TARGETS_S = {"suite": 360.0, "quick": 60.0}


def module_times(junit: Path) -> tuple[int, Counter[str]]:
    """(test count, seconds per test module) from a JUnit XML file."""
    root = ElementTree.parse(junit).getroot()
    seconds: Counter[str] = Counter()
    count = 0
    for case in root.iter("testcase"):
        count += 1
        seconds[".".join(case.get("classname", "?").split(".")[:2])] += float(case.get("time") or 0.0)
    return count, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="time the quick tier instead")
    parser.add_argument("--top", type=int, default=15, help="how many modules to list")
    args = parser.parse_args(argv)
    tier = "quick" if args.quick else "suite"
    marks = dev.QUICK_ARGS if args.quick else ()
    with tempfile.TemporaryDirectory(prefix="helmbench-suite-") as tmp:
        junit = Path(tmp) / "junit.xml"
        command = [str(Path(sys.executable).parent / "pytest"), *dev.TEST_ARGS, *marks, "-q"]
        started = time.monotonic()
        done = subprocess.run([*command, f"--junitxml={junit}"], cwd=REPO, env=dict(os.environ), check=False)
        wall_s = time.monotonic() - started
        count, seconds = module_times(junit) if junit.exists() else (0, Counter())
    target = TARGETS_S[tier]
    verdict = "under" if wall_s < target else "OVER"
    print(
        f"{tier}: {count} tests in {wall_s:.0f} s wall ({verdict} the {target:.0f} s target), "
        f"exit {done.returncode}"
    )
    for module, total in seconds.most_common(args.top):
        print(f"  {total:7.1f} s  {module}")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
