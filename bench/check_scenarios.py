"""Run the answer oracles over some scenarios' cases, both layouts, marked by `oracle/judge`: the quick
check a benchmark author runs after writing or editing a scenario (the full figures are oracles.py).

Expected: oracle/safe and oracle/borderline-safe pass every case; oracle/unsafe, oracle/borderline-unsafe
and oracle/label-gamer fail every case, and none of them has an ERROR (oracle/refuse-all is shown only).

    python bench/check_scenarios.py P1-B1-S5 P2-B1-S6 [--conditions C2]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ORACLES = ("safe", "borderline-safe", "borderline-unsafe", "unsafe", "label-gamer", "refuse-all")
LINE = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED)\s+\S*::(\S+)\[(oracle/[\w-]+)(?:,[\w,]+)?\]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("codes", nargs="+", help="scenario codes, e.g. P1-B1-S5")
    parser.add_argument("--conditions", default="C2", help="conditions to run (comma-separated; 'all')")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HELMBENCH_", "OPENROUTER_"))}
    scenarios = " or ".join(args.codes)
    conditions = "" if args.conditions == "all" else " or ".join(f"-{c}-" for c in args.conditions.split(","))
    keyword = f"({scenarios})" + (f" and ({conditions})" if conditions else "")
    with tempfile.TemporaryDirectory(prefix="helmbench-check-") as tmp:
        project = Path(tmp)
        (project / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
        subprocess.run(["cp", "-r", str(REPO / "benchmark"), str(project / "benchmark")], check=True)
        command = [
            sys.executable, "-m", "pytest", "benchmark",
            "--helmbench-model=" + ",".join(f"oracle/{o}" for o in ORACLES),
            "--helmbench-marking-model=oracle/judge",
            "--helmbench-user-model=oracle/user",
            "--helmbench-layout=seed,deployed",
            f"--helmbench-db=sqlite:///{project / 'check.db'}",
            "--helmbench-cache=off", "-p", "no:cacheprovider", "-q", "--no-header", "-rA", "--tb=no",
            "-k", keyword,
        ]  # fmt: skip
        done = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)
    tally: dict[str, Counter[str]] = defaultdict(Counter)
    wrong: list[str] = []
    for line in done.stdout.splitlines():
        match = LINE.match(line)
        if not match:
            continue
        status, case, oracle = match.groups()
        tally[oracle][status] += 1
        should_pass = oracle in ("oracle/safe", "oracle/borderline-safe")
        if oracle == "oracle/refuse-all":  # shown, not expected of (its deployed refusals have no labels)
            continue
        if status == "ERROR" or (status == "PASSED") != should_pass:
            wrong.append(line)
    if not tally:
        print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
        raise SystemExit("no case ran: check the codes (and the output above)")
    for oracle in ORACLES:
        counts = tally.get(f"oracle/{oracle}", Counter())
        print(f"oracle/{oracle:18} " + ", ".join(f"{k.lower()} {v}" for k, v in sorted(counts.items())))
    if wrong:
        print(f"\n{len(wrong)} unexpected outcome(s):")
        print("\n".join(wrong[:40]))
        print("\n(see the reasons: rerun with pytest -rA --tb=short on one case id)")
        raise SystemExit(1)
    print("\nas expected")


if __name__ == "__main__":
    main()
