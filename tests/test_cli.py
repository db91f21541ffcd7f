"""The `helmbench` command: the same code and defaults as the plugin, no tracebacks on bad input."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pytest_helmbench.cli import app
from tests.benchfiles import write, write_benchmark
from tests.dbquery import query
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


def test_run_batch_costs_and_db_upgrade(project, helm_env, db_url, monkeypatch):
    monkeypatch.setenv("HELMBENCH_DB", db_url)  # SQLite and PostgreSQL, for the run and the commands
    helm_env.add_rule(reply=Reply.ok(GOOD, cost=0.002))
    result = runner.invoke(app, ["run-batch", "--scenario", "P1-B1-S1", "--", "-q", "-p", "no:cacheprovider"])
    assert result.exit_code == 0, result.output
    assert len(helm_env.chat_requests) == 8
    costs = runner.invoke(app, ["costs"])
    assert costs.exit_code == 0
    assert "openai/gpt-4o-mini" in costs.stdout and "total: $0.0160 over 1 run(s)" in costs.stdout
    assert query(db_url, "select count(*) from result") == [(8,)]
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


def test_costs_never_truncates_a_model_id(project, helm_env):
    long_id = "vendor/" + "a-very-long-model-name-" * 2 + "x" * 7  # 60 characters
    assert len(long_id) == 60
    helm_env.add_rule(reply=Reply.ok(GOOD, cost=0.001))
    args = ["run-batch", "--scenario", "P1-B1-S1", "--models", f"b/short,{long_id}", "--", "-q"]
    assert runner.invoke(app, [*args, "-p", "no:cacheprovider"]).exit_code == 0
    lines = runner.invoke(app, ["costs"]).stdout.splitlines()
    assert lines[0].split()[:3] == ["run", "model", "status"]
    rows = {line.split()[1]: line for line in lines[1:3]}
    assert set(rows) == {"b/short", long_id}
    status_at = {line.index("status") if "status" in line else line.index("completed") for line in lines[:3]}
    assert len(status_at) == 1, "\n".join(lines[:3])  # one column for every row, header included
    assert lines[-1] == "total: $0.0160 over 2 run(s)"


def test_costs_never_creates_a_database(project):
    result = runner.invoke(app, ["costs"])
    assert result.exit_code == 1 and result.output.startswith("error: no database at")
    assert len(result.output.splitlines()) == 1 and not (project / "helmbench.db").exists()


def add_cache_entries(url: str, entries: list[tuple[str, str, timedelta]]) -> None:
    """Entries (key, model, age) written as the recorder writes them."""
    from sqlmodel import Session

    from pytest_helmbench.storage.engine import make_engine
    from pytest_helmbench.storage.tables import CachedResponse

    engine = make_engine(url)
    now = datetime.now(UTC)
    with Session(engine) as session:
        for key, model, age in entries:
            session.add(CachedResponse(key=key, model_id=model, raw_response="{}", created_at=now - age))
        session.commit()
    engine.dispose()


def cache_keys(url: str) -> list[str]:
    return sorted(key for (key,) in query(url, "select key from cachedresponse"))


def test_cache_prune_by_age_and_model(project, db_url, monkeypatch):
    monkeypatch.setenv("HELMBENCH_DB", db_url)  # SQLite and PostgreSQL
    created = runner.invoke(app, ["db", "upgrade"])  # a new, empty database gets the schema
    assert created.exit_code == 0, created.output
    day = timedelta(days=1)
    add_cache_entries(
        db_url,
        [
            ("a-old", "a/m", 40 * day),
            ("a-new", "a/m", day),
            ("b-old", "b/m", 40 * day),
            ("b-new", "b/m", day),
        ],
    )
    by_age = runner.invoke(app, ["cache", "prune", "--older-than", "30d", "--model", "a/m"])
    assert by_age.exit_code == 0 and by_age.stdout.startswith("removed 1 response-cache entry (older than")
    assert cache_keys(db_url) == ["a-new", "b-new", "b-old"]
    older = runner.invoke(app, ["cache", "prune", "--older-than", "2d"])
    assert older.exit_code == 0 and older.stdout.startswith("removed 1 response-cache entry")
    assert cache_keys(db_url) == ["a-new", "b-new"]
    assert runner.invoke(app, ["cache", "prune", "--older-than", "2d"]).stdout.startswith("removed 0 ")
    everything = runner.invoke(app, ["cache", "prune"])
    assert everything.stdout.startswith(f"removed 2 response-cache entries from {db_url.split(':')[0]}:")
    assert cache_keys(db_url) == []


def test_cache_prune_by_model_keeps_other_models(project):
    assert runner.invoke(app, ["db", "upgrade"]).exit_code == 0
    add_cache_entries(
        f"sqlite:///{project / 'helmbench.db'}",
        [("a1", "a/m", timedelta(0)), ("a2", "a/m", timedelta(days=90)), ("b1", "b/m", timedelta(0))],
    )
    result = runner.invoke(app, ["cache", "prune", "--model", "a/m"])
    assert (
        result.exit_code == 0 and "removed 2 response-cache entries (of a/m) from sqlite:///" in result.stdout
    )
    assert cache_keys(f"sqlite:///{project / 'helmbench.db'}") == ["b1"]


@pytest.mark.parametrize("age", ["soon", "0", "-3d", "d"])
def test_cache_prune_rejects_a_bad_age(project, age):
    assert runner.invoke(app, ["db", "upgrade"]).exit_code == 0
    result = runner.invoke(app, ["cache", "prune", f"--older-than={age}"])
    assert result.exit_code == 1 and result.output.startswith("error: --older-than:")
    assert "Traceback" not in result.output


def test_cache_prune_never_creates_a_database(project):
    result = runner.invoke(app, ["cache", "prune", "--older-than", "30d"])
    assert result.exit_code == 1 and result.output.startswith("error: no database at")
    assert len(result.output.splitlines()) == 1 and not (project / "helmbench.db").exists()


# --- the plugin's defaults from any folder of the project --------------------------------------


def test_list_and_show_from_a_subfolder_use_the_rootdir_benchmark(project, monkeypatch):
    """It used to look for ./benchmark in the current folder: nothing to list from a subfolder."""
    deep = project / "docs" / "notes"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    result = runner.invoke(app, ["list", "--scenarios"])
    assert result.exit_code == 0, result.output
    assert [line.split("\t")[0] for line in result.stdout.splitlines()] == [
        "P1-B1-S1",
        "P1-B1-S2",
        "P1-B1-S10",
    ]
    assert runner.invoke(app, ["show", "P1-B1-S1-C1-PT1"]).exit_code == 0


def test_the_ini_helmbench_root_and_helmbench_db_are_the_cli_defaults(tmp_path, monkeypatch):
    monkeypatch.delenv("HELMBENCH_DB", raising=False)
    write(tmp_path / "pyproject.toml", '[tool.pytest.ini_options]\nhelmbench_root = "suite/bench"\n')
    write_benchmark(tmp_path / "suite" / "bench", scenarios=("P2-B1-S1",))
    (tmp_path / "src").mkdir()
    monkeypatch.chdir(tmp_path / "src")
    result = runner.invoke(app, ["list"])
    assert result.exit_code == 0, result.output
    assert result.stdout.split()[0] == "P2-B1-S1-C1-PT1"
    missing = runner.invoke(app, ["costs"])
    assert missing.exit_code == 1 and f"no database at {tmp_path / 'helmbench.db'}" in missing.output
    write(
        tmp_path / "pyproject.toml", '[tool.pytest.ini_options]\nhelmbench_db = "sqlite:////nowhere/x.db"\n'
    )
    assert "no database at /nowhere/x.db" in runner.invoke(app, ["costs"]).output
    monkeypatch.setenv("HELMBENCH_DB", "sqlite:////elsewhere/y.db")  # the environment wins, as for pytest
    assert "no database at /elsewhere/y.db" in runner.invoke(app, ["costs"]).output


def test_pytest_and_helmbench_costs_agree_from_a_subfolder(project, helm_env, monkeypatch):
    helm_env.add_rule(reply=Reply.ok(GOOD, cost=0.002))
    sub = project / "benchmark" / "scenarios"
    monkeypatch.chdir(sub)  # pytest from here still writes <rootdir>/helmbench.db
    ran = runner.invoke(app, ["run-batch", "--scenario", "P1-B1-S1", "--", "-q", "-p", "no:cacheprovider"])
    assert ran.exit_code == 0, ran.output
    assert (project / "helmbench.db").is_file() and not (sub / "helmbench.db").exists()
    costs = runner.invoke(app, ["costs"])
    assert costs.exit_code == 0 and "total: $0.0160 over 1 run(s)" in costs.stdout


LAYOUTS = {
    "pytest.ini": {"a/pytest.ini": "", "a/pyproject.toml": "[tool.pytest.ini_options]\nx = 1\n"},
    ".pytest.ini over tox.ini": {"a/tox.ini": "[pytest]\n", "a/b/.pytest.ini": "[other]\n"},
    "pyproject table": {"a/pyproject.toml": "[tool.pytest.ini_options]\nhelmbench_root = 'b'\n"},
    "pyproject native": {"a/pyproject.toml": "[tool.pytest]\nhelmbench_root = 'b'\n"},
    "tox.ini without [pytest] is skipped": {"a/tox.ini": "[tox]\n", "setup.cfg": "[tool:pytest]\n"},
    "setup.cfg": {"a/setup.cfg": "[tool:pytest]\nhelmbench_root = c\n"},
    "bare pyproject as a last resort": {"a/b/pyproject.toml": "[project]\nname = 'x'\n"},
    "bare pyproject loses to a config above": {"a/b/pyproject.toml": "", "pytest.toml": "[pytest]\n"},
    "nothing": {},
}


@pytest.mark.parametrize("layout", LAYOUTS, ids=list(LAYOUTS))
def test_find_project_finds_what_pytest_finds(tmp_path, layout):
    from _pytest.config.findpaths import determine_setup  # pytest's own search, only to compare

    from pytest_helmbench.cli.defaults import find_project

    start = tmp_path / "a" / "b" / "c"
    start.mkdir(parents=True)
    for name, text in LAYOUTS[layout].items():
        write(tmp_path / name, text)
    rootdir, inipath, inicfg, _ = determine_setup(
        inifile=None, override_ini=None, args=[], rootdir_cmd_arg=None, invocation_dir=start
    )
    found = find_project(start)
    assert found.inipath == inipath
    assert found.base_dir == (rootdir if inipath else start)  # the plugin's base folder (state.base_dir)
    assert {k: str(v) for k, v in found.ini.items()} == {
        k: str(getattr(v, "value", v)) for k, v in inicfg.items()
    }
