"""Someone who only ran `pip install pytest-helmbench`: the benchmark ships in the wheel, an explicit
option runs it where the project has none, a bare `pytest` stays inert, `helmbench init` copies it out,
and a session that runs no case says why.

The rule's tests replace the installed benchmark with a small one (`installed` fixture); the last test
builds the real sdist and wheel and runs the installed package in a fresh virtual environment.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pytest_helmbench import benchmark_root
from pytest_helmbench.benchmark_root import BenchmarkRoot, resolve_root
from pytest_helmbench.cli import app
from pytest_helmbench.cli import init as cli_init
from tests.benchfiles import write, write_benchmark

pytestmark = pytest.mark.e2e  # starts pytest, servers or processes: out of `dev.py test --quick`

REPO = Path(__file__).resolve().parent.parent
runner = CliRunner()


@pytest.fixture
def installed(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A small benchmark standing in for the one installed with the package (8 cases)."""
    root = write_benchmark(tmp_path_factory.mktemp("site") / "pytest_helmbench" / "benchmark").resolve()
    monkeypatch.setattr(benchmark_root, "installed_benchmark", lambda: root)
    return root


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", *args)


# --- the rule --------------------------------------------------------------------------------------


def test_the_rule_ini_root_then_project_benchmark_then_installed_when_asked(tmp_path, installed):
    assert resolve_root(tmp_path, "", explicit=True) == BenchmarkRoot(installed, installed=True)
    assert resolve_root(tmp_path, "", explicit=False) == BenchmarkRoot(tmp_path / "benchmark")  # inert
    assert resolve_root(tmp_path, "mine", explicit=True) == BenchmarkRoot(tmp_path / "mine")  # ini wins
    (tmp_path / "benchmark").mkdir()
    assert resolve_root(tmp_path, "", explicit=True) == BenchmarkRoot(tmp_path / "benchmark")


def test_the_checkout_is_the_installed_benchmark_of_an_editable_install():
    assert benchmark_root.installed_benchmark() == (REPO / "benchmark").resolve()


def test_the_cli_uses_the_same_rule(tmp_path, installed, monkeypatch):
    write(tmp_path / "pytest.ini", "[pytest]\n")
    monkeypatch.chdir(tmp_path)
    listed = runner.invoke(app, ["list", "--scenarios"])
    assert listed.exit_code == 0, listed.output
    assert listed.stdout.startswith("P1-B1-S1\t8 cases")
    write(tmp_path / "pytest.ini", "[pytest]\nhelmbench_root = elsewhere\n")  # ini still wins
    missing = runner.invoke(app, ["list"])
    assert missing.exit_code == 1 and "elsewhere: no scenarios/ folder here" in missing.output


# --- the plugin ------------------------------------------------------------------------------------


def test_an_explicit_option_alone_runs_the_installed_benchmark(pytester, installed):
    result = run(pytester, "--helmbench-dry-run")
    result.assert_outcomes(skipped=8)
    result.stdout.fnmatch_lines(
        [f"helmbench: the installed benchmark ({installed};*", "*dry run: 8 case(s)*"]
    )
    assert not (pytester.path / "helmbench.db").exists()


def test_xdist_workers_collect_the_installed_benchmark_too(pytester):
    """Each worker resolves the same benchmark (here the editable checkout's, the real installed one)."""
    result = run(pytester, "-n", "2", "--helmbench-dry-run", "--helmbench-select=P1-B1-S1-C1-U0")
    outcomes = result.parseoutcomes()
    assert outcomes.get("skipped", 0) > 0 and set(outcomes) <= {"skipped", "deselected", "warnings"}, outcomes
    result.stdout.fnmatch_lines(
        [f"helmbench: the installed benchmark ({REPO / 'benchmark'};*", "*dry run: *"]
    )


def test_a_bare_pytest_stays_inert_and_says_what_to_do(pytester, installed):
    result = run(pytester)
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    out = result.stdout.str()
    assert "helmbench:" not in out and "HELMBench summary" not in out
    result.stdout.fnmatch_lines(
        ["HELMBench: no benchmark here (*benchmark does not exist): `pytest --helmbench-dry-run` checks*"]
    )


def test_an_option_from_addopts_is_not_asking(pytester, installed):
    """A project that sets --helmbench-db once in addopts keeps running its own tests only."""
    pytester.makeini("[pytest]\naddopts = --helmbench-db=sqlite:///elsewhere.db\n")
    pytester.makepyfile(test_plain="def test_ok():\n    assert True\n")
    result = run(pytester)
    result.assert_outcomes(passed=1)
    assert "HELMBench" not in result.stdout.str() and "helmbench:" not in result.stdout.str()


def test_the_projects_benchmark_and_the_ini_root_win_over_the_installed_one(pytester, installed):
    pytester.makeini("[pytest]\nhelmbench_root = mine\n")
    write_benchmark(pytester.path / "mine", scenarios=("P1-B1-S1", "P1-B1-S2"))
    result = run(pytester, "--helmbench-dry-run")
    result.assert_outcomes(skipped=16)
    result.stdout.fnmatch_lines([f"helmbench: the project's benchmark ({pytester.path / 'mine'})"])
    pytester.makeini("[pytest]\n")
    write_benchmark(pytester.path / "benchmark", scenarios=("P1-B1-S3",))
    project = run(pytester, "--helmbench-dry-run", "benchmark")
    project.assert_outcomes(skipped=8)
    project.stdout.fnmatch_lines(["helmbench: the project's benchmark (*benchmark)", "*P1-B1-S3*"])


def test_the_installed_copy_is_read_through_the_confined_reader(pytester, installed, tmp_path):
    secret = write(tmp_path / "outside.md", "# PT1\n\nnot benchmark content\n")
    target = installed / "scenarios" / "P1-B1-S1" / "perturbations.md"
    target.unlink()
    target.symlink_to(secret)
    result = run(pytester, "--helmbench-dry-run")
    out = result.stdout.str()
    assert "leads outside the benchmark root" in out and "not benchmark content" not in out
    assert result.ret != pytest.ExitCode.OK


# --- a session that runs no case says why ----------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "args", "line"),
    [
        ("benchmark", [], "HELMBench: no benchmark at */benchmark (no scenarios/ folder): `helmbench init`*"),
        ("benchmark/scenarios", [], "HELMBench: */benchmark/scenarios holds no scenario (P<n>-B<n>-S<n>*"),
        (
            "other",
            ["other"],
            "HELMBench: the paths given hold no scenario of *: give that folder, or no path",
        ),
    ],
    ids=["empty-folder", "empty-scenarios", "paths-elsewhere"],
)
def test_an_empty_benchmark_never_ends_with_a_bare_no_tests_ran(pytester, installed, make, args, line):
    pytester.makeini("[pytest]\n")
    (pytester.path / make).mkdir(parents=True)
    if make == "other":
        write_benchmark(pytester.path / "benchmark")
    result = run(pytester, "--helmbench-dry-run", *args)
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines([line])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_a_selection_matching_nothing_says_so(pytester, installed):
    result = run(pytester, "--helmbench-dry-run", "--helmbench-select=P9")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(["HELMBench: every collected case of * was deselected (-k, -m, *"])


# --- helmbench init --------------------------------------------------------------------------------


def test_init_copies_the_installed_benchmark_and_says_how_to_run_it(tmp_path, installed, monkeypatch):
    write(tmp_path / "pytest.ini", "[pytest]\n")
    monkeypatch.chdir(tmp_path)
    done = runner.invoke(app, ["init"])
    assert done.exit_code == 0, done.output
    assert sorted(
        p.relative_to(tmp_path / "benchmark") for p in (tmp_path / "benchmark").rglob("*")
    ) == sorted(p.relative_to(installed) for p in installed.rglob("*"))
    assert f"(1 scenarios, 7 files) from {installed} to {tmp_path / 'benchmark'}" in done.stdout
    assert "pytest benchmark --helmbench-dry-run" in done.stdout
    assert "helmbench_root" not in done.stdout  # benchmark/ is where the plugin looks
    other = runner.invoke(app, ["init", "suites/mine"])
    assert other.exit_code == 0, other.output
    assert f"set `helmbench_root = suites/mine` in {tmp_path / 'pytest.ini'}" in other.stdout


@pytest.mark.parametrize("existing", ["folder", "file"])
def test_init_never_overwrites(tmp_path, installed, monkeypatch, existing):
    monkeypatch.chdir(tmp_path)
    if existing == "folder":
        write(tmp_path / "benchmark" / "models.yml", "models: [mine]\n")
    else:
        write(tmp_path / "benchmark", "a file\n")
    refused = runner.invoke(app, ["init"])
    assert refused.exit_code == 1
    assert "nothing was copied" in refused.output and "Traceback" not in refused.output
    if existing == "folder":
        assert (tmp_path / "benchmark" / "models.yml").read_text() == "models: [mine]\n"
        assert not (tmp_path / "benchmark" / "scenarios").exists()


def test_init_into_an_empty_folder_is_fine(tmp_path, installed):
    (tmp_path / "empty").mkdir()
    copied = cli_init.copy_benchmark(tmp_path / "empty")
    assert copied.scenarios == 1 and (tmp_path / "empty" / "scenarios" / "P1-B1-S1" / "S1.md").is_file()


# --- the built distributions, installed in a fresh virtual environment ----------------------------

SDIST_NEEDS = (
    "LICENSE",
    "README.md",
    "pyproject.toml",
    "conftest.py",
    "tests/conftest.py",
    "tests/benchfiles.py",
    "tests/openrouter_server.py",
    "tests/test_packaging.py",
    "tests/docpages.py",
    "docs/index.md",
    "mkdocs.yml",
    "benchmark/benchmark.yml",
    "benchmark/models.yml",
    "benchmark/scenarios/P1-B1-S1/S1.md",
    "migrations/env.py",
    "migrations/versions/0001_initial_schema.py",
    "pytest_helmbench/plugin/__init__.py",
    "pytest_helmbench/cli/__init__.py",
    "pytest_helmbench/reporting/templates/report.html",
    "bench/throughput.py",
)
COPY_IGNORE = (
    ".venv",
    ".git",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    "*.db",
    ".pytest_cache",
    "htmlcov",
)


def _build(tmp_path: Path) -> tuple[Path, Path]:
    """sdist from a copy of the checkout, then the wheel from the unpacked sdist (as `python -m build`
    does), both with this environment's setuptools: no build isolation, so no index is reached."""
    import shutil

    source = tmp_path / "checkout"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(*COPY_IGNORE))
    dist = tmp_path / "dist"
    backend = (
        "from setuptools import build_meta as b; import sys; print(getattr(b, sys.argv[1])(sys.argv[2]))"
    )
    name = _python(backend, "build_sdist", str(dist), cwd=source).splitlines()[-1]
    sdist = dist / name
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp_path / "unpacked", filter="data")
    unpacked = tmp_path / "unpacked" / name.removesuffix(".tar.gz")
    wheel = dist / _python(backend, "build_wheel", str(dist), cwd=unpacked).splitlines()[-1]
    return sdist, wheel


def _python(code: str, *args: str, cwd: Path) -> str:
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip()


def _fresh_venv(tmp_path: Path, wheel: Path) -> Path:
    """A venv outside the repository with only the wheel installed in it (no index, no dependencies);
    the dependencies come from this environment through a .pth file, which `site` appends *after*
    the venv's own site-packages (and a path named in a .pth has its own .pth files ignored, so the
    editable install's finder in this environment is never installed there)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index"]
    subprocess.run([*pip, str(wheel)], check=True, capture_output=True)
    site = Path(_run_text([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]))
    (site / "zz_helmbench_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv


def _run_text(command: list[str], cwd: Path | None = None) -> str:
    return subprocess.run(
        command, check=True, capture_output=True, text=True, cwd=cwd, env=_env()
    ).stdout.strip()


def _env() -> dict[str, str]:
    """No PYTHONPATH, key or HELMBENCH_* setting leaks in from the outer session."""
    keep = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("HELMBENCH_")}
    return keep | {"PYTEST_ADDOPTS": "-p no:randomly", "OPENROUTER_API_KEY": ""}


def test_the_built_distributions_install_and_run_the_shipped_benchmark(tmp_path):
    sdist, wheel = _build(tmp_path)
    with tarfile.open(sdist) as archive:
        in_sdist = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert [name for name in SDIST_NEEDS if name not in in_sdist] == []
    assert not [name for name in in_sdist if name.endswith((".pyc", ".db")) or "__pycache__" in name]

    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {
        f"pytest_helmbench/benchmark/{p.relative_to(REPO / 'benchmark').as_posix()}"
        for p in (REPO / "benchmark").rglob("*")
        if p.is_file()
    }
    assert shipped and shipped - names == set()  # every benchmark file is package data in the wheel
    assert "pytest_helmbench/migrations/env.py" in names
    for package in ("plugin", "cli"):  # the pytest11 entry point's and the command's packages
        assert f"pytest_helmbench/{package}/__init__.py" in names
    assert "pytest_helmbench/migrations/versions/0001_initial_schema.py" in names
    # the report page's package data, and the JSON report's schema (its contract)
    for template in ("report.html", "report.css", "report.js", "report-v3.schema.json"):
        assert f"pytest_helmbench/reporting/templates/{template}" in names
    entry_points = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt")))
    assert b"helmbench = pytest_helmbench.plugin" in entry_points
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/METADATA")))
    assert b"License-Expression: MIT" in metadata
    license_text = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("licenses/LICENSE")))
    assert b"MIT License" in license_text and b"HELMBench contributors" in license_text

    venv = _fresh_venv(tmp_path, wheel)
    python, site = venv / "bin" / "python", venv / "lib"
    imported = _run_text([str(python), "-c", "import pytest_helmbench as p; print(p.__file__)"], cwd=tmp_path)
    assert imported.startswith(str(site)), imported  # the wheel's copy, not the editable checkout

    empty = tmp_path / "empty"
    empty.mkdir()
    dry = subprocess.run(
        [
            str(python),
            "-m",
            "pytest",
            "--helmbench-dry-run",
            "--helmbench-select=P1-B1-S1",
            "-p",
            "no:cacheprovider",
        ],
        cwd=empty,
        capture_output=True,
        text=True,
        env=_env(),
    )
    assert dry.returncode == 0, dry.stdout + dry.stderr
    installed = f"helmbench: the installed benchmark ({site}"
    assert installed in dry.stdout and "pytest_helmbench/benchmark;" in dry.stdout, dry.stdout
    assert "dry run: " in dry.stdout and " case(s) composed and validated" in dry.stdout
    assert " skipped in " in dry.stdout.splitlines()[-1] and "failed" not in dry.stdout.splitlines()[-1]

    bare = subprocess.run(
        [str(python), "-m", "pytest"], cwd=empty, capture_output=True, text=True, env=_env()
    )
    assert bare.returncode == pytest.ExitCode.NO_TESTS_COLLECTED
    assert "HELMBench: no benchmark here" in bare.stdout and "helmbench:" not in bare.stdout

    db = tmp_path / "fresh.db"
    _run_text([str(venv / "bin" / "helmbench"), "db", "upgrade", "--db", f"sqlite:///{db}"], cwd=empty)
    with sqlite3.connect(db) as conn:
        tables = {name for (name,) in conn.execute("select name from sqlite_master where type='table'")}
    assert {"result", "evaluationrun", "alembic_version"} <= tables

    copied = _run_text([str(venv / "bin" / "helmbench"), "init"], cwd=empty)
    scenarios = len(list((REPO / "benchmark" / "scenarios").glob("*/S*.md")))
    assert f"copied the installed HELMBench benchmark ({scenarios} scenarios" in copied
    assert (empty / "benchmark" / "scenarios" / "P1-B1-S1" / "S1.md").is_file()
