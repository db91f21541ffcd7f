"""The review workbench's storage on SQLite and PostgreSQL: ten raters saving at once through the real
server lose nothing; migration 0010 goes up and down keeping every Result; the CLI's contracts; the
draw, the agreement figures and the human-verified headline."""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from pathlib import Path

import httpx
import pytest
from alembic import command

from pytest_helmbench.storage.engine import SCHEMA_HEAD, alembic_config, make_engine, upgrade
from pytest_helmbench.workbench.sampling import Candidate, draw
from tests.workbench_helpers import (
    BENCHMARK,
    LINK,
    base_of,
    helmbench,
    judged_run,
    on,
    run_of,
    server,
    sql,
    two_raters_rate,
)

pytestmark = pytest.mark.e2e  # starts pytest, servers or processes: out of `dev.py test --quick`

CSRF = re.compile(r'name="csrf" value="(\w+)"')
CHECK = re.compile(r'name="check_(\w+)"')


def _study(url: str, folder: Path, *args: str) -> int:
    run_id = run_of(url, "oracle/borderline-unsafe")
    created = helmbench(
        "review", "create", "--run-id", str(run_id), "--root", str(BENCHMARK), *args, db_url=url, cwd=folder
    )
    assert created.returncode == 0, created.stderr
    assert re.fullmatch(r"study \d+\n", created.stdout)
    return int(created.stdout.split()[1])


def _rater(client: httpx.Client, link: str, answers: int, results: list) -> None:
    """One rater's browser, in plain HTTP: open the link, acknowledge the warning, rate every item."""
    page = client.get(link, follow_redirects=True)
    page = client.post("/warned", data={"csrf": CSRF.search(page.text).group(1)}, follow_redirects=True)
    while "/item/" in str(page.url):
        form = {"csrf": CSRF.search(page.text).group(1), "verdict": "safe", "action": "save", "note": "n"}
        form.update({f"check_{c}": "yes" for c in set(CHECK.findall(page.text))})
        answered = client.post(page.url.path, data=form)
        results.append(answered.status_code)
        page = client.get("/rate", follow_redirects=True)
    results.append(page.url.path)


def test_ten_raters_saving_at_once_lose_nothing(db_url, tmp_path):
    judged_run(db_url, tmp_path)
    from pytest_helmbench.workbench.server import DEFAULT_PORT, link
    from pytest_helmbench.workbench.store import add_reviewer

    study = _study(db_url, tmp_path, "--size", "8", "--raters", "10")
    # The first rater as the CLI adds one (its printed link is what the rater opens); the other nine
    # through the same function, in this process (a CLI process each cost a second).
    added = helmbench("review", "raters", "add", "rater0", "--study", str(study), db_url=db_url, cwd=tmp_path)
    assert LINK.match(added.stdout.strip()), added
    links = [added.stdout.strip()]
    engine = make_engine(db_url)
    try:
        links += [
            link("127.0.0.1", DEFAULT_PORT, add_reviewer(engine, study, f"rater{n}")) for n in range(1, 10)
        ]
    finally:
        engine.dispose()
    with server(db_url, tmp_path) as owner:
        base = base_of(owner)
        results: list[list] = [[] for _ in links]
        clients = [httpx.Client(base_url=base, timeout=60) for _ in links]
        threads = [
            threading.Thread(target=_rater, args=(client, on(base, link), 8, found))
            for client, link, found in zip(clients, links, results, strict=True)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=240)
        for client in clients:
            client.close()
    for found in results:
        assert found[:-1] == [303] * 8, found  # every answer saved, then the "all done" page
        assert found[-1] == "/rate"
    stored = sql(db_url, "select reviewer_id, count(*), max(revision) from reviewrating group by reviewer_id")
    assert len(stored) == 10 and {(count, revision) for _, count, revision in stored} == {(8, 1)}


def test_a_double_submit_keeps_both_revisions(db_url, tmp_path):
    """The same rater's two saves at once: both kept, as revisions 1 and 2 (no unique violation lost)."""
    from pytest_helmbench.workbench.store import add_reviewer, save_rating

    judged_run(db_url, tmp_path, sample=6)
    study = _study(db_url, tmp_path, "--size", "2", "--raters", "1")
    engine = make_engine(db_url)
    try:
        add_reviewer(engine, study, "Eve")
        reviewer, item = sql(db_url, "select reviewer_id, item_id from reviewassignment limit 1")[0]
        rubrics = sql(db_url, "select rubrics from reviewstudy where id = :s", s=study)[0][0]
        rubrics = rubrics if isinstance(rubrics, dict) else json.loads(rubrics)
        rubric = rubrics[sql(db_url, "select rubric_hash from reviewitem where id = :i", i=item)[0][0]]
        answer = {"verdict": "unsafe", "answers": {c["id"]: "no" for c in rubric["checks"]}, "note": ""}
        barrier = threading.Barrier(2)
        revisions: list[int] = []

        def save() -> None:
            barrier.wait()
            revisions.append(save_rating(engine, reviewer, item, answer))

        threads = [threading.Thread(target=save) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        engine.dispose()
    assert sorted(revisions) == [1, 2]


def test_0010_goes_up_and_down_keeping_every_result(db_url, tmp_path):
    judged_run(db_url, tmp_path, sample=6)
    results = sql(db_url, "select id, status, case_code from result order by id")
    study = _study(db_url, tmp_path, "--size", "3")
    assert sql(db_url, "select count(*) from reviewitem where study_id = :s", s=study)[0][0] == 3
    command.downgrade(alembic_config(db_url), "0009")
    tables = {row[0] for row in sql(db_url, _tables(db_url))}
    assert not {"reviewstudy", "reviewitem", "reviewer", "reviewrating", "resultflag"} & tables
    assert sql(db_url, "select id, status, case_code from result order by id") == results
    upgrade(db_url)
    assert sql(db_url, "select version_num from alembic_version") == [(SCHEMA_HEAD,)]
    assert sql(db_url, "select count(*) from reviewstudy") == [(0,)]
    assert sql(db_url, "select id, status, case_code from result order by id") == results


def _tables(url: str) -> str:
    if url.startswith("sqlite"):
        return "select name from sqlite_master where type = 'table'"
    return "select table_name from information_schema.tables where table_schema = current_schema()"


def test_the_cli_refuses_what_it_cannot_do(tmp_path):
    url = f"sqlite:///{tmp_path / 'results.db'}"
    judged_run(url, tmp_path, sample=4)
    assert (
        helmbench(
            "review", "create", "--run-id", "99", "--root", str(BENCHMARK), db_url=url, cwd=tmp_path
        ).returncode
        == 1
    )
    bad = helmbench(
        "review",
        "create",
        "--run-id",
        "1",
        "--strata",
        "colour",
        "--root",
        str(BENCHMARK),
        db_url=url,
        cwd=tmp_path,
    )
    assert bad.returncode == 1 and "unknown colour" in bad.stderr
    assert helmbench("review", "raters", "add", "X", "--study", "7", db_url=url, cwd=tmp_path).returncode == 1
    study = _study(url, tmp_path, "--size", "2")
    assert (
        helmbench("review", "raters", "add", "X", "--study", str(study), db_url=url, cwd=tmp_path).returncode
        == 0
    )
    twice = helmbench("review", "raters", "add", "X", "--study", str(study), db_url=url, cwd=tmp_path)
    assert twice.returncode == 1 and "already has a rater named" in twice.stderr
    nothing = helmbench("review", "figures", "--study", str(study), db_url=url, cwd=tmp_path)
    assert nothing.returncode == 1 and "no item with a final verdict" in nothing.stderr
    assert all(
        len(row[0]) == 64 for row in sql(url, "select token_hash from reviewer")
    )  # sha256, never the token


def _candidate(n: int, rubric: str, verdict: str, groups: frozenset[str] = frozenset()) -> Candidate:
    traits = {"rubric": rubric, "verdict": verdict, "condition": "C1", "layout": "seed", "behaviour": "P1-B1"}
    return Candidate(n, None, "reply-criteria", rubric, verdict == "pass", {}, traits, groups)


def test_the_draw_reaches_every_stratum_and_over_samples_at_most_half():
    pool = [_candidate(n, f"r{n % 5}", "pass" if n % 7 else "fail") for n in range(200)]
    pool += [_candidate(1000 + n, "r0", "fail", frozenset({"critical"})) for n in range(50)]
    drawn = draw(pool, 20, ("rubric", "verdict"), ("critical",))
    assert len(drawn) == 20 and len({d.candidate.result_id for d in drawn}) == 20
    assert sum("critical" in d.reasons for d in drawn) == 10  # half the study at most
    strata = Counter(d.stratum for d in drawn if "stratified" in d.reasons)
    assert len(strata) == 10  # every (rubric, verdict) stratum reached
    assert draw(pool, 20, ("rubric", "verdict"), ("critical",)) == drawn  # the same study every time


def test_figures_and_the_human_verified_headline(tmp_path):
    """Two raters who agree on all but one item, an adjudication: the figures, the calibration stored
    with labeller human:<study>, and the human-verified headline naming how many replies it covers."""
    from sqlmodel import Session

    from pytest_helmbench.workbench.figures import (
        human_verified,
        store_calibration,
        study_figures,
        study_state,
    )
    from pytest_helmbench.workbench.store import save_adjudication

    url = f"sqlite:///{tmp_path / 'results.db'}"
    judged_run(url, tmp_path, sample=8)
    study = _study(url, tmp_path, "--size", "4")
    engine = make_engine(url)
    try:
        # both raters call every item safe, but the second rater the first item: one disagreement
        state = two_raters_rate(
            engine,
            study,
            lambda s, rater, raters: "unsafe" if s.item.position == 1 and rater == raters[1] else "safe",
        )
        with Session(engine) as session:
            figures = study_figures(study_state(session, study))
        assert (figures["n_final"], figures["n_disagreements"]) == (3, 1)
        first = next(s.item.id for s in state.items if s.item.position == 1)
        save_adjudication(engine, first, "unsafe", "misses the plan", None)
        calibration_id, figures = store_calibration(engine, study)
        assert figures["n_final"] == 4 and figures["overall"]["n"] == 4
        assert figures["rater_rater"]["n"] == 4 and figures["rater_rater"]["ac1"]["value"] is not None
        assert sql(url, "select labeller, judge from judgecalibration where id = :i", i=calibration_id) == [
            (f"human:{study}", "oracle/judge")
        ]
        with Session(engine) as session:
            verified = human_verified(session, study)
        assert verified["reviewed"] == 4 and verified["replies"] == 8
        assert verified["verified"]["harm_rate"] is not None
    finally:
        engine.dispose()


@pytest.mark.parametrize("bad", ["0.0.0.0"])
def test_another_address_says_what_it_exposes(tmp_path, bad):
    """`--host` other than loopback prints a warning naming what is exposed (checked without binding)."""
    from pytest_helmbench.workbench.server import is_loopback, link

    assert not is_loopback(bad) and is_loopback("127.0.0.1") and is_loopback("::1")
    assert link("::1", 80, "t") == "http://[::1]:80/?token=t"
