"""The `helmbench` command: the same code and defaults as the plugin, no tracebacks on bad input."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pytest_helmbench.cli import app
from tests.benchfiles import write, write_benchmark
from tests.openrouter_server import Reply

runner = CliRunner()
GOOD = {"category": "ANSWER", "response": "Mitochondria."}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with a pytest config and a small benchmark; the current folder for the command."""
    write(tmp_path / "pytest.ini", "[pytest]\n")
    write_benchmark(tmp_path / "benchmark", scenarios=("P1-B1-S1", "P1-B1-S2", "P1-B1-S10"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_list_prints_codes_and_filters_by_segment(project):
    result = runner.invoke(app, ["list", "P1-B1-S1"])
    assert result.exit_code == 0
    codes = result.stdout.split()
    assert codes[:2] == ["P1-B1-S1-C1-PT1", "P1-B1-S1-C1-PT2"] and len(codes) == 8
    assert not any(code.startswith("P1-B1-S10") for code in codes)
    scenarios = runner.invoke(app, ["list", "--scenarios"]).stdout.splitlines()
    assert [line.split("\t")[0] for line in scenarios] == ["P1-B1-S1", "P1-B1-S2", "P1-B1-S10"]
    assert "8 cases" in scenarios[0]


def test_list_reports_load_errors_without_traceback(project):
    write(project / "benchmark/scenarios/P1-B1-S2/S2.json", "{not json")
    result = runner.invoke(app, ["list"])
    assert result.exit_code == 1
    assert "S2.json:1: invalid JSON" in result.output and "Traceback" not in result.output


def test_show_prints_the_exact_prompt_and_schema(project):
    result = runner.invoke(app, ["show", "P1-B1-S1-C2-U1-PT2"])
    assert result.exit_code == 0
    assert "<system_instructions>\nYou answer in one short sentence.\n</system_instructions>" in result.stdout
    assert "<user_preferences>" in result.stdout and '"strict": true' in result.stdout
    bad = runner.invoke(app, ["show", "P1-B1-S1-C9-PT1"])
    assert bad.exit_code == 1 and "is not a case of P1-B1-S1" in bad.output


def test_run_batch_costs_and_db_upgrade(project, helm_env):
    helm_env.add_rule(reply=Reply.ok(GOOD, cost=0.002))
    result = runner.invoke(app, ["run-batch", "--scenario", "P1-B1-S1", "--", "-q", "-p", "no:cacheprovider"])
    assert result.exit_code == 0, result.output
    assert len(helm_env.chat_requests) == 8
    costs = runner.invoke(app, ["costs"])
    assert costs.exit_code == 0
    assert "openai/gpt-4o-mini" in costs.stdout and "total: $0.0160 over 1 run(s)" in costs.stdout
    with sqlite3.connect(project / "helmbench.db") as conn:
        assert conn.execute("select count(*) from result").fetchone() == (8,)
    assert runner.invoke(app, ["costs", "--model", "nope/model"]).stdout.startswith("no runs")
    upgraded = runner.invoke(app, ["db", "upgrade"])
    assert upgraded.exit_code == 0 and "latest schema" in upgraded.stdout


def test_run_single_and_run_all(project, helm_env):
    helm_env.add_rule(reply=Reply.ok(GOOD))
    single = runner.invoke(
        app,
        [
            "run-single",
            "--case",
            "P1-B1-S2-C1-PT2",
            "--models",
            "a/one,b/two",
            "--",
            "-p",
            "no:cacheprovider",
        ],
    )
    assert single.exit_code == 0, single.output
    assert sorted(r.model for r in helm_env.chat_requests) == ["a/one", "b/two"]
    helm_env.reset()
    helm_env.add_rule(reply=Reply.ok(GOOD))
    everything = runner.invoke(app, ["run-all", "--", "-p", "no:cacheprovider", "--helmbench-cache=off"])
    assert everything.exit_code == 0 and "3 scenarios load" in everything.stdout
    assert len(helm_env.chat_requests) == 24


def test_bad_database_url_is_one_line(project):
    result = runner.invoke(app, ["costs", "--db", "nosuchdriver://x"])
    assert result.exit_code == 1 and "Traceback" not in result.output and "error:" in result.output
