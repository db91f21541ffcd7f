"""The documentation site cannot drift from the code (issue #31, points 4 and 5).

- Every command a page shows that can run here runs, as a reader would run it, and prints what the page
  shows (tests/docpages.py holds the convention; docs/contributing.md explains it to authors). A block
  of commands or code that cannot run here must say why.
- The option reference is checked against the options pytest registers, the command reference against
  the `helmbench` app, the exit statuses against the code's constants, and the database reference
  against the tables: nothing can be added without its doc line, and no doc line names what is gone.
- The README stays short and links into the site.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

import dev  # the project root is on sys.path: tests/ is a package of it
from tests import docpages
from tests.docpages import REPO, Block
from tests.openrouter_server import FakeOpenRouter

#: The loopback OpenRouter's prices for the models the pages name (USD per token, as OpenRouter's /models).
PRICES = {
    "openai/gpt-4o-mini": ("0.00000015", "0.0000006"),
    "anthropic/claude-sonnet-4.5": ("0.000003", "0.000015"),
    "anthropic/claude-3.5-haiku": ("0.0000008", "0.000004"),
    "google/gemini-2.5-flash": ("0.0000003", "0.0000025"),
}
KEY = "sk-or-v1-docs-0123456789abcdef"


def _runnable_pages() -> list:
    return [
        page for page in docpages.pages() if any(b.mark == "doc-test" for b in docpages.read_blocks(page))
    ]


def _all_blocks() -> list[Block]:
    return [block for page in docpages.pages() for block in docpages.read_blocks(page)]


# ---- every block of commands or code is marked ------------------------------------------------------


def test_every_block_of_commands_or_code_says_whether_it_runs():
    unmarked = [
        b.where for b in _all_blocks() if b.language in docpages.RUNNABLE_LANGUAGES and b.mark is None
    ]
    assert unmarked == [], "mark each with <!-- doc-test --> or <!-- no-doc-test: why it cannot run here -->"


def test_a_block_that_does_not_run_says_why():
    assert [b.where for b in _all_blocks() if b.mark == "no-doc-test" and not b.reason] == []


def test_doc_test_marks_are_well_formed():
    known = {"exit", "server", "file", "output"}
    problems = []
    for page in docpages.pages():
        blocks = docpages.read_blocks(page)
        for before, block in zip([None, *blocks], blocks, strict=False):
            if block.mark != "doc-test":
                continue
            if set(block.options) - known:
                problems.append(f"{block.where}: unknown {sorted(set(block.options) - known)}")
            if "output" in block.options and not (
                before is not None and before.mark == "doc-test" and before.language == "python"
            ):
                problems.append(f"{block.where}: `output` must follow a doc-test python block")
            if not {"file", "output"} & set(block.options) and block.language not in ("console", "python"):
                problems.append(f"{block.where}: a doc-test block is console or python (or file=/output)")
            if block.language == "console":
                docpages.commands(block)  # output before the first command is an error
            if block.options.get("server", "openrouter") != "openrouter":
                problems.append(f"{block.where}: the only server is openrouter")
    assert problems == []


def test_the_matcher_reads_shown_output_in_substance():
    printed = "header\nscore 81.2/100 [95% CI 74.0-87.5]\nmiddle\nresults stored in sqlite:////x/h.db\n"
    assert docpages.mismatch(["score …/100 [95% CI …]", "…", "results stored in …"], printed) is None
    assert docpages.mismatch(["results stored in …", "score …"], printed) == "score …"  # order counts
    assert docpages.mismatch(["score  81.2/100   [95% CI 74.0-87.5]"], printed) is None  # spacing
    assert docpages.mismatch(["score 99.9/100 …"], printed) == "score 99.9/100 …"


def test_only_plain_commands_of_this_project_run_in_process():
    line = "HELMBENCH_DRY_RUN=maybe pytest -m \"helmbench(behaviour='P1-B1')\" > out.txt  # a comment"
    plain = docpages.plain(line)
    assert plain == docpages.Plain(
        {"HELMBENCH_DRY_RUN": "maybe"}, ["pytest", "-m", "helmbench(behaviour='P1-B1')"], "out.txt"
    )
    assert docpages.plain('helmbench review raters add "Dr Rivera" --study 1') is not None
    for line in (
        "find out -type f | sort",  # a pipe
        "pytest -q 2>&1",
        "helmbench export >> all.csv",
        "pytest -q && helmbench report",
        "helmbench export --out $HOME/x.csv",  # an expansion
        "pytest tests/*.py",  # a glob
        "inspect log list",  # another program
        'pytest -k "unclosed',
    ):
        assert docpages.plain(line) is None, line


@pytest.mark.e2e  # starts pytest sessions and shells: out of `dev.py test --quick`
@pytest.mark.parametrize(
    "line",
    [
        "pytest --helmbench-judge-policy majorty --helmbench-dry-run",  # a usage error on standard error
        "HELMBENCH_DRY_RUN=maybe pytest --helmbench-sample 1",
        "helmbench --version",
        "helmbench export --format xml",  # Click's usage error, exit 2
        "helmbench costs > costs.txt",
    ],
)
def test_a_plain_command_in_process_prints_and_exits_as_in_a_shell(line, tmp_path):
    """What the in-process runner saves (an interpreter's start per command) must not change what a
    command prints, in which order, or its exit status."""
    env = docpages.environment(tmp_path, None, None)
    command = docpages.Command(line, [])
    here = docpages.run_command(command, tmp_path, env)
    shell = subprocess.run(
        ["bash", "-c", line], cwd=tmp_path, env=env, capture_output=False, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, check=False,
    )  # fmt: skip
    assert here.returncode == shell.returncode
    assert here.stdout.split() == shell.stdout.split()
    assert here.stdout.strip(), "something was printed"


@pytest.mark.e2e  # starts a process
def test_a_command_run_in_process_is_bounded_in_time_as_a_subprocess_was(tmp_path):
    """Past PAGE_TIMEOUT the process ends with every thread's traceback (here a second, not 300)."""
    script = (
        "import sys; from pathlib import Path; from tests import docpages\n"
        "docpages.PAGE_TIMEOUT = 1\n"
        "block = docpages.Plain({}, ['python', '-c', 'import time; time.sleep(60)'], None)\n"
        f"docpages.run_in_process(block, Path({str(tmp_path)!r}), {{}})\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode != 0
    assert "Timeout" in done.stderr and "time.sleep" not in done.stdout, done.stderr[-2000:]


# ---- the commands run as shown ----------------------------------------------------------------------


@pytest.mark.doc_commands
@pytest.mark.parametrize("page", _runnable_pages(), ids=lambda page: str(page.relative_to(REPO)))
def test_the_commands_a_page_shows_run_as_shown(page, tmp_path):
    folder = tmp_path / "reader"
    folder.mkdir()
    server: FakeOpenRouter | None = None
    last_python: tuple[Block, str] | None = None
    try:
        for block in [b for b in docpages.read_blocks(page) if b.mark == "doc-test"]:
            if "file" in block.options:
                docpages.write_file(block, folder)
                continue
            if "output" in block.options:
                assert last_python is not None
                code, printed = last_python
                missing = docpages.mismatch(block.text.split("\n"), printed)
                assert missing is None, f"{code.where} printed no line like {missing!r}:\n{printed}"
                continue
            if block.options.get("server") == "openrouter" and server is None:
                server = FakeOpenRouter(api_keys={KEY}).start()
                server.pricing = dict(PRICES)
            url = server.base_url if server is not None and "server" in block.options else None
            env = docpages.environment(folder, url, KEY if url else None)
            expected = int(block.options.get("exit", "0"))
            if block.language == "python":
                done = docpages.run_python(block.text, folder, env)
                assert done.returncode == expected, f"{block.where} exited {done.returncode}:\n{done.stdout}"
                last_python = (block, done.stdout)
                continue
            for command in docpages.commands(block):
                done = docpages.run_command(command, folder, env)
                said = f"{block.where}: $ {command.line}"
                assert done.returncode == expected, f"{said} exited {done.returncode}:\n{done.stdout}"
                missing = docpages.mismatch(command.shown, done.stdout)
                assert missing is None, f"{said} printed no line like {missing!r}:\n{done.stdout}"
    finally:
        if server is not None:
            server.stop()


# ---- the option reference is the options pytest registers -----------------------------------------

OPTIONS_PAGE = REPO / "docs" / "reference" / "options.md"
OPTION_ROW = re.compile(r"^\| (`--helmbench-[^|]*`|—) \| ([^|]+) \| ([^|]+) \| ([^|]+) \| ([^|]+) \|$")


def _option_rows() -> dict[str, tuple[str, str, str, str]]:
    """flag (or ini key, for an ini-only row) -> (ini, environment variable, default, meaning) as written."""
    rows = {}
    for line in OPTIONS_PAGE.read_text(encoding="utf-8").splitlines():
        found = OPTION_ROW.match(line)
        if not found:
            continue
        cells = [cell.strip().strip("`") for cell in found.groups()]
        flag = re.match(r"--helmbench-[a-z-]+", cells[0])
        rows[flag.group(0) if flag else cells[1]] = (cells[1], cells[2], cells[3], cells[4])
    return rows


@pytest.fixture(scope="module")
def pytest_help(tmp_path_factory) -> str:
    """`pytest --help` in an empty folder: the options and ini keys pytest itself registered."""
    folder = tmp_path_factory.mktemp("help")
    env = docpages.environment(folder, None, None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--help"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def test_every_registered_option_has_its_row_and_every_row_is_an_option(pytest_help):
    registered = set(re.findall(r"(--helmbench-[a-z-]+)", pytest_help))
    documented = {name for name in _option_rows() if name.startswith("--")}
    assert sorted(registered - documented) == [], "add a row to docs/reference/options.md"
    assert sorted(documented - registered) == [], "docs/reference/options.md names options that do not exist"


@pytest.mark.slow
def test_every_row_names_the_options_ini_twin_and_environment_variable(pytest_help):
    from pytest_helmbench.plugin.options import OPTIONS, option_dest

    rows = _option_rows()
    ini_keys = set(re.findall(r"^\s+(helmbench_[a-z_]+) \(", pytest_help, re.MULTILINE))
    for option in OPTIONS:
        ini, env, default, meaning = rows[f"--helmbench-{option.name}"]
        assert ini == (option_dest(option.name) if option.ini else "—"), option.name
        assert ini == "—" or ini in ini_keys, f"{ini} is not an ini key pytest knows"
        assert env == (option.env or "—"), option.name
        if option.default not in (None, False):
            assert str(option.default) in default, (
                f"{option.name}: default {option.default!r} not in {default!r}"
            )
        assert meaning, option.name
    twins = {option_dest(o.name) for o in OPTIONS if o.ini}
    ini_only = {key for key in ini_keys if key not in twins}
    assert ini_only == {key for key in rows if not key.startswith("--")}, "every ini-only key has its row"


# ---- the command reference is the helmbench app -----------------------------------------------------

CLI_PAGE = REPO / "docs" / "reference" / "cli.md"


def _commands() -> dict[str, list[str]]:
    """`helmbench <command>` -> its options' flags, walked from the Typer app itself."""
    import typer.main

    from pytest_helmbench.cli import app

    root = typer.main.get_command(app)
    found: dict[str, list[str]] = {}

    def walk(group, prefix: str, context) -> None:
        for name in group.list_commands(context):
            command = group.get_command(context, name)
            if hasattr(command, "list_commands"):  # a group: `helmbench db`, `helmbench cache`
                walk(command, f"{prefix} {name}", context)
            else:
                flags = [  # a boolean flag's off switch too: `--store/--no-store`
                    opt
                    for p in command.params
                    if p.param_type_name == "option"
                    for opt in (*p.opts, *p.secondary_opts)
                ]
                found[f"{prefix} {name}"] = flags

    walk(root, "helmbench", root.context_class(root))
    return found


def _cli_sections() -> dict[str, str]:
    """`### \\`helmbench …\\`` heading -> the text of its section."""
    text = CLI_PAGE.read_text(encoding="utf-8")
    parts = re.split(r"^### `(helmbench [a-z -]+)`$", text, flags=re.MULTILINE)
    return {parts[i]: re.split(r"^## ", parts[i + 1], flags=re.MULTILINE)[0] for i in range(1, len(parts), 2)}


def test_every_command_has_its_section_and_every_section_is_a_command():
    commands, sections = _commands(), _cli_sections()
    assert sorted(set(commands) - set(sections)) == [], "add a section to docs/reference/cli.md"
    assert sorted(set(sections) - set(commands)) == [], (
        "docs/reference/cli.md names commands that do not exist"
    )


def test_every_option_of_a_command_is_in_its_section():
    sections = _cli_sections()
    missing = [
        f"{command} {flag}"
        for command, flags in _commands().items()
        for flag in flags
        if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", sections[command])
    ]
    assert missing == [], "document these options in docs/reference/cli.md"


def test_the_command_sections_name_no_option_that_does_not_exist():
    commands, sections = _commands(), _cli_sections()
    shared = {"--help", "--version", "--install-completion", "--show-completion"}
    unknown = [
        f"{command} {flag}"
        for command, text in sections.items()
        for flag in set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", text))
        if flag not in commands[command] and flag not in shared and not flag.startswith("--helmbench-")
    ]
    assert unknown == [], "docs/reference/cli.md names options these commands do not have"


def test_the_top_level_options_are_documented():
    import typer.main

    from pytest_helmbench.cli import app

    text = CLI_PAGE.read_text(encoding="utf-8")
    root = typer.main.get_command(app)
    flags = [opt for p in root.params for opt in p.opts if opt != "--help"]
    assert flags and [f for f in flags if f"`helmbench {f}" not in text and f"`{f}`" not in text] == []


# ---- the exit statuses are the code's ---------------------------------------------------------------

EXIT_PAGE = REPO / "docs" / "reference" / "exit-codes.md"


def _exit_table(section: str) -> dict[int, str]:
    text = EXIT_PAGE.read_text(encoding="utf-8")
    body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"^\| (\d+) \| ([^|]+) \|", body, re.MULTILINE)}


def _helmbench_exit_constants() -> dict[str, int]:
    """Every module-level `EXIT_*` integer of the package: the statuses HELMBench adds to pytest's."""
    import importlib
    import pkgutil

    import pytest_helmbench

    found = {}
    for module in pkgutil.walk_packages(pytest_helmbench.__path__, "pytest_helmbench."):
        if module.name.startswith("pytest_helmbench.migrations"):
            continue
        for name, value in vars(importlib.import_module(module.name)).items():
            if name.startswith("EXIT_") and isinstance(value, int) and not isinstance(value, bool):
                found[name] = value
    return found


def test_the_run_statuses_are_pytests_and_helmbenchs():
    table = _exit_table("A pytest run")
    constants = _helmbench_exit_constants()
    expected = {int(code): code.name for code in pytest.ExitCode} | {v: k for k, v in constants.items()}
    assert constants, "no EXIT_* constant found: where did the statuses go?"
    assert {code: name.strip() for code, name in table.items()} == expected


def test_the_command_statuses_are_the_ones_it_raises():
    import click

    constants = _helmbench_exit_constants()
    raised = set()
    for source in (REPO / "pytest_helmbench" / "cli").glob("*.py"):
        for given in re.findall(r"(?:typer\.Exit|SystemExit)\((\w+)\)", source.read_text()):
            raised.add(int(given) if given.isdigit() else constants[given])
    expected = {0} | raised | {click.UsageError.exit_code}
    assert set(_exit_table("The `helmbench` command")) == expected


# ---- the database reference is the schema ----------------------------------------------------------


def test_every_table_and_column_is_documented_and_nothing_else():
    from sqlmodel import SQLModel

    import pytest_helmbench.storage.tables  # noqa: F401  (registers the tables)

    text = (REPO / "docs" / "reference" / "database.md").read_text(encoding="utf-8")
    sections = re.split(r"^### (.+)$", text, flags=re.MULTILINE)
    documented: dict[str, set[str]] = {}
    for heading, body in zip(sections[1::2], sections[2::2], strict=True):
        columns = set(re.findall(r"^\| `(\w+)` \|", body, re.MULTILINE))
        for table in re.findall(r"`(\w+)`", heading):
            documented[table] = columns
    schema = {t.name: {c.name for c in t.columns} for t in SQLModel.metadata.sorted_tables}
    assert sorted(set(schema) - set(documented)) == [], "add the table to docs/reference/database.md"
    assert sorted(set(documented) - set(schema) - {"alembic_version"}) == [], (
        "documented tables that do not exist"
    )
    for table, columns in schema.items():
        shared_page = documented[table]
        assert columns <= shared_page, f"{table}: undocumented columns {sorted(columns - shared_page)}"
    linked = {"scenarioconditionlink", "scenariousercontextlink"}  # one section, one column apart
    for table in set(schema) - linked:
        extra = documented[table] - schema[table]
        assert extra == set() or table in ("condition", "usercontext"), (
            f"{table}: {sorted(extra)} do not exist"
        )
    assert documented["condition"] == schema["condition"] == schema["usercontext"]
    assert (
        documented["scenarioconditionlink"]
        == schema["scenarioconditionlink"] | schema["scenariousercontextlink"]
    )


def test_every_migration_is_listed():
    text = (REPO / "docs" / "reference" / "database.md").read_text(encoding="utf-8")
    revisions = sorted(path.name[:4] for path in (REPO / "migrations" / "versions").glob("[0-9]*.py"))
    listed = re.findall(r"^\| (\d{4}) \|", text, re.MULTILINE)
    assert listed == revisions


# ---- the README stays a front page ------------------------------------------------------------------

README = REPO / "README.md"
FIRST_RUN = f"the first run: {len(dev.FIRST_RUN_CASES)} cases"  # dev.py's count, as the README says it
TWO_COMMANDS = f"""```bash
python3 dev.py bench   # {FIRST_RUN} on the embedded local model, every reply judged
python3 dev.py test    # lint, format check and the project's test suite (what CI runs)
```"""


def test_the_readme_is_short_and_keeps_the_two_commands():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) < 300
    assert TWO_COMMANDS in text


def test_the_readme_links_only_to_files_that_exist():
    text = README.read_text(encoding="utf-8")
    targets = [t.split("#")[0] for t in re.findall(r"\]\(([^)]+)\)", text) if "://" not in t]
    assert targets and [t for t in targets if t and not (REPO / t).exists()] == []


def test_every_page_is_in_the_site_navigation():
    import yaml

    nav = json.dumps(yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))["nav"])
    pages = [str(p.relative_to(REPO / "docs")) for p in (REPO / "docs").rglob("*.md")]
    assert [page for page in pages if f'"{page}"' not in nav] == []
