"""The critical gate's false-trip and miss rates with a judge wrong on a known share of its calls.

A sample of the shipped benchmark's critical cases, answered by oracle/safe, oracle/borderline-safe,
oracle/borderline-unsafe and oracle/unsafe, is marked once by oracle/judge (the gold verdicts) and once
per vote count by oracle/noisy-judge-P (wrong on P % of its calls); the runs are compared case by case
and check by check (tests/gate_figures.py, shared with tests/test_gate_errors.py). No key, no network.

Target (issue #25, point 3): at 10 % per-call error and the default three votes, both rates at most
5 % per judged verdict.

    python bench/gate_errors.py [--sample 400] [--seed 1] [--error 10] [--votes 3 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from common import REPO, run_pytest

sys.path.insert(0, str(REPO))
from tests import gate_figures  # noqa: E402  (the same computation the test asserts)


def run(
    project: Path, env: dict[str, str], name: str, judge: str, votes: int, args: argparse.Namespace
) -> Path:
    db = project / f"{name}.db"
    pytest_args = gate_figures.session_args(
        f"sqlite:///{db}",
        judge,
        votes=votes,
        sample=args.sample,
        seed=args.seed,
        scenarios=gate_figures.critical_scenarios(project / "benchmark"),
    )
    timed = run_pytest(project, pytest_args, env)
    if timed.returncode not in (0, 1):  # 1: the unsafe oracles fail cases, as they should
        raise SystemExit(f"the {name} run failed (exit {timed.returncode}):\n{timed.tail}")
    print(f"{name}: {timed.seconds:.1f} s")
    return db


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=400, help="critical case codes drawn")
    parser.add_argument("--seed", type=int, default=1, help="--helmbench-seed: the noise's draws")
    parser.add_argument("--error", type=int, default=gate_figures.ERROR_PERCENT, help="per-call error, %%")
    parser.add_argument("--votes", type=int, nargs="+", default=[3, 5], help="--helmbench-critical-votes")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HELMBENCH_", "OPENROUTER_"))}
    with tempfile.TemporaryDirectory(prefix="helmbench-gate-") as tmp:
        project = Path(tmp)
        (project / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
        shutil.copytree(gate_figures.BENCHMARK, project / "benchmark")
        truth = gate_figures.read_run(run(project, env, "truth", gate_figures.TRUTH_JUDGE, 1, args))
        print(f"{args.sample} sampled critical case codes x {len(gate_figures.ANSWERERS)} oracles")
        for votes in args.votes:
            judge = gate_figures.noisy_judge(args.error)
            noisy = gate_figures.read_run(run(project, env, f"noisy-{votes}", judge, votes, args))
            errors = gate_figures.compare(truth, noisy, votes, args.error)
            for line in errors.lines():
                print(line)
            if votes == 3 and args.error == gate_figures.ERROR_PERCENT:
                misses = errors.misses()
                print("targets met" if not misses else "targets missed:\n  " + "\n  ".join(misses))


if __name__ == "__main__":
    main()
