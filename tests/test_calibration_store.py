"""Judge calibrations stored and found again: newest match per judge and rubric set (SQLite, PostgreSQL)."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session

from pytest_helmbench.storage.calibration_store import (
    CalibrationRecord,
    covering_calibration,
    latest_calibrations,
    matching_calibration,
    rubrics_hash,
    run_calibrations,
    save_calibration,
)
from pytest_helmbench.storage.engine import StorageError, make_engine, upgrade
from pytest_helmbench.storage.tables import LLM, Benchmark, EvaluationRun

FIGURES = {
    "overall": {
        "kappa": {"value": 0.78, "low": 0.71, "high": 0.84},
        "ac1": {"value": 0.81, "low": 0.75, "high": 0.86},
        "sensitivity": {"value": 0.9, "low": 0.8, "high": 0.97},
        "specificity": {"value": None, "low": None, "high": None},  # undefined: no gold-safe item
        "n": 320,
    },
    "rubrics": {"abc": {"kappa": {"value": 0.7, "low": 0.5, "high": 0.85}, "n": 40}},
}


def record(judge: str = "judge/a", rubrics: tuple[str, ...] = ("r1", "r2"), **changes) -> CalibrationRecord:
    values = dict(
        judge=judge,
        rubric_hashes=rubrics,
        label_set_hash="labels-1",
        labeller="authors",
        n_items=320,
        figures=FIGURES,
        judge_settings={"temperature": 0, "seed": 7},
        benchmark_version="1.1",
    )
    return CalibrationRecord(**{**values, **changes})


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    upgrade(db_url)
    made = make_engine(db_url)
    yield made
    made.dispose()


def test_rubrics_hash_is_sha256_of_the_sorted_distinct_hashes():
    expected = hashlib.sha256(b"r1\nr2").hexdigest()
    assert rubrics_hash(["r2", "r1"]) == rubrics_hash(("r1", "r2", "r1")) == expected
    assert rubrics_hash(["r1"]) != expected
    assert record(rubrics=("r2", "r1", "r2")).rubrics_hash == expected


def test_a_record_must_be_plain_finite_json_with_a_rubric():
    with pytest.raises(ValueError, match="finite numbers"):
        record(figures={"overall": {"kappa": math.nan}})
    with pytest.raises(ValueError, match="plain JSON"):
        record(judge_settings={"when": object()})
    with pytest.raises(ValueError, match="at least one rubric"):
        record(rubrics=())
    with pytest.raises(ValueError, match="negative"):
        record(n_items=-1)


def test_saved_calibration_reads_back_as_given(engine):
    calibration_id = save_calibration(engine, record(rubrics=("r2", "r1", "r2")))
    with Session(engine) as session:
        found = matching_calibration(session, "judge/a", rubrics_hash(["r1", "r2"]))
        assert found is not None and found.id == calibration_id
        assert found.rubric_hashes == ["r1", "r2"]  # sorted, distinct
        assert found.figures == FIGURES
        assert found.judge_settings == {"temperature": 0, "seed": 7}
        assert (found.labeller, found.n_items, found.label_set_hash) == ("authors", 320, "labels-1")
        assert found.benchmark_version == "1.1" and found.created_at is not None


def test_the_newest_match_wins_and_other_judges_or_rubrics_do_not_match(engine):
    save_calibration(engine, record())
    newer = save_calibration(engine, record(label_set_hash="labels-2"))
    save_calibration(engine, record(judge="judge/b"))
    save_calibration(engine, record(rubrics=("r1", "r3")))
    with Session(engine) as session:
        found = matching_calibration(session, "judge/a", rubrics_hash(["r1", "r2"]))
        assert found is not None and (found.id, found.label_set_hash) == (newer, "labels-2")
        assert matching_calibration(session, "judge/c", rubrics_hash(["r1", "r2"])) is None
        assert matching_calibration(session, "judge/a", rubrics_hash(["r1"])) is None


def test_the_newest_calibration_covering_a_partial_run_s_rubrics_serves_it(engine):
    wide = save_calibration(engine, record(rubrics=("r1", "r2", "r3")))
    save_calibration(engine, record(rubrics=("r1", "r4")))  # newer, but does not cover r2
    with Session(engine) as session:
        found = covering_calibration(session, "judge/a", ["r2", "r1"])
        assert found is not None and found.id == wide
        assert covering_calibration(session, "judge/a", ["r5"]) is None
        assert covering_calibration(session, "judge/b", ["r1"]) is None
    exact = save_calibration(engine, record(rubrics=("r1", "r2")))
    wider = save_calibration(engine, record(rubrics=("r1", "r2", "r5")))
    with Session(engine) as session:
        found = covering_calibration(session, "judge/a", ["r1", "r2"])
        assert found is not None and found.id == wider
        found = matching_calibration(session, "judge/a", rubrics_hash(["r1", "r2"]))
        assert found is not None and found.id == exact


def test_latest_calibrations_has_one_per_judge_and_rubric_set_newest_first(engine):
    save_calibration(engine, record())
    b = save_calibration(engine, record(judge="judge/b"))
    a2 = save_calibration(engine, record(n_items=10))
    a3 = save_calibration(engine, record(rubrics=("r9",)))
    with Session(engine) as session:
        assert [c.id for c in latest_calibrations(session)] == [a3, a2, b]


def test_empty_database_has_no_calibration(engine):
    with Session(engine) as session:
        assert latest_calibrations(session) == []
        assert matching_calibration(session, "judge/a", rubrics_hash(["r1"])) is None
        assert run_calibrations(session, [1, 2]) == {}


def test_saving_in_a_session_leaves_the_commit_to_the_caller(engine):
    with Session(engine) as session:
        save_calibration(session, record())
        session.rollback()
    with Session(engine) as session:
        assert latest_calibrations(session) == []
        calibration_id = save_calibration(session, record())
        session.commit()
    with Session(engine) as session:
        assert [c.id for c in latest_calibrations(session)] == [calibration_id]


def test_run_calibrations_maps_each_run_to_the_calibration_it_recorded(engine):
    calibration_id = save_calibration(engine, record())
    with Session(engine) as session:
        benchmark = Benchmark(version="1.1", content_hash="h")
        llm = LLM(model_id="m/one")
        session.add_all([benchmark, llm])
        session.flush()
        assert benchmark.id is not None and llm.id is not None
        runs = [
            EvaluationRun(benchmark_id=benchmark.id, llm_id=llm.id, session_id="s", calibration_id=cid)
            for cid in (calibration_id, None)
        ]
        session.add_all(runs)
        session.commit()
        calibrated, uncalibrated = (run.id for run in runs)
        assert calibrated is not None and uncalibrated is not None
        found = run_calibrations(session, [calibrated, uncalibrated])
        assert list(found) == [calibrated] and found[calibrated].id == calibration_id


def test_a_database_without_the_table_is_a_storage_error_naming_it(tmp_path):
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    engine = make_engine(url)
    try:
        with (
            Session(engine) as session,
            pytest.raises(StorageError, match=r"cannot read calibrations in .*empty\.db"),
        ):
            latest_calibrations(session)
        with pytest.raises(StorageError, match="cannot store calibrations"):
            save_calibration(engine, record())
    finally:
        engine.dispose()
