"""Issue #27: rater assignment is balanced. `helmbench review create --raters R` then `raters add` one
rater at a time: every item has exactly R raters (every rater, while there are fewer), no rater has an
item twice, and loads differ by at most one; an item a rater already answered or skipped stays theirs.
The plan is tested alone, then through the `helmbench` command on SQLite and PostgreSQL."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from pytest_helmbench.storage.engine import make_engine
from pytest_helmbench.workbench.store import assignment_plan, save_rating
from tests.workbench_helpers import BENCHMARK, helmbench, judged_run, run_of, sql


def check(plan: set[tuple[int, int]], items: list[int], raters: list[int], per_item: int) -> None:
    per = Counter(item for item, _ in plan)
    assert all(per[i] == min(per_item, len(raters)) for i in items), per
    load = Counter(rater for _, rater in plan)
    assert max(load[r] for r in raters) - min(load[r] for r in raters) <= 1, load
    assert len(plan) == sum(per.values())  # a set of (item, rater): nobody holds an item twice


def add_raters(db_url: str, cwd: Path, study: int, *names: str) -> None:
    """`helmbench review raters add NAME` for each name, as the study's owner runs it."""
    for name in names:
        added = helmbench("review", "raters", "add", name, "--study", str(study), db_url=db_url, cwd=cwd)
        assert added.returncode == 0, added.stderr


@pytest.mark.parametrize(("n_items", "per_item", "n_raters"), [(10, 2, 5), (7, 2, 3), (9, 3, 4), (5, 1, 6)])
def test_raters_added_one_at_a_time_share_the_items_evenly(n_items, per_item, n_raters):
    items = list(range(100, 100 + n_items))
    plan: set[tuple[int, int]] = set()
    for k in range(1, n_raters + 1):
        raters = list(range(1, k + 1))
        plan = assignment_plan(items, raters, per_item, plan, set())
        check(plan, items, raters, per_item)
    load = Counter(rater for _, rater in plan)
    total = n_items * per_item
    assert sorted(load[r] for r in range(1, n_raters + 1)) == sorted(
        [total // n_raters + (r < total % n_raters) for r in range(n_raters)]
    )


def test_answered_items_stay_with_their_rater():
    items = list(range(1, 11))
    plan = assignment_plan(items, [1, 2], 2, set(), set())  # both have every item
    answered = {(i, 1) for i in items} | {(i, 2) for i in items[:4]}  # rater 1 done, rater 2 four in
    plan = assignment_plan(items, [1, 2, 3], 2, plan, answered)
    assert answered <= plan  # nothing answered moves
    # rater 1 answered everything: nothing of hers moves; rater 3 takes rater 2's unanswered items
    assert Counter(r for _, r in plan) == {1: 10, 2: 5, 3: 5}
    assert all(i > 4 for i, r in plan if r == 3)
    per = Counter(item for item, _ in plan)
    assert set(per.values()) == {2}


def loads(url: str, study: int) -> tuple[Counter, Counter]:
    rows = sql(
        url,
        "select a.item_id, r.name from reviewassignment a join reviewer r on r.id = a.reviewer_id "
        "where r.study_id = :s",
        s=study,
    )
    return Counter(item for item, _ in rows), Counter(name for _, name in rows)


@pytest.mark.e2e  # a pytest run and the helmbench command in subprocesses
def test_review_create_and_raters_add_balance_the_study(db_url, tmp_path):
    judged_run(db_url, tmp_path, sample=8)
    run_id = run_of(db_url, "oracle/borderline-unsafe")
    created = helmbench(
        "review", "create", "--run-id", str(run_id), "--root", str(BENCHMARK), "--size", "9", "--raters", "2",
        db_url=db_url, cwd=tmp_path,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    study = int(created.stdout.split()[1])
    n_items = sql(db_url, "select count(*) from reviewitem where study_id = :s", s=study)[0][0]
    assert n_items >= 4
    add_raters(db_url, tmp_path, study, "ann", "bob")
    per_item, per_rater = loads(db_url, study)
    assert set(per_item.values()) == {2} and per_rater == {"ann": n_items, "bob": n_items}
    # ann answers her first item: it stays hers whatever happens next
    ann, first = sql(
        db_url,
        "select r.id, min(i.position) from reviewer r join reviewassignment a on a.reviewer_id = r.id "
        "join reviewitem i on i.id = a.item_id where r.name = 'ann' and r.study_id = :s group by r.id",
        s=study,
    )[0]
    first_id = sql(
        db_url, "select id from reviewitem where study_id = :s and position = :p", s=study, p=first
    )[0][0]
    engine = make_engine(db_url)
    try:
        save_rating(engine, ann, first_id, {"skipped": True})
    finally:
        engine.dispose()
    add_raters(db_url, tmp_path, study, "cy", "dee")
    assert helmbench("review", "raters", "add", "eve", "--study", str(study), "--adjudicator",
                     db_url=db_url, cwd=tmp_path).returncode == 0  # fmt: skip
    per_item, per_rater = loads(db_url, study)
    assert set(per_item.values()) == {2} and len(per_item) == n_items  # exactly two raters on every item
    assert "eve" not in per_rater  # an adjudicator rates nothing
    assert max(per_rater.values()) - min(per_rater.values()) <= 1, per_rater
    assert sum(per_rater.values()) == 2 * n_items
    assert (first_id, "ann") in {
        (i, n) for i, n in sql(
            db_url, "select a.item_id, r.name from reviewassignment a join reviewer r on r.id = a.reviewer_id"
        )
    }  # fmt: skip
