"""The documentation's runnable blocks: how they are marked, read, run and compared with what they show.

The convention (explained to authors in docs/contributing.md): a fenced block is runnable when the
line right before its opening fence is an HTML comment

    <!-- doc-test -->                      a `console` block: each `$ ` line is run in a shell, and the
                                           lines after it are what it prints (in substance, see below);
                                           a `python` block: run as a script
    <!-- doc-test exit=10 -->              every command of the block must exit 10 (default: 0)
    <!-- doc-test server=openrouter -->    run against the loopback OpenRouter (tests/openrouter_server.py)
                                           with a key, as if OPENROUTER_API_KEY were set
    <!-- doc-test file=ratings.csv -->     the block's text is written to that file (a file the page asks
                                           the reader to create)
    <!-- doc-test output -->               what the python block just before it prints

and a block of commands or Python that cannot run here says why instead:

    <!-- no-doc-test: needs a paid model -->

A page's runnable blocks run in order in one fresh folder, as a reader following the page would: a
later block sees the database an earlier one wrote. Shown output matches in substance: every shown line
(whitespace runs collapsed) must appear in what the command printed (standard output and standard error
together), in the same order, other lines may come between, and `…` stands for any text (a line of
`…` alone only marks that lines are left out).

A plain `pytest` or `helmbench` line (see `plain`) and a python block run in this process, with the
same folder and environment, as a shell would run them (a test compares the two); anything else runs
in bash.
"""

from __future__ import annotations

import contextlib
import faulthandler
import importlib
import io
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

from tests.benchfiles import SESSION_ADDOPTS

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"

#: Languages whose blocks are commands or code: each must be marked doc-test or no-doc-test.
RUNNABLE_LANGUAGES = frozenset({"console", "bash", "sh", "shell", "python", "pycon"})
MARK = re.compile(r"^<!-- (doc-test|no-doc-test)(.*?) -->$")
FENCE = re.compile(r"^(`{3,}|~{3,})([\w+-]*)\s*$")
PAGE_TIMEOUT = 300  # seconds per command: the slowest shown command takes a few seconds


@dataclass
class Block:
    """One fenced block of a page, with the mark on the line before it (if any)."""

    page: Path
    line: int  # 1-based line of the opening fence
    language: str
    text: str
    mark: str | None = None  # "doc-test", "no-doc-test" or None
    options: dict[str, str] = field(default_factory=dict)
    reason: str = ""  # a no-doc-test mark's reason

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def pages() -> list[Path]:
    """Every page of the site, and the README (which shows commands too)."""
    return sorted(DOCS.rglob("*.md")) + [REPO / "README.md"]


def read_blocks(page: Path) -> list[Block]:
    lines = page.read_text(encoding="utf-8").split("\n")
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        fence, language = opening.group(1), opening.group(2)
        end = index + 1
        while end < len(lines) and not (
            lines[end].startswith(fence[0] * len(fence)) and lines[end].strip(fence[0]) == ""
        ):
            end += 1
        block = Block(page, index + 1, language, "\n".join(lines[index + 1 : end]))
        mark = MARK.match(lines[index - 1]) if index else None
        if mark:
            block.mark = mark.group(1)
            rest = mark.group(2)
            if block.mark == "no-doc-test":
                block.reason = rest.removeprefix(":").strip()
            else:
                for token in rest.split():
                    key, _, value = token.partition("=")
                    block.options[key] = value
        found.append(block)
        index = end + 1
    return found


@dataclass
class Command:
    line: str  # as shown, without the prompt; continuation lines joined
    shown: list[str]  # the output lines shown after it


def commands(block: Block) -> list[Command]:
    """`$ ` lines of a console block (a trailing backslash continues onto the next line)."""
    found: list[Command] = []
    lines = block.text.split("\n")
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("$ "):
            text = line[2:]
            while text.endswith("\\") and index + 1 < len(lines):
                index += 1
                text = text[:-1] + " " + lines[index].strip()
            found.append(Command(text, []))
        elif found:
            found[-1].shown.append(line)
        else:
            raise AssertionError(f"{block.where}: output before the first `$ ` command")
        index += 1
    return found


def _normal(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def mismatch(shown: list[str], printed: str) -> str | None:
    """None when every shown line appears, in order, in what was printed; else the first that does not."""
    lines = [_normal(line) for line in printed.splitlines()]
    at = 0
    for want in shown:
        wanted = _normal(want)
        if wanted in ("", "…"):
            continue
        pattern = re.compile("^" + ".*".join(re.escape(part) for part in wanted.split("…")) + "$")
        while at < len(lines) and not pattern.match(lines[at]):
            at += 1
        if at == len(lines):
            return want
        at += 1
    return None


def environment(folder: Path, server_url: str | None, key: str | None) -> dict[str, str]:
    """A reader's shell: the project's tools first on PATH, no HELMBench or OpenRouter settings of the
    test run, the pytest plugins among this repository's dev dependencies off (SESSION_ADDOPTS: a
    reader's project has none of them), 80 columns, and no way out of 127.0.0.1 (every other host
    goes to a closed proxy port)."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("HELMBENCH_", "OPENROUTER_", "PYTEST_"))
        and name not in ("COLUMNS", "CI", "BUILD_NUMBER")  # pytest writes whole lines on CI
    }
    dead = "http://127.0.0.1:9"
    env.update(
        PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
        PYTEST_ADDOPTS=SESSION_ADDOPTS,
        COLUMNS="80",
        PYTHONUNBUFFERED="1",  # standard output and error interleave as on a terminal
        HELMBENCH_CACHE_DIR=str(folder.parent / "cache"),
        HTTP_PROXY=dead,
        HTTPS_PROXY=dead,
        ALL_PROXY=dead,
        NO_PROXY="127.0.0.1,localhost",
        HF_HUB_OFFLINE="1",  # Hugging Face's libraries: nothing fetched, no progress bars
        HF_DATASETS_OFFLINE="1",
        HF_DATASETS_DISABLE_PROGRESS_BARS="1",
    )
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        env[name] = env[name.upper()]
    if server_url and key:
        env.update(OPENROUTER_BASE_URL=server_url, OPENROUTER_API_KEY=key)
    return env


def run_command(command: Command, folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A `$ ` line as a reader's shell runs it; a plain `pytest` or `helmbench` command (see `plain`)
    in this process, which saves the interpreter's and pytest's start of each (a hundred commands)."""
    found = plain(command.line)
    if found is not None:
        return run_in_process(found, folder, env)
    return subprocess.run(
        ["bash", "-c", command.line],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=PAGE_TIMEOUT,
        check=False,
    )


def run_python(code: str, folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A python block as `python -c` runs it, in this process (pandas is imported once, not per block)."""
    return run_in_process(Plain({}, ["python", "-c", code], None), folder, env)


def run_pytest(
    args: list[str], folder: Path, env: dict[str, str], *, stderr_apart: bool = False
) -> subprocess.CompletedProcess[str]:
    """`pytest ARGS` in `folder`, in this process as a process of its own would run it: for a test's
    session that needs no process of its own (a second of start-up less each)."""
    return run_in_process(Plain({}, ["pytest", *args], None), folder, env, stderr_apart=stderr_apart)


# ---- plain commands, run in this process ----------------------------------------------------------

#: The programs a plain command may run: this repository's own entry points.
IN_PROCESS = frozenset({"pytest", "helmbench"})
#: What shlex's punctuation tokens are made of: shell operators (pipes, lists, subshells, redirections),
#: which only bash may run, but for a final `> FILE`, the one redirection run here.
_OPERATOR_CHARS = frozenset("();<>|&")
#: Characters a shell would expand (variables, substitutions, globs, `~`, braces): such a line runs in bash.
_EXPANDED = re.compile(r"[$`*?\[~{]")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


@dataclass(frozen=True)
class Plain:
    """A `$ ` line that is one `pytest` or `helmbench` command with literal arguments: optional
    `NAME=value` settings before it, an optional `> FILE` after it, an optional trailing comment."""

    settings: dict[str, str]
    argv: list[str]
    stdout_to: str | None


def plain(line: str) -> Plain | None:
    """The line as a Plain command, or None when only a shell can run it as written."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:  # an unclosed quote
        return None
    stdout_to = None
    if len(tokens) >= 2 and tokens[-2] == ">":
        stdout_to, tokens = tokens[-1], tokens[:-2]
    settings: dict[str, str] = {}
    while tokens and _ASSIGNMENT.match(tokens[0]):
        name, _, value = tokens.pop(0).partition("=")
        settings[name] = value
    if not tokens or tokens[0] not in IN_PROCESS:
        return None
    if any(set(token) <= _OPERATOR_CHARS or _EXPANDED.search(token) for token in tokens):
        return None
    return Plain(settings, tokens, stdout_to)


def run_in_process(
    command: Plain, folder: Path, env: dict[str, str], *, stderr_apart: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run a plain command here, in `folder` with exactly `env` (and its settings), standard output and
    error written to one buffer as a pipe would take them (or standard output to its `> FILE`; with
    `stderr_apart`, standard error to a buffer of its own, the result's `stderr`). A
    command still running after PAGE_TIMEOUT ends this process with every thread's traceback, as the
    subprocess's timeout ended the command (xdist reports the test's worker as crashed)."""
    printed = _buffer()
    errors = _buffer() if stderr_apart else printed
    target = (folder / command.stdout_to).open("w", encoding="utf-8") if command.stdout_to else printed
    umask = os.umask(0o077)
    os.umask(umask)
    hook = sys.excepthook
    faulthandler.dump_traceback_later(PAGE_TIMEOUT, exit=True, file=sys.__stderr__)
    try:
        with mock.patch.dict(os.environ, {**env, **command.settings}, clear=True), contextlib.chdir(folder):
            with contextlib.redirect_stdout(target), contextlib.redirect_stderr(errors):
                code = _PROGRAMS[command.argv[0]](command.argv)
    finally:
        faulthandler.cancel_dump_traceback_later()
        os.umask(umask)  # `helmbench` sets the process's umask, as its console script does
        sys.excepthook = hook  # and Typer its exception hook
        if target is not printed:
            target.close()
    printed.seek(0)
    errors.seek(0)
    return subprocess.CompletedProcess(
        command.argv, code, printed.read(), errors.read() if stderr_apart else None
    )


def _buffer() -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="", write_through=True)


_ALREADY_IMPORTED = ["-W", "ignore:Module already imported:pytest.PytestAssertRewriteWarning"]


def _pytest(args: list[str]) -> int:
    """pytest.main, isolated as pytester's in-process runs are: what it imports (a page's own
    modules) and adds to sys.path is dropped afterwards, and pytest's end-of-session garbage
    collection (a full collection of this large process) is skipped. That this process has
    already imported the plugin is no warning a reader's run would show."""
    import pytest
    from _pytest.pytester import SysModulesSnapshot, SysPathsSnapshot
    from _pytest.unraisableexception import gc_collect_iterations_key

    class _NoGcCollection:
        @staticmethod
        def pytest_configure(config: pytest.Config) -> None:
            config.stash[gc_collect_iterations_key] = 0

    importlib.invalidate_caches()
    modules, paths = SysModulesSnapshot(), SysPathsSnapshot()
    try:
        return int(pytest.main([*_ALREADY_IMPORTED, *args], plugins=[_NoGcCollection()]))
    finally:
        modules.restore()
        paths.restore()


def _helmbench(argv: list[str]) -> int:
    """The console script's main with `argv`, as the script runs it: its main module in no package,
    else click names the program after the package (`Usage: python -m pytest.helmbench` in a serial
    `python -m pytest` run of these tests), not `helmbench` from argv[0]."""
    from pytest_helmbench.cli import main

    with mock.patch.object(sys.modules["__main__"], "__package__", None):
        return _exit_status(main, argv)


def _python(argv: list[str]) -> int:
    """`python -c CODE`: the code run as the `__main__` module."""
    code = argv[2]
    return _exit_status(lambda: exec(compile(code, "<string>", "exec"), {"__name__": "__main__"}), argv[1:])


def _exit_status(main: Callable[[], object], argv: list[str]) -> int:
    """`main()` with `sys.argv` set; its exit status as the process's would be (an uncaught exception
    still fails the test, with its traceback)."""
    saved = sys.argv
    sys.argv = argv
    try:
        main()
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1
    finally:
        sys.argv = saved
    return 0


_PROGRAMS: dict[str, Callable[[list[str]], int]] = {
    "pytest": lambda argv: _pytest(argv[1:]),
    "helmbench": _helmbench,
    "python": _python,
}


def write_file(block: Block, folder: Path) -> None:
    name = Path(block.options["file"])
    assert not name.is_absolute() and ".." not in name.parts, f"{block.where}: file= must stay in the folder"
    target = folder / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(block.text + "\n", encoding="utf-8")
