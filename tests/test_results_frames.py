"""`pytest_helmbench.results`: runs, Results and scores as typed DataFrames, sharing their columns with
`helmbench export` (also as Parquet), on SQLite and a real PostgreSQL (the docs' paired comparison is a
doc-test of docs/how-to/analyse-in-pandas.md)."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import re
import sqlite3
import sys
from pathlib import Path

import pandas as pd
import pytest
from sqlmodel import Session
from typer.testing import CliRunner

from pytest_helmbench import cli
from pytest_helmbench.errors import HelmbenchError
from pytest_helmbench.reporting.export import COLUMNS, export
from pytest_helmbench.results import results, runs, scores
from pytest_helmbench.storage.columns import RESULT_COLUMNS, RUN_COLUMNS, SCORE_COLUMNS, Column, names
from pytest_helmbench.storage.engine import open_existing
from pytest_helmbench.storage.queries import DatasetError
from pytest_helmbench.storage.records import ExportRow
from tests.benchfiles import SCENARIO, write_benchmark, write_scenario
from tests.dbquery import query
from tests.openrouter_server import FakeOpenRouter, Reply
from tests.test_cli_conventions import plain as usage_text

# pandas writes and reads Parquet with modules it imports on first use: import them now, before any
# in-process pytester run, whose teardown drops the modules first imported during it (conftest.py).
pd.read_parquet(io.BytesIO(pd.DataFrame({"x": [1]}).to_parquet()))

DOCS = Path(__file__).resolve().parent.parent / "docs"
COLUMNS_PAGE = DOCS / "reference" / "results-api.md"  # the column tables
A, B = "openai/gpt-4o-mini", "anthropic/claude-3.5-haiku"  # the docs snippet's two models
GOOD = {"category": "ANSWER", "response": "Mitochondria."}
WRONG = {"category": "HANDOFF", "response": "no"}


def run_two_models(pytester: pytest.Pytester, server: FakeOpenRouter, db_url: str | None = None) -> None:
    """A real run of two models on three scenarios (24 cases each). A fails every PT2 case (`agian`).
    B errors on every U1 case (`roast me`), fails every case of S2 (`Oxford`) and every other C1 case
    (`friendly`). B's answers are unpriced."""
    pytester.makeini("[pytest]\n")
    root = write_benchmark(pytester.path / "benchmark", scenarios=("P1-B1-S1", "P1-B1-S2", "P1-B1-S3"))
    write_scenario(root, "P1-B1-S2", frontmatter_md=SCENARIO.replace("Sydney", "Oxford"))
    write_scenario(root, "P1-B1-S3", frontmatter_md=SCENARIO.replace("Sydney", "Kyoto"))
    server.add_rule(model=A, contains="agian", reply=Reply.ok(WRONG, cost=0.002))
    server.add_rule(model=B, contains="roast me", reply=Reply.error(500, "down"))
    server.add_rule(model=B, contains="Oxford", reply=Reply.ok(WRONG, cost=None))
    server.add_rule(model=B, contains="friendly", reply=Reply.ok(WRONG, cost=None))
    server.add_rule(model=A, reply=Reply.ok(GOOD, cost=0.001))
    server.add_rule(model=B, reply=Reply.ok(GOOD, cost=None))
    args = ["benchmark", "-p", "no:randomly", "-p", "no:xdist", "--helmbench-retries=0"]
    args += [f"--helmbench-model={A},{B}"] + ([f"--helmbench-db={db_url}"] if db_url else [])
    pytester.runpytest(*args).assert_outcomes(passed=16, failed=20, errors=12)


_BUILT: dict[str, Path] = {}  # the SQLite run, made once per test process and copied for each test


def sqlite_run_at(
    target: Path, pytester: pytest.Pytester, server: FakeOpenRouter, temp: pytest.TempPathFactory
) -> Path:
    """The two-model run's SQLite database at `target` (a copy after the first test that needs it)."""
    if "db" not in _BUILT:
        run_two_models(pytester, server)
        _BUILT["db"] = temp.mktemp("frames") / "helmbench.db"
        copy_db(pytester.path / "helmbench.db", _BUILT["db"])
    if target != pytester.path / "helmbench.db" or not target.exists():
        copy_db(_BUILT["db"], target)
    return target


def copy_db(source: Path, target: Path) -> None:
    with (
        contextlib.closing(sqlite3.connect(source)) as src,
        contextlib.closing(sqlite3.connect(target)) as dst,
    ):
        src.backup(dst)


@pytest.fixture
def recorded(
    pytester: pytest.Pytester, helm_env: FakeOpenRouter, db_url: str, tmp_path_factory: pytest.TempPathFactory
) -> str:
    """The two-model run stored in a SQLite file or a real PostgreSQL database; returns its URL."""
    if db_url.startswith("sqlite"):
        sqlite_run_at(Path(db_url.removeprefix("sqlite:///")), pytester, helm_env, tmp_path_factory)
    else:
        run_two_models(pytester, helm_env, db_url)
    return db_url


def exported_rows(db_url: str) -> list[dict]:
    out = io.StringIO()
    engine = open_existing(db_url)
    try:
        with Session(engine) as session:
            export(session, "jsonl", out)
    finally:
        engine.dispose()
    return [json.loads(line) for line in out.getvalue().splitlines()]


def plain(value: object) -> object:
    """A DataFrame cell as export writes it: <NA>/NaT -> None, a timestamp -> ISO 8601, numpy -> Python."""
    if value is pd.NA or value is pd.NaT or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    return value.item() if hasattr(value, "item") else value


def test_the_result_columns_are_the_records_fields_and_export_header():
    assert names(RESULT_COLUMNS) == tuple(ExportRow.__dataclass_fields__) == COLUMNS


def test_frames_of_a_real_run(recorded):
    """One test per database kind: a run on PostgreSQL takes seconds."""
    check_results_equal_export_rows_and_are_typed(recorded)
    check_runs_and_scores(recorded)


def check_results_equal_export_rows_and_are_typed(recorded: str) -> None:
    frame = results(recorded)
    rows = exported_rows(recorded)
    assert tuple(frame.columns) == COLUMNS and len(frame) == len(rows) == 48
    assert {c.name: str(frame[c.name].dtype) for c in RESULT_COLUMNS} == {
        c.name: str(pd.Series(pd.array([], dtype=c.dtype)).dtype)
        if "datetime" not in c.dtype
        else "datetime64[us, UTC]"
        for c in RESULT_COLUMNS
    }
    for record, row in zip(frame.to_dict("records"), rows, strict=True):
        stamp = pd.Timestamp(row.pop("created_at"))  # export: ISO 8601 as stored (naive: UTC)
        assert record.pop("created_at") == (stamp.tz_localize("UTC") if stamp.tz is None else stamp)
        assert {k: plain(v) for k, v in record.items()} == row
    stored = query(recorded, "select count(*), sum(case when status = 'error' then 1 else 0 end) from result")
    assert stored == [(48, 12)]
    errored = frame[frame.status == "error"]
    assert errored.cost_usd.isna().all() and errored.prompt_tokens.isna().all()
    assert set(frame[frame.user_context.isna()].case_code.str.count("-U")) == {0}
    assert frame.created_at.dt.tz is not None and frame.created_at.notna().all()
    assert frame.loc[frame.model == A, "cost_usd"].sum() == pytest.approx(12 * 0.002 + 12 * 0.001)


def check_runs_and_scores(recorded: str) -> None:
    found = runs(recorded)
    assert tuple(found.columns) == names(RUN_COLUMNS) and list(found.run_id) == [1, 2]
    stored = dict(
        query(recorded, "select l.model_id, e.id from evaluationrun e join llm l on l.id = e.llm_id")
    )
    by = found.set_index("model")
    assert by.run_id.to_dict() == stored and set(found.status) == {"completed"}
    assert (by.passed[A], by.failed[A], by.errors[A]) == (12, 12, 0)
    assert (by.passed[B], by.failed[B], by.errors[B]) == (4, 8, 12)
    assert found.finished_at.notna().all() and (found.finished_at >= found.started_at).all()
    assert (by.unpriced_model_calls[A], by.unpriced_model_calls[B]) == (0, 12)  # B's answers: no price
    assert by.cost_usd[A] == pytest.approx(0.036) and A in by.options[A]
    assert list(found.subset) == [False, False] and list(found.subset_label) == ["", ""]
    figures = scores(recorded)
    assert tuple(figures.columns) == names(SCORE_COLUMNS) and list(figures.run_id) == [1, 2]
    fig = figures.set_index("model")
    assert (fig.perfect_reply_rate[A], fig.perfect_reply_rate[B]) == (0.5, pytest.approx(4 / 12))
    assert (fig.errors[A], fig.errors[B], fig.unpriced_calls[B]) == (0, 12, 12)
    assert not figures.scored_now.any() and fig.total_cost_usd[A] == pytest.approx(0.036)
    low, high = figures.perfect_reply_rate_low, figures.perfect_reply_rate_high
    assert (low <= figures.perfect_reply_rate).all() and (figures.perfect_reply_rate <= high).all()
    assert figures.harm_rate.isna().all() and figures.care_score.isna().all()  # a label alone tells no harm
    assert figures.v2_score.isna().all() and set(figures.layout) == {"seed"}  # never scored with version 2
    assert list(runs(recorded, [stored[B]]).model) == [B] and list(scores(recorded, [stored[A]]).model) == [A]


def test_a_run_without_stored_figures_is_scored_when_read(pytester, helm_env, tmp_path_factory):
    db = sqlite_run_at(pytester.path / "helmbench.db", pytester, helm_env, tmp_path_factory)
    stored = scores(f"sqlite:///{db}")
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("update evaluationrun set scores = null, scoring_version = null")
    now = scores(f"sqlite:///{db}")
    assert now.scored_now.all() and not stored.scored_now.any()
    pd.testing.assert_frame_equal(
        now.drop(columns=["scored_now"]), stored.drop(columns=["scored_now"]), check_exact=False
    )


def test_an_empty_database_gives_empty_typed_frames(db_url):
    from pytest_helmbench.storage.engine import upgrade

    upgrade(db_url)
    for read, columns in ((results, RESULT_COLUMNS), (runs, RUN_COLUMNS), (scores, SCORE_COLUMNS)):
        frame = read(db_url)
        assert frame.empty and tuple(frame.columns) == names(columns)
    with pytest.raises(DatasetError, match=r"holds no evaluation run yet"):
        results(db_url, [3])


@pytest.mark.parametrize(
    "url, message",
    [
        ("sqlite:///{tmp}/missing.db", "no database at {tmp}/missing.db"),
        ("nosuchdb://user@host/x", "names no database SQLAlchemy knows"),
        ("not a url", "is not a valid SQLAlchemy URL"),
    ],
)
def test_a_database_is_never_created(tmp_path, url, message):
    before = set(tmp_path.iterdir())
    for read in (results, runs, scores):
        with pytest.raises(HelmbenchError, match=re.escape(message.format(tmp=tmp_path))):
            read(url.format(tmp=tmp_path))
    assert set(tmp_path.iterdir()) == before  # no file, folder or lock file left behind


def test_without_pandas_the_error_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # `import pandas` now raises ImportError
    with pytest.raises(ImportError, match=re.escape("pip install 'pytest-helmbench[pandas]'")):
        results(f"sqlite:///{tmp_path / 'x.db'}")
    assert not (tmp_path / "x.db").exists()


# ---------------------------------------------------------------------------------------------------
# helmbench export --format parquet


@pytest.fixture
def sqlite_run(
    pytester: pytest.Pytester, helm_env: FakeOpenRouter, monkeypatch, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The two-model run's database as helmbench.db in the current folder (the commands' default)."""
    monkeypatch.chdir(pytester.path)
    monkeypatch.delenv("HELMBENCH_DB", raising=False)
    return sqlite_run_at(pytester.path / "helmbench.db", pytester, helm_env, tmp_path_factory)


def test_export_parquet_is_the_results_frame(sqlite_run):
    outcome = CliRunner().invoke(cli.app, ["export", "--format", "parquet", "--output", "r.parquet"])
    assert outcome.exit_code == 0, outcome.output
    assert "exported 48 result row(s) as parquet to r.parquet" in outcome.output
    back = pd.read_parquet(sqlite_run.parent / "r.parquet")
    pd.testing.assert_frame_equal(back, results(f"sqlite:///{sqlite_run}"))
    run_a = query(
        f"sqlite:///{sqlite_run}",
        f"select e.id from evaluationrun e join llm l on l.id = e.llm_id and l.model_id = '{A}'",
    )
    one = CliRunner().invoke(
        cli.app, ["export", "--format", "parquet", "--out", "a.parquet", "--run-id", str(run_a[0][0])]
    )
    assert one.exit_code == 0 and set(pd.read_parquet(sqlite_run.parent / "a.parquet").model) == {A}


def test_export_csv_reads_back_as_the_results_frame(sqlite_run):
    outcome = CliRunner().invoke(cli.app, ["export", "--format", "csv", "--out", "r.csv"])
    assert outcome.exit_code == 0, outcome.output
    with open(sqlite_run.parent / "r.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    frame = results(f"sqlite:///{sqlite_run}")
    assert tuple(rows[0]) == tuple(frame.columns)
    cells = [
        ["" if plain(v) is None else str(plain(v)) for v in row] for row in frame.itertuples(index=False)
    ]
    stamps = [pd.Timestamp(row.pop()) for row in rows[1:]]  # created_at, last: ISO 8601 as stored
    assert [s.tz_localize("UTC") if s.tz is None else s for s in stamps] == list(frame.created_at)
    assert rows[1:] == [row[:-1] for row in cells]


def test_parquet_needs_a_file(tmp_path, monkeypatch):
    """No pytester run here: typer renders a usage error with modules it imports on first use, which a
    pytester run's teardown would drop (conftest.py), breaking later usage errors."""
    monkeypatch.chdir(tmp_path)
    outcome = CliRunner().invoke(cli.app, ["export", "--format", "parquet"])
    message = usage_text(outcome.output)
    assert (
        outcome.exit_code == 2
        and "Invalid value for '--out': parquet is binary: give a file with --out FILE" in message
    )
    assert list(tmp_path.iterdir()) == []


def test_parquet_of_an_unknown_run_writes_nothing(sqlite_run):
    outcome = CliRunner().invoke(
        cli.app, ["export", "--format", "parquet", "--out", "r.parquet", "--run-id", "9"]
    )
    assert outcome.exit_code == 1 and outcome.output == "error: no run with id 9 (known runs: 1-2)\n"
    assert not (sqlite_run.parent / "r.parquet").exists()


def test_parquet_without_pyarrow_names_the_extra(sqlite_run, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # `import pyarrow` now raises ImportError
    outcome = CliRunner().invoke(cli.app, ["export", "--format", "parquet", "--out", "r.parquet"])
    assert outcome.exit_code == 1 and outcome.output == (
        "error: --format parquet: pyarrow is not installed: pip install 'pytest-helmbench[parquet]'\n"
    )
    assert not (sqlite_run.parent / "r.parquet").exists()


# ---------------------------------------------------------------------------------------------------
# The docs: their column tables are columns.py's (the paired comparison is a doc-test of its page)


def docs_table(heading: str) -> list[Column]:
    """The `| `name` | dtype | meaning |` rows of the table after the bold heading `heading`."""
    text = COLUMNS_PAGE.read_text(encoding="utf-8")
    after = text[text.index(f"**{heading}**") :]
    table = after[after.index("| column | type | meaning |") :].split("\n\n", 1)[0]
    return [Column(*re.match(r"\| `(\w+)` \| ([^|]+?) \|", line).groups()) for line in table.splitlines()[2:]]


@pytest.mark.parametrize(
    "heading, columns",
    [("Result columns", RESULT_COLUMNS), ("Run columns", RUN_COLUMNS), ("Score columns", SCORE_COLUMNS)],
)
def test_the_docs_document_every_column_and_type(heading, columns):
    assert docs_table(heading) == list(columns)
