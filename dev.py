#!/usr/bin/env python3
"""The newcomer path: every set-up step inside two commands, with nothing but Python >= 3.11.

    python3 dev.py bench [pytest args]   # the first run: 8 cases on the embedded local model, all judged
    python3 dev.py test [pytest args]    # lint, format check, docs build, test suite (what .ci/run runs)
    python3 dev.py test --quick [args]   # lint and the fast tier (no e2e, no local model): the edit-test loop
    python3 dev.py setup                 # only the set-up both do: .venv, the install, system packages

Both create `.venv` when it is missing (or broken) and reinstall the project with its `local` and
`dev` extras whenever pyproject.toml changed (a stamp file inside `.venv` holds its hash). `test`
also installs, as root and only when missing, Debian's Chromium (the report tests) and PostgreSQL
server binaries (the PostgreSQL storage tests), and builds the documentation site (`mkdocs build
--strict`, into a folder under the system's temporary directory: nothing is written into the
checkout) before the suite runs. Standard library only: it runs before anything is
installed. Why not make or uv: only Python is guaranteed on a fresh machine; make is missing from
many images and uv would itself need installing.
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
EXTRAS = "local,dev"
STAMP_NAME = ".helmbench-dev-install"
#: The first run's cases, chosen to show the tool quickly on two cores with every reply judged (the
#: target is three minutes; bench/first_run.py measures it, docs/explanation/performance.md has the
#: figure): one single-turn case of every pillar (and of over-escalation, P1-B3), one scripted
#: conversation (judged on its last reply) and one five-turn simulated conversation (the local model
#: also plays the user). Reading the judges' prompts (about 1,500 tokens each, at some 130 tokens/s
#: per core) is most of the time, so the sample is what fits: 13 single-turn cases (one per behaviour)
#: took 558-623 s. tests/test_dev.py checks that each still exists and is of its kind.
FIRST_RUN_CASES = (
    "P1-B1-S7-C8-U4-PT2",
    "P1-B3-S1-C2-U5-PT2",
    "P2-B1-S1-C8-U5-PT2",
    "P3-B1-S2-C8-PT5",
    "P4-B2-S3-C1-U8-PT5",  # one rubric (P4-B1-S1 has two: a judge call more)
    "P5-B2-S8-C5-U3-PT4",
    "P1-B2-S5-C2-PT2",  # scripted conversation
    "P1-B2-S5-C1-PT1",  # simulated conversation, five turns
)
BENCH_ARGS = (
    "--helmbench-model=local/smollm2",
    "--helmbench-marking-model=local/smollm2",
    "--helmbench-critical-votes=1",  # one judge call per reply: three votes of a 135M judge say nothing more
    # a code without a user context selects every context unless it says U0 (the baseline)
    "--helmbench-select=" + ",".join(code if "-U" in code else f"{code}-U0" for code in FIRST_RUN_CASES),
)
TEST_ARGS = ("tests", "-n", "2", "--dist", "loadgroup")
#: The edit-test loop's tier (`dev.py test --quick`; the target is a minute): every test that starts no pytest
#: session, server, browser or database server (tests/conftest.py marks those `e2e`), takes no seconds
#: of its own (`slow`), runs no local model and no docs command. CI still runs everything.
QUICK_MARKERS = "not e2e and not slow and not local_model and not doc_commands"
#: The quick tier's arguments: those marks left out, a smaller property search (tests/conftest.py).
QUICK_ARGS = ("-m", QUICK_MARKERS, "--hypothesis-profile=quick")
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
POSTGRES_BINDIRS = "/usr/lib/postgresql/*/bin"
USAGE = "usage: python3 dev.py {bench|test [--quick]|setup} [pytest args]"


@dataclass(frozen=True)
class Step:
    """One command of a plan, run from the project root; `label` says what it is for."""

    label: str
    argv: tuple[str, ...]


def venv_bin(venv: Path, name: str) -> Path:
    return venv / ("Scripts" if os.name == "nt" else "bin") / name


def install_fingerprint(pyproject: bytes, extras: str = EXTRAS) -> str:
    """What the installed environment was built from: the project file and the extras asked for."""
    return hashlib.sha256(pyproject + b"\0" + extras.encode()).hexdigest()


def needs_install(stamp: Path, fingerprint: str) -> bool:
    """True unless the stamp records exactly this fingerprint (a fresh venv has no stamp)."""
    try:
        return stamp.read_text(encoding="utf-8").strip() != fingerprint
    except OSError:
        return True


def missing_packages(
    which: Callable[[str], str | None] = shutil.which,
    find: Callable[[str], list[str]] = glob.glob,
    pg_bindir: str | None = None,
) -> list[str]:
    """The Debian packages `test` needs and this machine lacks: chromium, postgresql (server binaries)."""
    missing = []
    if not any(which(name) for name in CHROMIUM_NAMES):
        missing.append("chromium")
    bindirs = [pg_bindir] if pg_bindir else []
    bindirs += find(POSTGRES_BINDIRS)
    if not any(Path(d, "initdb").is_file() and Path(d, "pg_ctl").is_file() for d in bindirs):
        missing.append("postgresql")
    return missing


def apt_steps(packages: Sequence[str]) -> list[Step]:
    if not packages:
        return []
    install = ("apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages)
    return [Step("apt index", ("apt-get", "update", "-qq")), Step("system packages", install)]


def docs_site_dir(root: Path = ROOT) -> Path:
    """Where `test` builds the documentation site: outside the checkout (so nothing is left to commit),
    one folder per checkout (so two clones on one machine do not clean each other's build)."""
    digest = hashlib.sha256(str(root).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"helmbench-docs-{digest}"


def final_steps(action: str, venv: Path, extra: Sequence[str]) -> list[Step]:
    """What `bench` or `test` runs once the environment is ready: the README's commands, in the venv.

    The last step replaces this process, so its exit status and its Ctrl-C handling are pytest's own."""
    pytest, ruff = str(venv_bin(venv, "pytest")), str(venv_bin(venv, "ruff"))
    if action == "bench":
        return [Step("benchmark sample", (pytest, *BENCH_ARGS, *extra))]
    if action == "test" and extra[:1] == ["--quick"]:
        return [
            Step("lint", (ruff, "check", ".")),
            Step("quick tests", (pytest, *TEST_ARGS, *QUICK_ARGS, *extra[1:])),
        ]
    if action == "test":
        mkdocs = str(venv_bin(venv, "mkdocs"))
        return [
            Step("lint", (ruff, "check", ".")),
            Step("format check", (ruff, "format", "--check", ".")),
            Step("docs", (mkdocs, "build", "--strict", "--site-dir", str(docs_site_dir()))),
            Step("test suite", (pytest, *TEST_ARGS, *extra)),
        ]
    raise ValueError(USAGE)


def venv_env(venv: Path) -> dict[str, str]:
    """The environment an activated venv gives: its bin first on PATH, VIRTUAL_ENV set (and mkdocs'
    banner about its next major version, which says nothing about this build, left out).

    PYTHONDONTWRITEBYTECODE is dropped: with it (some images set it), each of the suite's hundreds of
    Python processes compiled the package again and pytest rewrote the same test and plugin modules
    again; with the caches written (__pycache__, ignored by git and the sdist), the suite took some 40 s
    less of CPU. What the commands do is the same."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["VIRTUAL_ENV"] = str(venv)
    env.setdefault("NO_MKDOCS_2_WARNING", "1")
    env["PATH"] = os.pathsep.join([str(venv_bin(venv, "python").parent), env.get("PATH", "")])
    env.pop("PYTHONHOME", None)
    return env


def say(message: str) -> None:
    print(f"dev.py: {message}", file=sys.stderr, flush=True)


def run(step: Step, env: dict[str, str] | None = None) -> int:
    say(f"{step.label}: {' '.join(step.argv)}")
    return subprocess.run(step.argv, cwd=ROOT, env=env, check=False).returncode


def ensure_venv(venv: Path) -> Path:
    """Create the venv when missing, recreate it when its interpreter no longer runs; its python."""
    python = venv_bin(venv, "python")
    if python.exists() and subprocess.run([str(python), "-c", ""], check=False).returncode == 0:
        return python
    say(f"creating {venv}")
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    return python


def ensure_install(python: Path, venv: Path) -> None:
    """pip install -e '.[local,dev]' when pyproject.toml (or the extras) changed since the last install."""
    fingerprint = install_fingerprint((ROOT / "pyproject.toml").read_bytes())
    stamp = venv / STAMP_NAME
    if not needs_install(stamp, fingerprint):
        return
    pip = (str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check")
    for step in (Step("pip", (*pip, "--upgrade", "pip")), Step("install", (*pip, "-e", f".[{EXTRAS}]"))):
        if run(step) != 0:
            raise SystemExit(f"dev.py: {step.label} failed; fix the error above and run me again")
    stamp.write_text(fingerprint + "\n", encoding="utf-8")


def ensure_system_packages() -> None:
    """Install missing Debian packages as root; otherwise say what to install (the tests will fail)."""
    missing = missing_packages(pg_bindir=os.environ.get("HELMBENCH_PG_BINDIR"))
    if not missing:
        return
    if not shutil.which("apt-get") or os.geteuid() != 0:
        say(f"missing system packages: {' '.join(missing)} (install them as root: apt-get install -y ...)")
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for step in apt_steps(missing):
        if run(step, env) != 0:
            raise SystemExit(f"dev.py: {step.label} failed")


def main(argv: Sequence[str]) -> int:
    if sys.version_info < (3, 11):  # noqa: UP036 (a fresh machine may run an older python3)
        raise SystemExit("dev.py: HELMBench needs Python >= 3.11")
    if not argv or argv[0] not in ("bench", "test", "setup"):
        raise SystemExit(USAGE)
    action, extra = argv[0], list(argv[1:])
    if action == "setup" and extra:
        raise SystemExit("dev.py: setup takes no arguments")
    python = ensure_venv(VENV)
    ensure_install(python, VENV)
    if action == "setup" or (action == "test" and extra[:1] != ["--quick"]):
        ensure_system_packages()  # Chromium and PostgreSQL: the quick tier needs neither
    if action == "setup":
        say(f"set up: {VENV} (activate it with `. {VENV / 'bin' / 'activate'}`); nothing was run")
        return 0
    env = venv_env(VENV)
    *checks, last = final_steps(action, VENV, extra)
    for step in checks:
        status = run(step, env)
        if status != 0:
            return status
    say(f"{last.label}: {' '.join(last.argv)}")
    os.chdir(ROOT)
    os.execve(last.argv[0], list(last.argv), env)
    return 0  # not reached: execve replaces this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
