"""Item statistics (issue #25, point 7): per scenario, check and atomic item, each model's pass rate and
not_applicable share, the items every model passes or fails, and each item's discrimination across
two models or more — from `helmbench items` on a stored run of two oracle models."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from pytest_helmbench.cli import app
from pytest_helmbench.reporting.items import item_stats
from pytest_helmbench.storage.queries import StoredReply
from pytest_helmbench.suite.model import RubricCheck


def _reply(model: str, asks: str, method: str, label: str = "passed") -> StoredReply:
    judged = {
        "name": "reply-criteria",
        "status": "passed",
        "judges": [{"answers": {"asks": asks, "method": method}}],
    }
    return StoredReply(model, "P1-B1-S1", [{"name": "category_match", "status": label}, judged])


POLARITY = {
    ("P1-B1-S1", "reply-criteria", "asks"): RubricCheck("asks", "Asks?", "yes", na_passes=False),
    ("P1-B1-S1", "reply-criteria", "method"): RubricCheck("method", "Method?", "no"),
}


def test_pass_rates_not_applicable_shares_ceiling_floor_and_discrimination():
    replies = [
        _reply("a", "yes", "no"),
        _reply("a", "yes", "no"),
        _reply("a", "not_applicable", "no"),
        _reply("b", "no", "yes", "failed"),
        _reply("b", "no", "no", "failed"),
        _reply("b", "yes", "yes", "failed"),
    ]
    stats = item_stats(replies, POLARITY)
    rows = {row.name: row for row in stats.rows}
    asks = rows["P1-B1-S1/reply-criteria/asks"]
    assert asks.pass_rates == {"a": pytest.approx(2 / 3), "b": pytest.approx(1 / 3)}
    assert asks.na_shares == {"a": pytest.approx(1 / 3), "b": 0.0}  # not_applicable does not pass "asks"
    method = rows["P1-B1-S1/reply-criteria/method"]
    assert method.pass_rates == {"a": 1.0, "b": pytest.approx(1 / 3)}  # pass: "no" — answering "yes" fails it
    label = rows["P1-B1-S1/category_match"]
    assert label.pass_rates == {"a": 1.0, "b": 0.0} and not label.ceiling and not label.floor
    assert label.discrimination is not None and label.discrimination > 0.5  # goes with the rest
    assert stats.ceilings == [] and stats.floors == []
    everyone = item_stats([_reply("a", "yes", "no"), _reply("b", "yes", "no")], POLARITY)
    assert {row.name for row in everyone.ceilings} == set(rows)  # every model passed every reply


def test_an_item_without_a_known_polarity_gets_no_pass_rate_and_a_tie_no_answer():
    tie = StoredReply(
        "a",
        "P1-B1-S1",
        [{"name": "r", "status": "passed", "judges": [{"answers": {"x": "yes"}}, {"answers": {"x": "no"}}]}],
    )
    unknown = StoredReply(
        "a", "P1-B1-S1", [{"name": "r", "status": "passed", "judges": [{"answers": {"y": "yes"}}]}]
    )
    rows = {row.name: row for row in item_stats([tie, unknown], {}).rows}
    assert "P1-B1-S1/r/x" not in rows  # a tie between the judges answers nothing
    assert rows["P1-B1-S1/r/y"].pass_rates == {"a": None}


def test_helmbench_items_on_a_stored_run_of_two_oracles(pytester, monkeypatch):
    for name in ("HELMBENCH_MODEL", "HELMBENCH_MARKING_MODEL", "HELMBENCH_DB", "HELMBENCH_SELECT"):
        monkeypatch.delenv(name, raising=False)
    from tests.oracle_figures import copy_benchmark

    pytester.makeini("[pytest]\n")
    copy_benchmark(pytester.path)
    url = f"sqlite:///{pytester.path / 'results.db'}"
    pytester.runpytest(
        "benchmark",
        "--helmbench-model=oracle/safe,oracle/unsafe",
        "--helmbench-marking-model=oracle/judge",
        "--helmbench-select=P1-B1-S1-C2-U0-PT1,P1-B1-S1-C1-U0-PT1",
        f"--helmbench-db={url}",
        "-p",
        "no:cacheprovider",
    ).assert_outcomes(passed=2, failed=2)
    shown = CliRunner().invoke(app, ["items", "--db", url, "--root", str(pytester.path / "benchmark")])
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert lines[0] == "item\toracle/safe pass (n/a)\toracle/unsafe pass (n/a)\tdiscrimination"
    assert any(line.startswith("P1-B1-S1/reply-criteria/") and "100% (0%)\t0% (0%)" in line for line in lines)
    assert lines[-1].endswith("at the floor (every model failed every reply)")


def test_the_report_page_has_an_items_section(pytester, monkeypatch, tmp_path):
    for name in ("HELMBENCH_MODEL", "HELMBENCH_MARKING_MODEL", "HELMBENCH_DB", "HELMBENCH_SELECT"):
        monkeypatch.delenv(name, raising=False)
    from tests.oracle_figures import copy_benchmark

    pytester.makeini("[pytest]\n")
    copy_benchmark(pytester.path)
    url = f"sqlite:///{pytester.path / 'results.db'}"
    pytester.runpytest(
        "benchmark",
        "--helmbench-model=oracle/safe,oracle/unsafe",
        "--helmbench-marking-model=oracle/judge",
        "--helmbench-select=P1-B1-S1-C2-U0-PT1",
        f"--helmbench-db={url}",
        "-p",
        "no:cacheprovider",
    ).assert_outcomes(passed=1, failed=1)
    page = tmp_path / "report.html"
    monkeypatch.chdir(pytester.path)  # the benchmark the page reads the rubrics of: as pytest finds it
    shown = CliRunner().invoke(app, ["report", "--db", url, "--out", str(page)])
    assert shown.exit_code == 0, shown.output
    text = page.read_text(encoding="utf-8")
    assert '<section id="items">' in text and "items over 2 model(s)" in text
    assert "Least discriminating items" in text or "at the floor" in text
