"""The `helmbench` command behaves as a command-line tool is expected to (issue #15, CLI): --version,
shell completion, --format as a choice, read-only commands that never create a database, and
`list` counting only the scenarios it lists."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib.metadata import version
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
    """A project whose S1 shares its prefix with S10, S11 and S12; no database and no HELMBENCH_DB."""
    monkeypatch.delenv("HELMBENCH_DB", raising=False)
    write(tmp_path / "pytest.ini", "[pytest]\n")
    write_benchmark(tmp_path / "benchmark", scenarios=("P1-B1-S1", "P1-B1-S10", "P1-B1-S11", "P1-B1-S12"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def files_in(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if "benchmark" not in p.parts}


def plain(text: str) -> str:
    """Typer's usage error without rich's colours and box (they depend on the environment), one line."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", re.sub(r"\x1b\[[0-9;]*m", "", text)).split())


def test_version_prints_the_installed_distribution_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout == f"helmbench {version('pytest-helmbench')}\n"


@pytest.mark.parametrize(
    ("shell", "marker"),
    [("bash", "complete -o default -F _helmbench_completion helmbench"), ("zsh", "#compdef helmbench")],
)
def test_show_completion_prints_the_script_of_the_given_shell(monkeypatch, shell, marker):
    # Typer takes the shell from its argument only when it does not detect the surrounding one.
    monkeypatch.setenv("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION", "1")
    result = runner.invoke(app, ["--show-completion", shell], prog_name="helmbench")
    assert result.exit_code == 0, result.output
    assert marker in result.stdout and "_HELMBENCH_COMPLETE" in result.stdout


def complete(words: str) -> list[str]:
    """What bash completion offers after `words` (Typer's protocol, as the installed script calls it)."""
    env = {
        "_HELMBENCH_COMPLETE": "complete_bash",
        "COMP_WORDS": words,
        "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1)),
    }
    result = runner.invoke(app, [], prog_name="helmbench", env=env)
    assert result.exit_code == 0, result.output
    return result.stdout.split()


def test_completion_offers_commands_and_format_choices():
    assert complete("helmbench co") == ["coverage", "costs", "compare"]
    assert {"list", "report", "export", "db", "cache"} <= set(complete("helmbench "))
    assert complete("helmbench export --format ") == ["csv", "json", "jsonl", "parquet", "inspect"]
    assert complete("helmbench db ") == ["upgrade", "stamp"]


def test_the_command_line_loads_no_database_library():
    """Shell completion runs the program on every TAB: sqlalchemy and friends load only when used."""
    code = (
        "import sys, pytest_helmbench.cli\n"
        "print(sorted(m for m in ('sqlalchemy', 'sqlmodel', 'alembic', 'httpx', 'jsonschema') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_command_line_loads_neither_pytest_nor_the_benchmark_loader():
    """Issue #27 (`helmbench serve` starts in under 2 s): every command's start imports the command
    table only; pytest, the plugin's phases and the benchmark's loader come with the commands using them."""
    code = (
        "import sys, pytest_helmbench.cli\n"
        "print(sorted(m for m in ('pytest', '_pytest', 'pytest_helmbench.plugin.collect', "
        "'pytest_helmbench.plugin.state', 'pytest_helmbench.suite.loader', "
        "'pytest_helmbench.evaluation.builtin', 'importlib.metadata') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_export_format_is_a_choice(project):
    from pytest_helmbench.cli.results import ExportFormat
    from pytest_helmbench.reporting.export import FORMATS

    assert tuple(f.value for f in ExportFormat) == FORMATS
    bad = runner.invoke(app, ["export", "--format", "xml"])
    assert bad.exit_code == 2 and bad.stdout == "" and "Traceback" not in bad.output
    message = plain(bad.output)
    assert (
        "Invalid value for '--format'" in message
        and "'xml' is not one of 'csv', 'json', 'jsonl', 'parquet', 'inspect'" in message
    )
    upper = runner.invoke(app, ["export", "--format", "CSV"])  # accepted; then: no database here
    assert upper.exit_code == 1 and upper.output.startswith("error: no database at")


READ_ONLY = {
    "costs": ["costs"],
    "costs --run-id": ["costs", "--run-id", "3"],
    "report": ["report"],
    "report --run-id": ["report", "--run-id", "3"],
    "export": ["export", "--format", "json", "--out", "rows.json"],
    "export parquet": ["export", "--format", "parquet", "--out", "rows.parquet"],
    "export inspect": ["export", "--format", "inspect", "--out", "logs"],
    "cache prune": ["cache", "prune"],
    "rescore": ["rescore"],
    "db stamp": ["db", "stamp"],
}


@pytest.mark.parametrize("args", READ_ONLY.values(), ids=list(READ_ONLY))
@pytest.mark.parametrize("where", ["default", "--db"])
def test_read_only_commands_never_create_a_database(project, args, where):
    extra = ["--db", f"sqlite:///{project / 'new' / 'x.db'}"] if where == "--db" else []
    before = files_in(project)
    result = runner.invoke(app, [*args, *extra])
    assert result.exit_code == 1 and "Traceback" not in result.output
    missing = project / "new" / "x.db" if extra else project / "helmbench.db"
    assert f"no database at {missing}" in result.output
    assert files_in(project) == before  # no database, no folder for it, no report, no export


def test_only_db_upgrade_creates_the_database(project):
    assert runner.invoke(app, ["list"]).exit_code == 0 and not (project / "helmbench.db").exists()
    assert runner.invoke(app, ["db", "upgrade"]).exit_code == 0 and (project / "helmbench.db").is_file()


def test_costs_of_an_unknown_run_id_is_an_error_naming_it(project, helm_env):
    helm_env.add_rule(reply=Reply.ok(GOOD, cost=0.001))
    ran = runner.invoke(app, ["run-batch", "--scenario", "P1-B1-S1", "--", "-q", "-p", "no:cacheprovider"])
    assert ran.exit_code == 0, ran.output
    assert runner.invoke(app, ["costs", "--run-id", "1"]).exit_code == 0
    unknown = runner.invoke(app, ["costs", "--run-id", "42"])
    assert unknown.exit_code == 1 and unknown.output.startswith("error: no run 42 in sqlite:///")
    other = runner.invoke(app, ["costs", "--run-id", "1", "--model", "nobody/model"])
    assert other.exit_code == 1 and "no run 1 in" in other.output and "of model nobody/model" in other.output
    no_model = runner.invoke(app, ["costs", "--model", "nobody/model"])  # a filter, not an id: not an error
    assert no_model.exit_code == 0 and no_model.stdout.startswith("no runs in")


def test_list_counts_only_the_scenarios_it_lists(project):
    """`list P1-B1-S1` said "8 cases in 4 scenarios": it counted every scenario that loaded."""
    one = runner.invoke(app, ["list", "P1-B1-S1"])
    assert one.exit_code == 0
    assert len(one.stdout.split()) == 8 and all(c.startswith("P1-B1-S1-") for c in one.stdout.split())
    assert one.stderr == "8 cases in 1 of 4 scenarios (matching P1-B1-S1)\n"
    scenarios = runner.invoke(app, ["list", "P1-B1-S1", "--scenarios"])
    assert [line.split("\t")[0] for line in scenarios.stdout.splitlines()] == ["P1-B1-S1"]
    assert scenarios.stderr == one.stderr
    assert runner.invoke(app, ["list", "P1-B1-S1,P1-B1-S12"]).stderr.startswith(
        "16 cases in 2 of 4 scenarios"
    )
    assert runner.invoke(app, ["list", "P1-B1-S1-C2-U1"]).stderr.startswith("2 cases in 1 of 4 scenarios")
    assert runner.invoke(app, ["list", "P1-B1-S9"]).stderr.startswith("0 cases in 0 of 4 scenarios")
    assert runner.invoke(app, ["list"]).stderr == "32 cases in 4 scenarios\n"
