"""`helmbench export`: one row per Result as CSV, JSON or JSON Lines, read back with the standard library."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from sqlmodel import Session
from typer.testing import CliRunner

from pytest_helmbench import cli
from pytest_helmbench.reporting.export import COLUMNS, export
from pytest_helmbench.storage.engine import make_engine
from tests.benchfiles import write_benchmark
from tests.openrouter_server import FakeOpenRouter, Reply

GOOD = {"category": "ANSWER", "response": "Mitochondria."}
WRONG = {"category": "HANDOFF", "response": 'line one,\nline "two", <b>three</b>'}

DOCUMENTED_COLUMNS = (
    "result_id",
    "run_id",
    "run_subset",
    "model",
    "case_code",
    "pillar",
    "behaviour",
    "scenario",
    "condition",
    "user_context",
    "perturbation",
    "repeat",
    "status",
    "reason",
    "critical",
    "condition_severity",
    "user_context_severity",
    "perturbation_severity",
    "base_severity",
    "style",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "judge_cost_usd",
    "latency_ms",
    "cached",
    "attempts",
    "finish_reason",
    "layout",
    "turns",
    "first_failing_turn",
    "harm",
    "care_earned",
    "care_possible",
    "scenario_weight",
    "prompt_hash",
    "created_at",
)


_BUILT: dict[str, Path] = {}  # the recorded database, built once per test process


def copy_db(source: Path, target: Path) -> None:
    with closing(sqlite3.connect(source)) as src, closing(sqlite3.connect(target)) as dst:
        src.backup(dst)


@pytest.fixture
def recorded(
    pytester: pytest.Pytester, helm_env: FakeOpenRouter, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """Two real runs (two models): passes, failures and errors; each test gets its own copy."""
    target = pytester.path / "helmbench.db"
    if "db" in _BUILT:
        copy_db(_BUILT["db"], target)
        return target
    pytester.makeini("[pytest]\n")
    write_benchmark(pytester.path / "benchmark")
    helm_env.add_rule(model="b/two", contains="roast me", reply=Reply.error(500, "down"))
    helm_env.add_rule(contains="agian", reply=Reply.ok(WRONG, cost=0.003))
    helm_env.add_rule(reply=Reply.ok(GOOD, cost=0.001))
    result = pytester.runpytest(
        "benchmark",
        "-p",
        "no:randomly",
        "-p",
        "no:xdist",
        "--helmbench-retries=0",
        "--helmbench-model=a/one,b/two",
    )
    result.assert_outcomes(passed=6, failed=6, errors=4)
    with (
        closing(sqlite3.connect(target)) as conn,
        conn,
    ):  # a reason with a newline, quotes and commas, as judge rationales have
        conn.execute(
            "update result set reason = 'judge said: \"no\",\nthen <b>stop</b>' where id = "
            "(select min(id) from result where status = 'failed')"
        )
    _BUILT["db"] = tmp_path_factory.mktemp("recorded") / "helmbench.db"
    copy_db(target, _BUILT["db"])
    return target


def db_rows(db: Path) -> dict[int, tuple]:
    with closing(sqlite3.connect(db)) as conn:
        return {
            row[0]: row[1:]
            for row in conn.execute(
                "select r.id, r.run_id, l.model_id, r.case_code, r.status, r.reason, r.cost_usd, "
                "r.prompt_hash "
                "from result r join evaluationrun e on e.id = r.run_id join llm l on l.id = e.llm_id"
            )
        }


def exported(db: Path, fmt: str, run_ids: list[int] | None = None) -> tuple[str, int]:
    out = io.StringIO()
    with Session(make_engine(f"sqlite:///{db}")) as session:
        count = export(session, fmt, out, run_ids)  # type: ignore[arg-type]
    return out.getvalue(), count


def test_columns_are_the_documented_ones():
    assert (
        COLUMNS == DOCUMENTED_COLUMNS
    )  # as documented (docs/reference/results-api.md, test_results_frames.py)


def test_csv_round_trip(recorded):
    text, count = exported(recorded, "csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    expected = db_rows(recorded)
    assert count == len(rows) == len(expected) == 16
    assert tuple(rows[0]) == COLUMNS
    for row in rows:
        run_id, model, code, status, reason, cost, prompt_hash = expected[int(row["result_id"])]
        assert (
            int(row["run_id"]),
            row["model"],
            row["case_code"],
            row["status"],
            row["reason"],
            row["prompt_hash"],
        ) == (run_id, model, code, status, reason, prompt_hash)
        assert (float(row["cost_usd"]) if row["cost_usd"] else None) == cost
        assert row["critical"] == "False" and row["cached"] == "False" and row["repeat"] == "0"
    failed = next(r for r in rows if r["status"] == "failed")
    assert failed["reason"] == 'judge said: "no",\nthen <b>stop</b>'
    assert (
        failed["style"] == "slang"
        and failed["perturbation_severity"] == "2"
        and failed["base_severity"] == "2"
    )
    errored = next(r for r in rows if r["status"] == "error")
    assert errored["cost_usd"] == "" and errored["user_context"] == "U1" and errored["model"] == "b/two"
    baseline = next(r for r in rows if r["case_code"] == "P1-B1-S1-C1-PT1")
    assert (
        baseline["user_context"],
        baseline["user_context_severity"],
        baseline["condition_severity"],
        baseline["base_severity"],
    ) == ("", "0", "-1", "0")
    assert (
        baseline["behaviour"] == "P1-B1" and baseline["scenario"] == "P1-B1-S1" and baseline["pillar"] == "P1"
    )


def test_json_and_jsonl_round_trip(recorded):
    text, count = exported(recorded, "json")
    as_list = json.loads(text)
    lines_text, lines_count = exported(recorded, "jsonl")
    lines = [json.loads(line) for line in lines_text.splitlines()]
    assert count == lines_count == len(as_list) == len(lines) == 16
    assert as_list == lines and list(as_list[0]) == list(COLUMNS)
    expected = db_rows(recorded)
    for row in as_list:
        assert (
            row["run_id"],
            row["model"],
            row["case_code"],
            row["status"],
            row["reason"],
            row["cost_usd"],
            row["prompt_hash"],
        ) == expected[row["result_id"]]
    errored = next(r for r in as_list if r["status"] == "error")
    assert (
        errored["cost_usd"] is None and errored["critical"] is False and errored["user_context_severity"] == 1
    )
    assert all(isinstance(r["created_at"], str) and r["created_at"][:2] == "20" for r in as_list)


def test_run_selection(recorded):
    text, count = exported(recorded, "jsonl", [2])
    assert count == 8 and {json.loads(line)["model"] for line in text.splitlines()} == {"b/two"}
    empty, count = exported(recorded, "json", [])
    assert count == 0 and json.loads(empty) == []


def test_export_command(recorded, monkeypatch):
    monkeypatch.chdir(recorded.parent)
    result = CliRunner().invoke(cli.app, ["export", "--format", "csv", "--out", "rows.csv", "--run-id", "1"])
    assert result.exit_code == 0, result.output
    assert "exported 8 result row(s) as csv to rows.csv" in result.output
    with open(recorded.parent / "rows.csv", newline="", encoding="utf-8") as handle:
        assert len(list(csv.DictReader(handle))) == 8
    result = CliRunner().invoke(cli.app, ["export", "--format", "jsonl", "--db", f"sqlite:///{recorded}"])
    assert result.exit_code == 0
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(objects) == 16


@pytest.mark.parametrize(
    "args, message",
    [
        # a bad --format is click's usage error, exit 2 (tests/test_cli_conventions.py)
        (["--format", "csv", "--run-id", "5"], "error: no run with id 5 (known runs: 1-2)"),
        (["--format", "csv", "--out", "/proc/forbidden.csv"], "error: cannot write /proc/forbidden.csv"),
        (["--format", "json", "--db", "sqlite:///missing.db"], "error: no database at missing.db"),
    ],
)
def test_export_command_bad_input(recorded, monkeypatch, args, message):
    monkeypatch.chdir(recorded.parent)
    result = CliRunner().invoke(cli.app, ["export", *args])
    assert result.exit_code == 1 and result.output.startswith(message) and result.output.count("\n") == 1, (
        result.output
    )
    assert "Traceback" not in result.output and isinstance(
        result.exception, SystemExit
    )  # a clean exit, not a crash


def test_export_of_an_empty_database(tmp_path, monkeypatch):
    from pytest_helmbench.storage.engine import upgrade

    monkeypatch.chdir(tmp_path)
    upgrade(f"sqlite:///{tmp_path / 'helmbench.db'}")
    monkeypatch.delenv("HELMBENCH_DB", raising=False)
    result = CliRunner().invoke(cli.app, ["export", "--format", "csv", "--out", "x.csv"])
    assert (
        result.exit_code == 1
        and result.output == "error: the database holds no evaluation run yet (run the benchmark first)\n"
    )
    assert not (tmp_path / "x.csv").exists()
