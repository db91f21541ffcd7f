"""The browse page's reads (workbench/browse.py) on a real judged run, SQLite and PostgreSQL: every
filter and page gives exactly the Results a plain join over every row gives, in id order, with the
right count; the search is a literal, case-insensitive substring; on SQLite the filters and the count
come from an index, not from the Results' rows; the runs page reads no Result for the unpriced calls."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import text
from sqlmodel import Session

from pytest_helmbench.storage.engine import make_engine, upgrade
from pytest_helmbench.storage.queries import load_runs
from pytest_helmbench.workbench import browse, server
from tests.workbench_helpers import judged_run, plant_reply, sql

pytestmark = pytest.mark.e2e  # starts pytest sessions (the oracle run): out of `dev.py test --quick`

ALL_ROWS = """
select r.id, r.run_id, llm.model_id, r.case_code, b.full_code, c.code, uc.code,
       coalesce(r.layout, 'seed'), r.status, s.critical, r.raw_response
from result r
join evaluationrun e on e.id = r.run_id join llm on llm.id = e.llm_id
join scenario s on s.id = r.scenario_id join behaviour b on b.id = s.behaviour_id
join condition c on c.id = r.condition_id left join usercontext uc on uc.id = r.user_context_id
order by r.id
"""


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.e2e)])
def judged(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Two oracle runs of 12 sampled cases, three replies planted for the search (one database of each
    kind for the module: the runs take most of its time)."""
    folder = tmp_path_factory.mktemp("browse")
    if request.param == "sqlite":
        db_url = f"sqlite:///{folder / 'results.db'}"
    else:
        db_url = request.getfixturevalue("postgres_server").new_database()
    judged_run(db_url, folder, sample=12)
    ids = [row[0] for row in sql(db_url, "select id from result order by id")]
    plant_reply(db_url, ids[0], "Please call the ZQX-Crisis-LINE now")
    plant_reply(db_url, ids[1], "a reply with 100% of the _care_ asked")
    plant_reply(db_url, ids[2], "a reply with 100 percent of the xcarex asked")
    yield db_url


def _expected(db_url: str, keep: dict[str, object]) -> list[int]:
    """The ids a plain join over every Result keeps (the oracle of the test)."""
    names = ("id", "run", "model", "case", "behaviour", "condition", "user_context", "layout", "verdict")
    found = []
    for row in sql(db_url, ALL_ROWS):
        values = dict(zip(names, row[:9], strict=True)) | {"critical": bool(row[9]), "reply": row[10] or ""}
        if all(test(values) for test in keep.values()):  # type: ignore[operator]
            found.append(int(row[0]))
    return found


def _page(db_url: str, filters: dict[str, str], page: int = 1) -> tuple[list[browse.CaseRow], int]:
    engine = make_engine(db_url)
    try:
        with Session(engine) as session:
            return browse.case_page(session, browse.Filters(filters), page)
    finally:
        engine.dispose()


def test_every_filter_and_page_gives_the_rows_a_plain_join_gives(judged, monkeypatch):
    monkeypatch.setattr(browse, "PAGE_SIZE", 5)
    rows = sql(judged, ALL_ROWS)
    run, model, behaviour = rows[-1][1], rows[-1][2], rows[0][4]
    condition, verdict = rows[3][5], rows[3][8]
    cases = {
        "nothing": ({}, {}),
        "run": ({"run": str(run)}, {"run": lambda v: v["run"] == run}),
        "model and verdict": (
            {"model": model, "verdict": "failed"},
            {"m": lambda v: v["model"] == model, "v": lambda v: v["verdict"] == "failed"},
        ),
        "behaviour": ({"behaviour": behaviour}, {"b": lambda v: v["behaviour"] == behaviour}),
        "condition and verdict": (
            {"condition": condition, "verdict": verdict},
            {"c": lambda v: v["condition"] == condition, "v": lambda v: v["verdict"] == verdict},
        ),
        "seed layout": ({"layout": "seed"}, {"l": lambda v: v["layout"] == "seed"}),
        "critical": ({"critical": "yes"}, {"c": lambda v: v["critical"]}),
        "search": ({"q": "crisis"}, {"q": lambda v: "crisis" in v["reply"].lower()}),
        "search, any case": ({"q": "ZQX-crisis"}, {"q": lambda v: "zqx-crisis" in v["reply"].lower()}),
    }
    for name, (filters, keep) in cases.items():
        wanted = _expected(judged, keep)
        assert wanted or name in ("critical", "model and verdict"), name  # the run has rows for each
        shown: list[int] = []
        for page in range(1, len(wanted) // 5 + 3):
            found, total = _page(judged, filters, page)
            assert total == len(wanted), name
            assert len(found) <= 5
            shown += [row.result_id for row in found]
        assert shown == wanted, name
    first, _ = _page(judged, {})
    model_of = {row[0]: (row[2], row[3], row[7], row[8]) for row in rows}
    assert all(model_of[r.result_id] == (r.model, r.case_code, r.layout, r.status) for r in first)


def test_the_search_is_a_literal_case_insensitive_substring(judged):
    ids = [row[0] for row in sql(judged, "select id from result order by id")]
    assert [r.result_id for r in _page(judged, {"q": "zqx-crisis-line"})[0]] == [ids[0]]
    assert [r.result_id for r in _page(judged, {"q": "100%"})[0]] == [ids[1]]  # % is no wildcard
    assert [r.result_id for r in _page(judged, {"q": "_care_"})[0]] == [ids[1]]  # nor is _
    assert _page(judged, {"q": "zzz-no-such-reply"}) == ([], 0)
    assert _page(judged, {}, page=999) == ([], len(ids))


@pytest.mark.parametrize(
    "filters", [{}, {"run": "1", "verdict": "failed"}, {"layout": "seed"}, {"condition": "C1"}]
)
def test_on_sqlite_the_filters_and_the_count_read_an_index_not_the_rows(tmp_path, filters):
    url = f"sqlite:///{tmp_path / 'results.db'}"
    upgrade(url)  # a new database: the schema the models build, the index of migration 0011 included
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            query = browse._matching(browse.Filters(filters), "sqlite")
            compiled = query.compile(engine, compile_kwargs={"literal_binds": True})
            plan = [row[3] for row in connection.execute(text(f"explain query plan {compiled}"))]
    finally:
        engine.dispose()
    on_result = [step for step in plan if step.startswith(("SCAN result", "SEARCH result"))]
    assert on_result and all("COVERING INDEX" in step for step in on_result), plan


def test_the_runs_page_can_leave_out_the_unpriced_count(judged):
    sql(judged, "update result set cost_usd = null, latency_ms = 1.0, cached = false")
    engine = make_engine(judged)
    try:
        with Session(engine) as session:
            counted = load_runs(session)
            listed = load_runs(session, unpriced_counts=False)
    finally:
        engine.dispose()
    assert [r.id for r in counted] == [r.id for r in listed]
    assert any(r.unpriced.model_calls for r in counted)
    assert not any(r.unpriced.model_calls for r in listed)


def test_on_sqlite_the_servers_connections_read_through_a_memory_map(tmp_path):
    url = f"sqlite:///{tmp_path / 'results.db'}"
    upgrade(url)
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            connection.execute(text("select 1"))  # a pooled connection made before: closed by the call
        server.map_sqlite_pages(engine)
        with engine.connect() as connection:
            mapped = connection.execute(text("pragma mmap_size")).scalar_one()
    finally:
        engine.dispose()
    assert mapped == server.MMAP_BYTES
