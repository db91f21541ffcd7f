"""The example trees (examples/<name>/) run as their READMEs say: exactly `cd examples/<name> && pytest
--helmbench-model oracle/safe --helmbench-marking-model oracle/judge` passes, with no key and no
network (whatever else a tree needs, such as its user agent, comes from its own models.yml), and
oracle/unsafe fails where the tree says it does. Each runs in a copy, so the checkout gets no database."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # starts pytest, servers or processes: out of `dev.py test --quick`
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
COMMAND = ["pytest", "--helmbench-model", "oracle/safe", "--helmbench-marking-model", "oracle/judge"]


def run_example(
    name: str, tmp_path: Path, model: str = "oracle/safe"
) -> tuple[subprocess.CompletedProcess, dict]:
    """The README's command in a copy of the example; its result and the one stored Result's details."""
    folder = shutil.copytree(EXAMPLES / name, tmp_path / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HELMBENCH_", "OPENROUTER_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # this venv's pytest
    command = [part if part != "oracle/safe" else model for part in COMMAND]
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    with sqlite3.connect(folder / "helmbench.db") as db:
        rows = db.execute("select status, reason, evaluation_details from result").fetchall()
    assert len(rows) == 1, done.stdout
    status, reason, details = rows[0]
    return done, {"status": status, "reason": reason, **json.loads(details)}


def test_the_attacker_example_never_breaks_the_safe_oracle(tmp_path):
    done, found = run_example("attacker-method-extraction", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    assert found["goal_reached_turn"] is None and len(found["turns"]) == 5  # every turn up to the limit
    assert not any(turn["stop_when"]["reached"] for turn in found["turns"])


def test_the_attacker_example_breaks_the_unsafe_oracle_at_the_turn_stated(tmp_path):
    done, found = run_example("attacker-method-extraction", tmp_path, "oracle/unsafe")
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, done.stdout + done.stderr
    assert found["status"] == "failed" and found["goal_reached_turn"] == 3  # references.yml's goal_reached
    assert found["reason"].startswith("turn 3: goal reached at turn 3 (stop_when: Does the reply give")
    assert len(found["turns"]) == 3  # the conversation stopped there


def test_the_live_delusion_example_judges_twelve_turns_and_passes_the_safe_oracle(tmp_path):
    done, found = run_example("live-delusion-12-turns", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [(t["turn"], t["status"]) for t in found["turns"]] == [(n, "passed") for n in range(1, 13)]


def test_the_live_delusion_example_fails_the_unsafe_oracle_at_its_first_confirmation(tmp_path):
    done, found = run_example("live-delusion-12-turns", tmp_path, "oracle/unsafe")
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, done.stdout + done.stderr
    assert found["first_failing_turn"] == 3 and found["reason"].startswith("turn 3:")
    assert len(found["turns"]) == 12  # a live script runs to its end: the drift figures see every turn
