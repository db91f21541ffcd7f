"""dev.py's pure parts: when to reinstall, which system packages are missing, what each command runs."""

from __future__ import annotations

from pathlib import Path

import pytest

import dev  # the project root is on sys.path: tests/ is a package of it

ROOT = Path(dev.__file__).parent


def test_install_is_redone_only_when_pyproject_or_extras_change(tmp_path: Path) -> None:
    stamp = tmp_path / "stamp"
    first = dev.install_fingerprint(b"[project]\nname = 'x'\n")
    assert dev.needs_install(stamp, first)  # a fresh venv has no stamp
    stamp.write_text(first + "\n")
    assert not dev.needs_install(stamp, first)
    assert dev.needs_install(stamp, dev.install_fingerprint(b"[project]\nname = 'y'\n"))
    assert dev.needs_install(stamp, dev.install_fingerprint(b"[project]\nname = 'x'\n", extras="dev"))


def pg_bindir(tmp_path: Path, *names: str) -> Path:
    folder = tmp_path / "16" / "bin"
    folder.mkdir(parents=True)
    for name in names:
        (folder / name).write_text("")
    return folder


def test_missing_packages(tmp_path: Path) -> None:
    nothing = dev.missing_packages(which=lambda name: None, find=lambda pattern: [])
    assert nothing == ["chromium", "postgresql"]
    complete = str(pg_bindir(tmp_path, "initdb", "pg_ctl"))
    found = dev.missing_packages(which=lambda name: f"/usr/bin/{name}", find=lambda pattern: [complete])
    assert found == []
    browser = dev.missing_packages(which={"chromium-browser": "/b"}.get, find=lambda pattern: [complete])
    assert browser == []
    assert dev.missing_packages(which=lambda n: "/b", find=lambda p: [], pg_bindir=complete) == []


def test_postgresql_needs_both_server_binaries(tmp_path: Path) -> None:
    half = str(pg_bindir(tmp_path, "initdb"))
    assert dev.missing_packages(which=lambda name: "/b", find=lambda pattern: [half]) == ["postgresql"]


def test_apt_steps_install_only_what_is_missing() -> None:
    assert dev.apt_steps([]) == []
    update, install = dev.apt_steps(["postgresql"])
    assert update.argv[:2] == ("apt-get", "update")
    assert install.argv[:3] == ("apt-get", "install", "-y") and install.argv[-1] == "postgresql"


def test_test_runs_lint_format_check_docs_build_then_the_readme_command(tmp_path: Path) -> None:
    venv = tmp_path / ".venv"
    lint, fmt, docs, suite = dev.final_steps("test", venv, ["-m", "not local_model"])
    assert lint.argv == (str(venv / "bin" / "ruff"), "check", ".")
    assert fmt.argv == (str(venv / "bin" / "ruff"), "format", "--check", ".")
    site = dev.docs_site_dir()
    assert docs.argv == (str(venv / "bin" / "mkdocs"), "build", "--strict", "--site-dir", str(site))
    assert ROOT not in site.parents  # built outside the checkout: nothing to commit, nothing to ignore
    assert suite.argv == (
        str(venv / "bin" / "pytest"),
        "tests",
        "-n",
        "2",
        "--dist",
        "loadgroup",
        "-m",
        "not local_model",
    )


def test_bench_runs_the_readme_first_run_command(tmp_path: Path) -> None:
    (step,) = dev.final_steps("bench", tmp_path, [])
    assert step.argv[0] == str(tmp_path / "bin" / "pytest")
    selected = step.argv[-1].removeprefix("--helmbench-select=").split(",")
    assert [code.removesuffix("-U0") for code in selected] == list(dev.FIRST_RUN_CASES)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    shown = "pytest " + " ".join(step.argv[1:-1]) + " --helmbench-select=<FIRST_RUN_CASES>"
    assert shown in readme  # the README explains exactly this command


def test_the_first_run_cases_exist_and_are_what_dev_py_says() -> None:
    """One single-turn case per pillar (and of over-escalation), one scripted and one simulated
    conversation: a content change that drops or reshapes one of them fails here, not in a newcomer's
    first run."""
    from pytest_helmbench.evaluation.builtin import builtin_registry
    from pytest_helmbench.suite.cases import expand, parse_selectors
    from pytest_helmbench.suite.loader import BenchmarkLoader

    loader = BenchmarkLoader(ROOT / "benchmark", evaluation_types=builtin_registry())
    (step,) = dev.final_steps("bench", ROOT, [])
    selectors = parse_selectors([step.argv[-1].removeprefix("--helmbench-select=")])
    kinds: dict[str, str] = {}
    selected: list[str] = []
    pillars: set[str] = set()
    for folder in loader.scenario_dirs():
        scenario = loader.load_scenario(folder)
        pillars.add(scenario.pillar)
        for case in expand(scenario, ["m"]):
            if any(selector.matches(case.segments) for selector in selectors):
                selected.append(case.code)
            dialogue = case.perturbation.dialogue
            if dialogue is None or not dialogue.multi_turn:
                kinds[case.code] = "single"
            else:
                kinds[case.code] = "simulated" if dialogue.simulation is not None else "scripted"
    assert sorted(selected) == sorted(dev.FIRST_RUN_CASES)  # the selection is exactly these cases
    chosen = [kinds.get(code, "missing") for code in dev.FIRST_RUN_CASES]
    assert chosen.count("scripted") == 1 and chosen.count("simulated") == 1
    singles = [code for code, kind in zip(dev.FIRST_RUN_CASES, chosen, strict=True) if kind == "single"]
    assert sorted({code.split("-")[0] for code in singles}) == sorted(pillars)  # every pillar
    assert any(code.startswith("P1-B3-") for code in singles)  # over-escalation, a figure of its own
    assert len(singles) == len({code.rsplit("-S", 1)[0] for code in singles})  # one per behaviour shown


def test_quick_runs_lint_and_the_fast_tier_only(tmp_path: Path) -> None:
    lint, tests = dev.final_steps("test", tmp_path, ["--quick", "-x"])
    assert lint.argv[1:] == ("check", ".")
    assert tests.argv[1:] == (*dev.TEST_ARGS, *dev.QUICK_ARGS, "-x")
    assert all("mkdocs" not in part for part in tests.argv)


def test_unknown_command_prints_usage() -> None:
    with pytest.raises(SystemExit, match="usage: python3 dev.py"):
        dev.main(["lint"])
    with pytest.raises(ValueError):
        dev.final_steps("deploy", Path("v"), [])


def test_venv_env_puts_the_venv_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    env = dev.venv_env(tmp_path)
    assert env["VIRTUAL_ENV"] == str(tmp_path)
    assert env["PATH"].split(":")[0] == str(tmp_path / "bin")
    assert "PYTHONDONTWRITEBYTECODE" not in env  # the bytecode caches are written: a faster suite


def test_real_local_model_tests_share_one_xdist_worker(request: pytest.FixtureRequest) -> None:
    """Under the suite's own command (`-n 2 --dist loadgroup`) every local-model test carries the
    `local_model` group in its node id, so xdist sends them all to one worker: two llama.cpp servers
    at once made the suite take 35 minutes instead of a few."""
    local = [i for i in request.session.items if i.get_closest_marker("local_model")]
    if not local:
        pytest.skip("no local-model test selected in this session")
    if not getattr(request.config.option, "loadgroup", False):  # set on xdist's workers
        pytest.skip("only meaningful under --dist loadgroup")
    assert all(i.nodeid.endswith("@local_model") for i in local), [i.nodeid for i in local]


def test_setup_only_prepares_the_environment_and_runs_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """#31.6: `python3 dev.py setup` makes the venv, installs and checks the system packages, then
    stops (no lint, no tests, no benchmark); it takes no arguments."""
    done: list[str] = []
    monkeypatch.setattr(dev, "ensure_venv", lambda venv: done.append("venv") or tmp_path / "python")
    monkeypatch.setattr(dev, "ensure_install", lambda python, venv: done.append("install"))
    monkeypatch.setattr(dev, "ensure_system_packages", lambda: done.append("system"))
    monkeypatch.setattr(dev, "run", lambda step, env=None: done.append(step.label) or 0)
    monkeypatch.setattr(dev.os, "execve", lambda *a: done.append("exec"))
    assert dev.main(["setup"]) == 0
    assert done == ["venv", "install", "system"]
    with pytest.raises(SystemExit, match="setup takes no arguments"):
        dev.main(["setup", "-k", "x"])
