"""Benchmark trees written by strangers, end to end: nothing outside the tree is read, sent or stored;
hostile input (links, FIFOs, /proc, alias bombs, huge or misnamed files) is a collection error that
names the file and the fix, never a traceback or a hang."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from tests.benchfiles import API_KEY, PERTURBATIONS, STRICT_SCHEMA, write, write_benchmark
from tests.openrouter_server import Reply

CANARY = "CANARY-5c1e-do-not-leak"
GOOD = {"category": "ANSWER", "response": "Mitochondria."}
# Subprocess runs get this long before a hang is declared (an old reader blocked on a FIFO forever).
HANG_TIMEOUT = 120


@pytest.fixture
def bench(pytester: pytest.Pytester, helm_env) -> Path:
    """A benchmark with a good scenario P1-B1-S1 whose cases pass; the attack goes in P1-B1-S2."""
    pytester.makeini("[pytest]\n")
    helm_env.add_rule(contains="powerhouse", reply=Reply.ok(GOOD))
    return write_benchmark(pytester.path / "benchmark", scenarios=("P1-B1-S1", "P1-B1-S2"))


@pytest.fixture
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder outside the benchmark tree holding a valid-looking scenario full of the canary."""
    folder = tmp_path_factory.mktemp("outside")
    write(folder / "S2.md", f"---\ncategory: ANSWER\n---\n\n## Your job\n\n{CANARY} in the scenario.\n")
    write(folder / "S2.json", json.dumps(STRICT_SCHEMA))
    write(folder / "perturbations.md", f"# PT1\n\n## User input\n\n{CANARY}, powerhouse?\n")
    return folder


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("benchmark", "-p", "no:randomly", "--continue-on-collection-errors", *args)


def run_subprocess(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "benchmark", "-p", "no:randomly", "--continue-on-collection-errors", *args, timeout=HANG_TIMEOUT
    )


def output(result: pytest.RunResult) -> str:
    return result.stdout.str() + result.stderr.str()


def assert_collection_error(result: pytest.RunResult, path: Path, message: str) -> None:
    """One collection error (P1-B1-S2's), naming the file and the fix; P1-B1-S1's 8 cases still pass."""
    result.assert_outcomes(passed=8, errors=1)
    out = output(result)
    assert f"{path}: {message}" in out or f"{path}:" in out and message in out, out
    assert "  fix: " in out
    assert "Traceback" not in out


def assert_canary_nowhere(pytester: pytest.Pytester, result: pytest.RunResult, helm_env) -> None:
    assert CANARY not in output(result)
    assert all(CANARY not in json.dumps(request.body) for request in helm_env.requests)
    assert helm_env.requests, "the good scenario ran"
    for db in pytester.path.glob("helmbench.db*"):
        assert CANARY.encode() not in db.read_bytes()


def test_a_link_to_a_file_outside_the_tree_is_an_error_and_nothing_it_holds_leaks(
    pytester, bench, outside, helm_env
):
    link = bench / "scenarios/P1-B1-S2/perturbations.md"
    link.unlink()
    link.symlink_to(outside / "perturbations.md")
    result = run(pytester)
    assert_collection_error(result, link, "is a symbolic link that leads outside the benchmark root")
    assert_canary_nowhere(pytester, result, helm_env)


def test_a_linked_folder_outside_the_tree_is_an_error_naming_the_link(pytester, bench, outside, helm_env):
    folder = bench / "scenarios/P1-B1-S2"
    for path in folder.iterdir():
        path.unlink()
    folder.rmdir()
    folder.symlink_to(outside, target_is_directory=True)
    result = run(pytester)
    assert_collection_error(result, folder, "is a symbolic link that leads outside the benchmark root")
    assert_canary_nowhere(pytester, result, helm_env)


def test_a_folder_link_to_proc_is_an_error_and_pytest_never_walks_it(pytester, bench, helm_env):
    link = bench / "scenarios/P1-B1-S3"
    link.symlink_to("/proc", target_is_directory=True)  # walked, /proc/self/root reaches the whole disk
    result = run_subprocess(pytester)
    result.assert_outcomes(passed=16, errors=1)
    assert f"{link}: is a symbolic link that leads outside the benchmark root" in output(result)
    assert "Traceback" not in output(result)


def test_a_link_elsewhere_under_the_root_fails_every_scenario(pytester, bench, outside, helm_env):
    (bench / "notes").mkdir()
    (bench / "notes/secret.md").symlink_to(outside / "S2.md")
    result = run(pytester)
    result.assert_outcomes(errors=2)
    assert f"{bench / 'notes/secret.md'}: is a symbolic link that leads outside" in output(result)
    assert CANARY not in output(result)
    assert helm_env.requests == []


def test_a_link_inside_the_tree_is_followed(pytester, bench, helm_env):
    own = bench / "scenarios/P1-B1-S2/perturbations.md"
    own.unlink()
    own.symlink_to(Path("../P1-B1-S1/perturbations.md"))
    run(pytester).assert_outcomes(passed=16)


def test_proc_self_environ_as_a_link_target_is_never_read(pytester, bench, helm_env, monkeypatch):
    monkeypatch.setenv("HELMBENCH_TEST_CANARY", CANARY)
    link = bench / "scenarios/P1-B1-S2/conditions.md"
    link.symlink_to("/proc/self/environ")
    result = run(pytester)
    assert_collection_error(result, link, "is a symbolic link that leads outside the benchmark root")
    assert_canary_nowhere(pytester, result, helm_env)


@pytest.mark.parametrize("name", ["conditions.md", "perturbations/PT2.md"])
def test_a_fifo_named_like_a_component_file_is_an_error_not_a_hang(pytester, bench, helm_env, name):
    folder = bench / "scenarios/P1-B1-S2"
    if name.startswith("perturbations/"):
        (folder / "perturbations.md").unlink()
        write(folder / "perturbations/PT1.md", "## User input\n\npowerhouse?\n")
    fifo = folder / name
    os.mkfifo(fifo)
    result = run_subprocess(pytester)
    assert_collection_error(result, fifo, "is not a regular file")


def test_a_yaml_alias_bomb_is_a_collection_error(pytester, bench, helm_env):
    levels = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        levels.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    md_path = bench / "scenarios/P1-B1-S2/S2.md"
    write(md_path, "---\ncategory: ANSWER\n" + "\n".join(levels) + "\n---\n\n## Your job\n\nHelp.\n")
    result = run_subprocess(pytester)  # the old loader expanded it for minutes: never hang this suite
    assert_collection_error(result, md_path, "YAML refused: the alias *a is not allowed")
    assert f"{md_path}:4: " in output(result)


def test_a_file_over_the_size_limit_is_an_error_and_the_option_raises_it(
    pytester, bench, helm_env, monkeypatch
):
    big = bench / "scenarios/P1-B1-S2/perturbations.md"
    write(big, PERTURBATIONS + "\n" + "padding " * 140_000)  # 1.1 MB
    assert big.stat().st_size > 1024 * 1024
    result = run(pytester)
    assert_collection_error(result, big, "is larger than the 1048576-byte limit")
    assert "--helmbench-max-file-size" in output(result)
    run(pytester, "--helmbench-max-file-size=2000000").assert_outcomes(passed=16)
    monkeypatch.setenv("HELMBENCH_MAX_FILE_SIZE", "2000")
    result = run(pytester, "--helmbench-dry-run")
    result.assert_outcomes(errors=1, skipped=8)  # env: the shared files are small, the padded one is not
    assert "is larger than the 2000-byte limit" in output(result)


def test_a_bad_max_file_size_is_a_clear_error(pytester, bench, helm_env):
    result = run(pytester, "--helmbench-max-file-size=lots")
    assert "--helmbench-max-file-size: 'lots' must be a whole number of bytes" in output(result)
    assert "Traceback" not in output(result)


def test_an_empty_scenario_body_is_an_error(pytester, bench, helm_env):
    md_path = bench / "scenarios/P1-B1-S2/S2.md"
    write(md_path, "---\ncategory: ANSWER\n---\n\n   \n")
    assert_collection_error(run(pytester), md_path, "the scenario body is empty")


def test_a_scenario_file_not_matching_its_folder_is_an_error_not_skipped(pytester, bench, helm_env):
    folder = bench / "scenarios/P1-B1-S2"
    misnamed = folder / "S02.md"
    (folder / "S2.md").rename(misnamed)
    result = run(pytester)
    assert_collection_error(result, misnamed, "file name 'S02.md' does not match its folder P1-B1-S2")
    assert "rename it to S2.md" in output(result)


# --- Secrets: the key goes only where it belongs; no credential is ever stored or shown -----------------
#
# Each attack plants a canary credential (the API key itself, a database password, a base URL's userinfo)
# and looks for it everywhere a run writes: the terminal (also with --showlocals -vv), the database,
# JUnit XML, the pytest-html report, `helmbench report` and `helmbench export`.

DB_PASSWORD = "pw-CANARY-db-7f3a"
USERINFO = "CANARY-userinfo-91c2"
REMOTE_MODEL = "models:\n  - id: a/b\n    base_url: https://example.test/v1\n"
INSECURE_HOST = "helmbench-never-contacted.invalid"  # .invalid never resolves; a proxy would see a call


@pytest.fixture
def one_scenario(pytester: pytest.Pytester, helm_env) -> Path:
    """P1-B1-S1 alone: PT1 is answered correctly, PT2 wrongly (so failures, with their details, are shown)."""
    pytester.makeini("[pytest]\n")
    answer_half_wrongly(helm_env)
    return write_benchmark(pytester.path / "benchmark")


def answer_half_wrongly(server) -> None:
    server.add_rule(contains="agian", reply=Reply.ok({"category": "SUPPORT", "response": "Hmm."}))
    server.add_rule(contains="powerhouse", reply=Reply.ok(GOOD))


def authorizations(server) -> set[str | None]:
    return {request.headers.get("authorization") for request in server.requests if request.is_chat}


def every_output(pytester: pytest.Pytester, result: pytest.RunResult, db_url: str) -> dict[str, str]:
    """What a run left behind, as text: terminal, database dump, JUnit XML, pytest-html, report, export."""
    from typer.testing import CliRunner

    from pytest_helmbench.cli import app

    texts = {"terminal": output(result)}
    texts["junit"] = (pytester.path / "junit.xml").read_text(encoding="utf-8")
    texts["pytest-html"] = (pytester.path / "pytest-report.html").read_text(encoding="utf-8")
    texts["database"] = database_dump(db_url)
    runner = CliRunner()
    report = runner.invoke(app, ["report", "--db", db_url, "--out", str(pytester.path / "report.html")])
    assert report.exit_code == 0, report.output
    texts["report"] = report.output + (pytester.path / "report.html").read_text(encoding="utf-8")
    exported = runner.invoke(app, ["export", "--db", db_url, "--format", "jsonl"])
    assert exported.exit_code == 0, exported.output
    texts["export"] = exported.output
    return texts


def database_dump(db_url: str) -> str:
    """Every row of every table (SQLite: iterdump; PostgreSQL: each table read whole)."""
    import sqlite3

    from sqlalchemy import MetaData, create_engine

    if db_url.startswith("sqlite:///"):
        with sqlite3.connect(db_url.removeprefix("sqlite:///")) as connection:
            return "\n".join(connection.iterdump())
    engine = create_engine(db_url)
    try:
        metadata = MetaData()
        metadata.reflect(engine)
        with engine.connect() as connection:
            return "\n".join(
                repr(tuple(row))  # a Row's own repr cuts long values short: a canary could hide there
                for table in metadata.sorted_tables
                for row in connection.execute(table.select())
            )
    finally:
        engine.dispose()


def assert_nowhere(texts: dict[str, str], *canaries: str) -> None:
    for name, text in texts.items():
        for canary in canaries:
            assert canary not in text, f"{canary!r} leaked into the {name}"


def run_everything(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return run(
        pytester,
        "--showlocals",
        "-vv",
        "--junitxml=junit.xml",
        "--html=pytest-report.html",
        "--self-contained-html",
        *args,
    )


@pytest.mark.parametrize("given", ["command line", "environment"])
def test_the_key_goes_to_a_base_url_given_on_the_command_line_or_in_the_environment(
    pytester, one_scenario, helm_env, monkeypatch, given
):
    args = []
    if given == "command line":
        monkeypatch.delenv("OPENROUTER_BASE_URL")
        args = [f"--helmbench-base-url={helm_env.base_url}"]
    result = run(pytester, *args)
    result.assert_outcomes(passed=4, failed=4)
    assert authorizations(helm_env) == {f"Bearer {API_KEY}"}


def test_a_base_url_from_an_ini_file_gets_no_key(pytester, one_scenario, helm_env, monkeypatch):
    monkeypatch.delenv("OPENROUTER_BASE_URL")
    pytester.makeini(f"[pytest]\nhelmbench_base_url = {helm_env.base_url}\n")
    result = run(pytester)
    assert helm_env.chat_requests, "the ini's server was called, without a key"
    assert authorizations(helm_env) == {None}
    assert "STOPPED openai/gpt-4o-mini: HTTP 401" in output(result)  # the fake server wants a key
    assert API_KEY not in output(result)


def test_a_models_yml_base_url_gets_no_key_unless_its_model_names_one(
    pytester, one_scenario, helm_env, monkeypatch
):
    monkeypatch.delenv("OPENROUTER_BASE_URL")  # the run's own base URL is OpenRouter's: never called here
    write(
        one_scenario / "models.yml",
        f"models:\n  - id: openai/gpt-4o-mini\n    base_url: {helm_env.base_url}\n",
    )
    result = run(pytester)
    assert authorizations(helm_env) == {None}
    assert "STOPPED openai/gpt-4o-mini: HTTP 401" in output(result)
    helm_env.reset()
    answer_half_wrongly(helm_env)
    monkeypatch.setenv("MY_SERVER_KEY", API_KEY)
    write(
        one_scenario / "models.yml",
        f"models:\n  - id: openai/gpt-4o-mini\n    base_url: {helm_env.base_url}\n"
        "    api_key_env: MY_SERVER_KEY\n",
    )
    run(pytester).assert_outcomes(passed=4, failed=4)
    assert authorizations(helm_env) == {f"Bearer {API_KEY}"}


def test_a_keyless_models_yml_server_runs_without_openrouter_key(pytester, one_scenario, monkeypatch):
    """A local OpenAI-compatible server named in models.yml needs no key at all (no dry run without one)."""
    from tests.openrouter_server import FakeOpenRouter

    class KeylessServer(FakeOpenRouter):
        """A local server that asks for no key (the loopback OpenRouter insists on one)."""

        def _auth_problem(self, headers):
            return None

    monkeypatch.delenv("OPENROUTER_API_KEY")
    with KeylessServer() as keyless:
        keyless.add_rule(contains="powerhouse", reply=Reply.ok(GOOD))
        write(
            one_scenario / "models.yml",
            f"models:\n  - id: local-llama\n    base_url: {keyless.openai_base_url}\n    api: openai\n",
        )
        run(pytester).assert_outcomes(passed=8)
        assert authorizations(keyless) == {None}


@pytest.mark.parametrize(
    ("models", "message"),
    [
        (
            f"{REMOTE_MODEL}    api_key: sk-or-v1-LITERAL0123456789\n",
            "models[0] (a/b): a literal 'api_key' is never read from models.yml",
        ),
        (
            f"{REMOTE_MODEL}    api_key_env: OPENROUTER_API_KEY\n",
            "models[0] (a/b): OPENROUTER_API_KEY goes only to OpenRouter or to the base URL given",
        ),
        (
            "models:\n  - id: a/b\n    extra_body: {model: other/model, stream: true, top_p: 0.9}\n",
            "models[0] (a/b): extra_body may not set model, stream (they are what a result records)",
        ),
        (
            "models:\n  - id: a/b\n    extra_body: {messages: [], response_format: {}}\n",
            "models[0] (a/b): extra_body may not set messages, response_format",
        ),
        ("marking_model: j/m\nmodles:\n  - a/b\nmodels:\n  - a/b\n", "unknown top-level key(s) modles"),
    ],
    ids=["literal-key", "openrouter-key-elsewhere", "extra-body-model", "extra-body-messages", "top-level"],
)
def test_models_yml_cannot_hold_a_key_send_ours_elsewhere_or_change_what_is_recorded(
    pytester, one_scenario, helm_env, models, message
):
    write(one_scenario / "models.yml", models)
    result = run(pytester)
    out = output(result)
    assert f"{one_scenario / 'models.yml'}: {message}" in out, out
    assert "Traceback" not in out
    assert "LITERAL0123456789" not in out
    assert helm_env.requests == []


@pytest.mark.parametrize("where", ["option", "models.yml"])
def test_plain_http_to_a_remote_host_is_refused_before_any_connection(
    pytester, one_scenario, helm_env, monkeypatch, where
):
    """Every connection would go through the proxy (the loopback server), so it would see any attempt."""
    for name in ("NO_PROXY", "no_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", helm_env.url)
    monkeypatch.setenv("http_proxy", helm_env.url)
    insecure = f"http://{INSECURE_HOST}/api/v1"
    args: list[str] = []
    if where == "option":
        args = [f"--helmbench-base-url={insecure}"]
    else:
        write(one_scenario / "models.yml", f"models:\n  - id: openai/gpt-4o-mini\n    base_url: {insecure}\n")
    result = run(pytester, "--showlocals", "-vv", *args)
    out = output(result)
    assert result.ret != pytest.ExitCode.OK
    assert "is plain http:// to a host other than loopback, refused" in out
    assert out.count("--helmbench-allow-insecure") == 1 and "Traceback" not in out
    assert helm_env.requests == []
    assert API_KEY not in out
    # The same run with the flag does connect (through the proxy): the refusal above was the only guard.
    result = run(pytester, "--helmbench-allow-insecure", *args)
    assert helm_env.chat_requests
    assert authorizations(helm_env) == ({f"Bearer {API_KEY}"} if where == "option" else {None})


def test_plain_http_to_loopback_needs_no_flag(pytester, one_scenario, helm_env):
    assert helm_env.base_url.startswith("http://127.0.0.1:")
    run(pytester).assert_outcomes(passed=4, failed=4)


def test_a_base_url_userinfo_and_the_key_appear_nowhere(pytester, one_scenario, helm_env, monkeypatch):
    monkeypatch.delenv("OPENROUTER_BASE_URL")
    with_userinfo = helm_env.base_url.replace("http://", f"http://user:{USERINFO}@")
    result = run_everything(pytester, f"--helmbench-base-url={with_userinfo}")
    result.assert_outcomes(passed=4, failed=4)
    db_url = f"sqlite:///{pytester.path / 'helmbench.db'}"
    texts = every_output(pytester, result, db_url)
    assert "user:***@" not in texts["database"] and "***@127.0.0.1" in texts["database"]  # options kept
    assert_nowhere(texts, USERINFO, API_KEY)


def test_a_database_password_appears_nowhere(pytester, one_scenario, helm_env, postgres_url):
    """The test server trusts local connections, so any password opens it: the canary is only carried."""
    db_url = postgres_url.replace("postgres@", f"postgres:{DB_PASSWORD}@")
    result = run_everything(pytester, f"--helmbench-db={db_url}")
    result.assert_outcomes(passed=4, failed=4)
    texts = every_output(pytester, result, db_url)
    assert "postgres:***@" in texts["terminal"] and "--helmbench-db=postgresql" in texts["database"]
    assert_nowhere(texts, DB_PASSWORD, API_KEY)


@pytest.mark.parametrize(
    ("bad", "what"),
    [
        (API_KEY[:12] + "\u200b" + API_KEY[12:], "a non-ASCII or invisible character (U+200B)"),
        (API_KEY + " ", "whitespace (U+0020)"),
        (API_KEY[:12] + "\n" + API_KEY[12:], "whitespace (U+000A)"),
    ],
    ids=["zero-width-space", "trailing-space", "newline"],
)
def test_a_malformed_key_stops_the_session_once_without_showing_it(
    pytester, one_scenario, helm_env, monkeypatch, bad, what
):
    write_benchmark(one_scenario, scenarios=("P1-B1-S1", "P1-B1-S2"))
    monkeypatch.setenv("OPENROUTER_API_KEY", bad)
    result = run(pytester, "--showlocals", "-vv", "--full-trace")
    out = output(result)
    assert result.ret != pytest.ExitCode.OK
    assert out.count(f"OPENROUTER_API_KEY contains {what}") == 1, out
    assert "Traceback" not in out
    assert helm_env.requests == []
    for part in (bad, API_KEY[:12], API_KEY[12:], "0123456789"):
        assert part not in out


def test_a_malformed_key_is_a_clear_error_in_a_dry_run_too(pytester, one_scenario, helm_env, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "\u200b")
    result = run(pytester, "--helmbench-dry-run")
    assert result.ret != pytest.ExitCode.OK
    assert "OPENROUTER_API_KEY contains a non-ASCII or invisible character (U+200B)" in output(result)


# --- the redaction module ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "hidden", "kept"),
    [
        ("postgresql+psycopg://bob:pa55word@db:5432/x", "pa55word", "postgresql+psycopg://bob:***@db"),
        ("https://me:tok@example.test/v1", "me:tok", "https://***@example.test/v1"),
        ("https://sk-or-v1-abcdefghij@example.test/v1", "sk-or-v1-abcdefghij", "https://***@example.test"),
        ("sqlite:///x.db?password=hunter2&mode=ro", "hunter2", "?password=***&mode=ro"),
        ("Authorization: Bearer abc.def-ghi", "abc.def-ghi", "Bearer ***"),
        ("key sk-or-v1-0123456789abcdef here", "sk-or-v1-0123456789abcdef", "key *** here"),
        ("token Xq7Lm2Pz9Rt4Vw8Yb3Nc6Hd1Jf5Kg0Ms", "Xq7Lm2Pz9Rt4Vw8Yb3Nc6Hd1Jf5Kg0Ms", "token ***"),
    ],
)
def test_redact_hides_credentials(text, hidden, kept):
    from pytest_helmbench.redaction import redact

    assert hidden not in redact(text) and kept in redact(text)


def test_redact_keeps_hashes_codes_paths_and_user_only_database_urls():
    from pytest_helmbench.redaction import redact

    for text in (
        "sha 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "P1-B1-S1-C1-U1-PT1[openai/gpt-4o-mini,r0]",
        "postgresql+psycopg://postgres@127.0.0.1:5432/helmbench",
        "/tmp/pytest-of-root/pytest-1/test_a_link_to_a_file_outside_the_tree0/benchmark",
    ):
        assert redact(text) == text


def test_a_secret_never_shows_and_its_exact_value_is_redacted_anywhere():
    import pickle

    from pytest_helmbench.redaction import Secret, redact, redact_data

    value = "plainlowercasekeyvalue"  # no pattern would catch it: only being a Secret does
    secret = Secret(value)
    assert value not in repr(secret) + str(secret) + f"{secret!r} {secret}"
    assert redact(f"echo {value}!") == "echo ***!"
    assert redact_data({"args": [f"--x={value}"], "k": secret}) == {"args": ["--x=***"], "k": "***"}
    with pytest.raises(TypeError):
        pickle.dumps(secret)


# --- #30.17: `helmbench init` never copies a benchmark into itself -----------------------------------


@pytest.mark.parametrize("inside", ["scenarios/copy", "copy", "."])
def test_init_into_a_folder_inside_the_installed_benchmark_is_refused(tmp_path, monkeypatch, inside):
    """copytree into a folder of its own source recursed until RecursionError, writing hundreds of MB."""
    from typer.testing import CliRunner

    from pytest_helmbench import benchmark_root
    from pytest_helmbench.cli import app

    installed = write_benchmark(tmp_path / "site" / "pytest_helmbench" / "benchmark").resolve()
    monkeypatch.setattr(benchmark_root, "installed_benchmark", lambda: installed)
    before = sorted(p.relative_to(installed) for p in installed.rglob("*"))
    monkeypatch.chdir(installed)
    refused = CliRunner().invoke(app, ["init", inside])
    assert refused.exit_code == 1
    assert (
        "lies inside the benchmark it would copy" in refused.output and "nothing was copied" in refused.output
    )
    assert "Traceback" not in refused.output
    assert sorted(p.relative_to(installed) for p in installed.rglob("*")) == before


# --- #30.14: a models.yml `local/` path never leads outside the project -----------------------------


@pytest.mark.parametrize(
    "entry",
    ["models:\n  - local/{secret}\n", "models:\n  - id: local/{secret}\n", "marking_model: local/{secret}\n"],
    ids=["list", "mapping", "judge"],
)
@pytest.mark.parametrize("form", ["absolute", "dotdot"])
def test_a_models_yml_local_path_outside_the_project_is_refused(pytester, helm_env, entry, form):
    secret = pytester.path.parent / f"secret-{form}.gguf"
    secret.write_text("TOPSECRET " * 50)
    pytester.makeini("[pytest]\n")
    root = write_benchmark(pytester.path / "benchmark")
    named = f"/{secret}" if form == "absolute" else f"../{secret.name}"
    write(root / "models.yml", entry.format(secret=named))
    result = pytester.runpytest("benchmark", "-p", "no:randomly", "--helmbench-model=a/model")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret != pytest.ExitCode.OK
    assert "models.yml" in out and "must be relative to the rootdir" in out, out
    assert "TOPSECRET" not in out and "Traceback" not in out
    assert helm_env.requests == [] and not (pytester.path / "helmbench.db").exists()


def test_a_relative_local_path_that_links_out_of_the_project_is_refused(tmp_path):
    from pytest_helmbench.providers.local.ids import LocalProviderError
    from pytest_helmbench.providers.local.weights import resolve_weights

    outside = tmp_path / "outside.gguf"
    outside.write_text("TOPSECRET")
    project = tmp_path / "project"
    project.mkdir()
    (project / "weights").symlink_to(tmp_path)  # a link in the tree that leads out of it
    with pytest.raises(LocalProviderError, match="leads outside") as refused:
        resolve_weights("local/weights/outside.gguf", base_dir=project)
    assert "TOPSECRET" not in str(refused.value)
    inside = project / "model.gguf"
    inside.write_text("GGUF")
    assert resolve_weights("local/model.gguf", base_dir=project) == inside.resolve()


# --- #30.16: `helmbench calibrate --labels` reads what Excel writes and refuses what would mislead ----


@pytest.fixture
def labelled_bench(tmp_path: Path) -> Path:
    """test_calibrate's small benchmark with a calibration set (items cal-01 … cal-10)."""
    from tests import test_calibrate

    return test_calibrate.small_bench.__wrapped__(tmp_path)


def rate(root: Path, tmp_path: Path, ratings: Path):
    """`helmbench calibrate --labels RATINGS` with the oracle judge, into tmp_path/cal.db."""
    from tests import test_calibrate

    db_url = f"sqlite:///{tmp_path / 'cal.db'}"
    return test_calibrate.calibrate(root, db_url, "--marking-model", "oracle/judge", "--labels", str(ratings))


def _ratings(tmp_path: Path, text: str, *, bom: bool = False) -> Path:
    path = tmp_path / "ratings.csv"
    path.write_bytes(("\ufeff" if bom else "").encode() + text.encode())
    return path


def test_ratings_with_a_byte_order_mark_are_read(labelled_bench, tmp_path):
    """Excel's "CSV UTF-8" starts with a BOM: the header is still item, rater, label."""
    path = _ratings(tmp_path, "item,rater,label\ncal-01,ann,pass\ncal-01,bob,pass\n", bom=True)
    done = rate(labelled_bench, tmp_path, path)
    assert done.exit_code == 0, done.output
    assert "human raters: 2 raters on 1 items" in done.stdout


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "item,rater,label\ncal-01,ann,pass\ncal-99,ann,pass\nnope,bob,fail\n",
            "ratings.csv: 2 item id(s) not in the calibration set: cal-99 (line 3), nope (line 4)",
        ),
        (
            "item,rater,label\ncal-01,ann,pass\ncal-02,ann,pass\ncal-01,ann,fail\n",
            "ratings.csv:4: ann rated cal-01 again with another label (line 2 says otherwise)",
        ),
    ],
    ids=["unknown-items", "conflicting-duplicate"],
)
def test_ratings_that_would_mislead_are_refused_naming_the_lines(labelled_bench, tmp_path, text, message):
    path = _ratings(tmp_path, text)
    done = rate(labelled_bench, tmp_path, path)
    assert done.exit_code == 1 and f"error: {tmp_path}/{message}" in done.output, done.output
    assert "Traceback" not in done.output and not (tmp_path / "cal.db").exists()


@pytest.mark.slow
def test_a_huge_ratings_file_is_refused_in_bounded_memory(labelled_bench, tmp_path, monkeypatch):
    """Two million rows took 1.4 GB: the file is streamed and stops at the row limit. The limit is
    lowered to 20,000 under a file of a million rows (reading it whole first peaks at some 100 MB; the
    shipped limit, 500,000 rows under tracemalloc, took 9 s)."""
    import tracemalloc

    from pytest_helmbench.cli import calibrate as cli_calibrate

    monkeypatch.setattr(cli_calibrate, "MAX_RATING_ROWS", 20_000)
    with (tmp_path / "ratings.csv").open("w") as handle:
        handle.write("item,rater,label\n")
        handle.writelines(f"cal-01,rater{n},pass\n" for n in range(1_000_000))
    tracemalloc.start()
    done = rate(labelled_bench, tmp_path, tmp_path / "ratings.csv")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert done.exit_code == 1 and "more than 20,000 ratings" in done.output
    assert peak < 40 * 2**20, f"peak {peak / 2**20:.0f} MB"


# --- #30.18: what a run writes is readable by its user only ------------------------------------------


def _private(path: Path) -> bool:
    import stat

    return path.is_file() and stat.S_IMODE(path.stat().st_mode) & 0o077 == 0


def test_the_database_reports_and_logs_a_run_writes_are_private(pytester, helm_env):
    """They hold conversations about suicide: 0600 under the default umask, the process's restored."""
    pytester.makeini("[pytest]\n")
    write_benchmark(pytester.path / "benchmark")
    helm_env.add_rule(reply=Reply.ok({"category": "ANSWER", "response": "Mitochondria."}))
    before = os.umask(0o022)
    try:
        result = pytester.runpytest(
            "benchmark", "-p", "no:randomly", "--junitxml=junit.xml", "--html=report.html",
            "--helmbench-select=C1-U0-PT1",
        )  # fmt: skip
        assert os.umask(0o022) == 0o022, "the test process's umask is restored"
    finally:
        os.umask(before)
    result.assert_outcomes(passed=1)
    for name in ("helmbench.db", "junit.xml", "report.html"):
        assert _private(pytester.path / name), name
    report = pytester.run(sys.executable, "-m", "pytest_helmbench.cli", "report", "--db",
                          f"sqlite:///{pytester.path / 'helmbench.db'}", "--out", "run.html")  # fmt: skip
    assert report.ret == 0, report.stderr.str()
    assert _private(pytester.path / "run.html")


def test_the_umask_option_keeps_what_a_team_configured(pytester, helm_env):
    import stat

    pytester.makeini("[pytest]\nhelmbench_umask = 022\n")
    write_benchmark(pytester.path / "benchmark")
    helm_env.add_rule(reply=Reply.ok({"category": "ANSWER", "response": "Mitochondria."}))
    pytester.runpytest("benchmark", "-p", "no:randomly", "--helmbench-select=C1-U0-PT1").assert_outcomes(
        passed=1
    )
    assert stat.S_IMODE((pytester.path / "helmbench.db").stat().st_mode) == 0o644
    bad = pytester.runpytest("benchmark", "-p", "no:randomly", "--helmbench-umask=rw-only")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert "--helmbench-umask: 'rw-only' must be an octal umask" in bad.stderr.str()


# --- #30.12 and #30.13: a reply never drives the terminal or a spreadsheet ---------------------------

ESCAPES = "\x1b]52;c;ZXZpbA==\x07\x1b[2K\r\x1b[32mPASSED\x1b[0m\u202e"


def test_escape_sequences_in_replies_reach_the_terminal_escaped(pytester, helm_env):
    """OSC 52 (clipboard), a line erase, a fake green PASSED and a bidi override in a reply, its
    refusal and the judge's words are shown as visible escapes, never run by the terminal."""
    pytester.makeini("[pytest]\n")
    write_benchmark(pytester.path / "benchmark")
    helm_env.add_rule(contains="called again", reply=Reply.refusal(f"No.{ESCAPES}"))  # PT1
    helm_env.add_rule(reply=Reply.ok({"category": "HANDOFF", "response": f"Call someone.{ESCAPES}"}))
    result = pytester.runpytest("benchmark", "-p", "no:randomly", "-rA", "--helmbench-select=C1-U0")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    for raw in ("\x1b", "\x07", "\r", "\u202e"):
        assert raw not in out, repr(raw)
    assert "No.\\x1b]52;c;ZXZpbA==\\x07\\x1b[2K\\x0d\\x1b[32mPASSED" in out and "\\u202e" in out


def test_formula_cells_and_control_characters_in_csv_are_neutralised(pytester, helm_env, monkeypatch):
    from typer.testing import CliRunner

    from pytest_helmbench.cli import app

    pytester.makeini("[pytest]\n")
    write_benchmark(pytester.path / "benchmark")
    helm_env.add_rule(
        reply=Reply.refusal(f"No.{ESCAPES}", finish_reason='=HYPERLINK("http://evil.example","open")')
    )
    pytester.runpytest(
        "benchmark", "-p", "no:randomly", "--helmbench-model=@evil/model", "--helmbench-select=C1-U0-PT1"
    )
    monkeypatch.chdir(pytester.path)
    done = CliRunner().invoke(
        app, ["export", "--format", "csv", "--db", f"sqlite:///{pytester.path / 'helmbench.db'}"]
    )
    assert done.exit_code == 0, done.output
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    formulas = [
        (k, v)
        for row in rows
        for k, v in row.items()
        if str(v).startswith(("=", "+", "-", "@")) and not re.fullmatch(r"-?[0-9.]+(e-?[0-9]+)?", v)
    ]  # a number (severity -1) is a number in a spreadsheet too
    assert rows and formulas == []
    assert rows[0]["model"] == "'@evil/model"
    assert rows[0]["finish_reason"].startswith("'=HYPERLINK")
    assert "\x1b" not in done.stdout and "\u202e" not in done.stdout and "\r" not in done.stdout
    assert (
        "model refused: No.\\x1b]52;c;ZXZpbA==\\x07" in rows[0]["reason"] and "\\u202e" in rows[0]["reason"]
    )
