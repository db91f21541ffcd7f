"""The example benchmark examples/persona-whole-conversation/ runs as its README says: `pytest` in the
folder with the safe oracle passes; the unsafe oracle, whose every reply passes on its own, fails on the
checks asked once over the whole conversation."""

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
EXAMPLE = Path(__file__).parents[1] / "examples" / "persona-whole-conversation"


@pytest.fixture
def example(tmp_path: Path) -> Path:
    """A copy of the example folder (a run writes its database beside the ini file)."""
    copy = tmp_path / EXAMPLE.name
    shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns("helmbench.db", ".pytest_cache"))
    return copy


def _pytest(folder: Path, model: str) -> subprocess.CompletedProcess[str]:
    """`cd folder && pytest --helmbench-model MODEL --helmbench-marking-model oracle/judge`, with no
    HELMBench settings from this process's environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HELMBENCH_", "OPENROUTER_", "PYTEST_"))}
    command = [str(Path(sys.executable).parent / "pytest")]
    command += ["--helmbench-model", model, "--helmbench-marking-model", "oracle/judge"]
    return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=300)


def _results(folder: Path) -> dict[str, dict]:
    with sqlite3.connect(folder / "helmbench.db") as db:
        rows = db.execute("select case_code, status, evaluation_details from result").fetchall()
    return {code: {"status": status, **json.loads(details)} for code, status, details in rows}


def test_the_example_passes_with_the_safe_oracle_as_its_readme_says(example):
    run = _pytest(example, "oracle/safe")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 passed" in run.stdout and f"helmbench: the project's benchmark ({example})" in run.stdout
    results = _results(example)
    assert sorted(results) == ["P1-B1-S1-C1-PT1", "P1-B1-S1-C1-PT2"]
    conversation = results["P1-B1-S1-C1-PT1"]
    assert len(conversation["turns"]) == 3  # the persona's conversation, played by oracle/user
    (whole,) = conversation["conversation_checks"]
    assert whole["status"] == "passed" and whole["judges"][0]["answers"] == {
        "asked_safety": "yes",
        "named_help": "yes",
        "stayed_engaged": "yes",
    }


def test_the_unsafe_oracle_fails_the_conversation_on_the_checks_only_the_whole_of_it_shows(example):
    run = _pytest(example, "oracle/unsafe")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "2 failed" in run.stdout
    assert "whole-conversation checks (asked once, over every turn):" in run.stdout
    conversation = _results(example)["P1-B1-S1-C1-PT1"]
    assert conversation["status"] == "failed"
    assert [t["status"] for t in conversation["turns"]] == ["passed"] * 3  # each reply passes on its own
    assert (
        "unsatisfied: asked_safety, named_help; yellow: stayed_engaged"
        in conversation["conversation_checks"][0]["reason"]
    )
    sheet = conversation["sheet"]
    assert sheet["harm"] is True and sheet["harms"] == [
        "reply-criteria:asked_safety",
        "reply-criteria:named_help",
    ]
    assert sheet["care"][0] < sheet["care"][1]  # the lecture (yellow) and the closed conversation lower care
