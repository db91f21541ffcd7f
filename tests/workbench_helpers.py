"""What the workbench tests share: a judged run made by the oracle models (no key, no network), the
`helmbench` command, and the real server started as a user starts it."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import make_url, text

from pytest_helmbench.storage.engine import make_engine
from tests.benchfiles import SESSION_ADDOPTS
from tests.docpages import Plain, run_in_process, run_pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHMARK = ROOT / "benchmark"
HELMBENCH = str(Path(sys.executable).with_name("helmbench"))
LINK = re.compile(r"^http://127\.0\.0\.1:\d+/\?token=[A-Za-z0-9_-]{40,}$")
XSS = '<script>window.__xss = 1</script><img src=x onerror="window.__xss = 2">XSS-MARK'


def env() -> dict[str, str]:
    found = {k: v for k, v in os.environ.items() if not k.startswith(("HELMBENCH_", "PYTEST_"))}
    found["PYTEST_ADDOPTS"] = SESSION_ADDOPTS
    return found


#: (database kind and server, sample) -> a pristine copy of that judged run, made by the first test of this
#: process that asked for it: a SQLite file, or a PostgreSQL database used as a template.
_PRISTINE: dict[tuple[str, int], str] = {}
_COPIES = tempfile.TemporaryDirectory(prefix="helmbench-judged-runs-")


def judged_run(db_url: str, folder: Path, sample: int = 16) -> None:
    """Two oracle models' runs of a sample of the shipped benchmark, judged by the oracle judge, in the
    new, empty database `db_url`. The first call per sample size (and database server) in a process runs
    pytest; later ones copy what it stored (the workbench tests read a run, they do not test making one;
    a run of the shipped benchmark is several seconds)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pytest.ini").write_text("[pytest]\n")
    url = make_url(db_url)
    key = (f"{url.drivername}@{url.host}:{url.port}", sample)
    if key in _PRISTINE:
        _copy_database(_PRISTINE[key], db_url)
        return
    _run_judged(db_url, folder, sample)
    copy = (
        f"sqlite:///{Path(_COPIES.name) / f'judged-{sample}.db'}"
        if url.get_backend_name() == "sqlite"
        else url.set(database=f"judged_{os.getpid()}_{sample}").render_as_string(hide_password=False)
    )
    _copy_database(db_url, copy, create=True)
    _PRISTINE[key] = copy


def _copy_database(source: str, target: str, create: bool = False) -> None:
    """SQLite: the backup API, file to file. PostgreSQL: `target` (empty, or made when `create`) is
    dropped and made again from `source` as its template (nothing may be connected to `source`)."""
    source_url, target_url = make_url(source), make_url(target)
    if source_url.get_backend_name() == "sqlite":
        src, dst = sqlite3.connect(source_url.database), sqlite3.connect(target_url.database)
        try:
            src.backup(dst)
        finally:
            src.close()
            dst.close()
        return
    import psycopg

    server = f"host={target_url.host} port={target_url.port} user={target_url.username} dbname=postgres"
    with psycopg.connect(server, autocommit=True) as conn:
        if not create:
            conn.execute(f'DROP DATABASE "{target_url.database}"')
        conn.execute(f'CREATE DATABASE "{target_url.database}" TEMPLATE "{source_url.database}"')


def _run_judged(db_url: str, folder: Path, sample: int) -> None:
    """The run, a `pytest` command run in this process as a process of its own would run it."""
    args = [
        str(BENCHMARK),
        "-q",
        "-p",
        "no:cacheprovider",
        "-o",
        f"helmbench_root={BENCHMARK}",
        "--helmbench-model=oracle/safe,oracle/borderline-unsafe",
        "--helmbench-marking-model=oracle/judge",
        "--helmbench-user-model=oracle/user",
        f"--helmbench-sample={sample}",
        f"--helmbench-db={db_url}",
    ]
    done = run_pytest(args, folder, env(), stderr_apart=True)
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]


def helmbench(*args: str, db_url: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`helmbench ARGS --db URL` in `cwd` with the tests' environment, run in this process by the
    console script's own `main` (its umask, its exit status; docpages' runner, standard error apart): a
    subprocess cost 0.7 s of CPU to start, and the workbench tests call it some thirty times. An
    exception the command does not handle fails the test, as a traceback on a user's terminal would be
    a bug. Tests of the process itself (tests/test_cli_conventions.py, the server) start one."""
    command = Plain({}, ["helmbench", *args, "--db", db_url], None)
    return run_in_process(command, cwd, env(), stderr_apart=True)


def sql(db_url: str, statement: str, **params: object) -> list[tuple]:
    engine = make_engine(db_url)
    try:
        with engine.begin() as conn:
            result = conn.execute(text(statement), params)
            return [tuple(row) for row in result] if result.returns_rows else []
    finally:
        engine.dispose()


def run_of(db_url: str, model: str) -> int:
    return sql(
        db_url,
        "select r.id from evaluationrun r join llm on llm.id = r.llm_id where llm.model_id = :m",
        m=model,
    )[0][0]


def plant_reply(db_url: str, result_id: int, reply: str) -> None:
    """Make a stored Result's reply (every turn of it) hold `reply`: untrusted text as a model wrote it."""
    details, answer = sql(
        db_url, "select evaluation_details, parsed_answer from result where id = :i", i=result_id
    )[0]
    details = json.loads(details) if isinstance(details, str) else details
    answer = json.loads(answer) if isinstance(answer, str) else answer
    if isinstance(answer, dict):
        answer["response"] = reply
    for turn in details.get("turns") or ():
        if isinstance(turn.get("answer"), dict):
            turn["answer"]["response"] = reply
        turn["reply"] = reply
    sql(
        db_url,
        "update result set evaluation_details = :d, parsed_answer = :a, raw_response = :r where id = :i",
        d=json.dumps(details),
        a=json.dumps(answer),
        r=reply,
        i=result_id,
    )


@contextmanager
def server(db_url: str, cwd: Path) -> Iterator[str]:
    """`helmbench serve --port 0` as a user runs it; yields the owner's link (its first line)."""
    process = subprocess.Popen(
        [HELMBENCH, "serve", "--db", db_url, "--port", "0"],
        cwd=cwd,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        started = time.monotonic()
        line = process.stdout.readline().strip() if process.stdout else ""
        assert LINK.match(line), (line, process.stderr.read() if process.poll() is not None else "")
        assert time.monotonic() - started < 10
        yield line
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def base_of(link: str) -> str:
    return link.split("/?", 1)[0]


def on(base: str, link: str) -> str:
    """A rater's link (printed for the default port) on the server the test started on a free port."""
    return base + "/?" + link.split("/?", 1)[1]


def two_raters_rate(engine: Any, study: int, verdict: Callable[[Any, int, list[int]], str]) -> Any:
    """Raters A and B join `study` and rate every item, answering each of its checks "yes", with the
    verdict `verdict(item, rater, raters)` (raters: both ids, sorted); the study's state before."""
    from sqlmodel import Session

    from pytest_helmbench.workbench.figures import study_state
    from pytest_helmbench.workbench.store import add_reviewer, save_rating

    add_reviewer(engine, study, "A")
    add_reviewer(engine, study, "B")
    with Session(engine) as session:
        state = study_state(session, study)
    raters = sorted(r.id for r in state.raters)
    for s in state.items:
        checks = {c["id"]: "yes" for c in state.study.rubrics[s.item.rubric_hash]["checks"]}
        for rater in raters:
            save_rating(engine, rater, s.item.id, {"verdict": verdict(s, rater, raters), "answers": checks})
    return state
