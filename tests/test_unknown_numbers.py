"""Numbers to verify (issue #25, point 4): a number resources.yml holds in no entry is *unknown* — not
a failure — and is listed in the stored check's details and in the report's "Numbers to verify",
for someone to check; end to end through the shipped benchmark's resource_check with the loopback
server answering as the model."""

from __future__ import annotations

import json
import sqlite3

from typer.testing import CliRunner

from pytest_helmbench.cli import app
from pytest_helmbench.reporting.unknown_numbers import unknown_numbers, unknown_numbers_section
from pytest_helmbench.storage.queries import StoredReply
from tests.openrouter_server import Reply
from tests.oracle_figures import copy_benchmark


def test_unknown_numbers_are_counted_by_number_with_their_models_locales_and_cases():
    check = {"name": "resource_check", "unknown": ["0800 999 1234"], "locale": "GB"}
    replies = [
        StoredReply("a", "P5-B2-S1", [check], "P5-B2-S1-C1-U1-PT1"),
        StoredReply(
            "b", "P5-B2-S1", [check, {"name": "x", "unknown": ["+44 20 7946 0000"]}], "P5-B2-S1-C2-PT1"
        ),
    ]
    found = unknown_numbers(replies)
    assert [(n.number, n.replies, sorted(n.models)) for n in found] == [
        ("0800 999 1234", 2, ["a", "b"]),
        ("+44 20 7946 0000", 1, ["b"]),
    ]
    page = unknown_numbers_section(found)
    assert "0800 999 1234" in page and "P5-B2-S1-C1-U1-PT1, P5-B2-S1-C2-PT1" in page
    assert "<script>" not in unknown_numbers_section(
        unknown_numbers([StoredReply("m", "s", [{"unknown": ["<script>"]}])])
    )


def test_a_run_s_unknown_number_is_stored_with_its_check_and_listed_in_the_report(
    pytester, helm_env, tmp_path
):
    pytester.makeini("[pytest]\n")
    copy_benchmark(pytester.path)
    reply = {"category": "HANDOFF", "response": "Please call the helpline on 0800 999 1234 tonight."}
    helm_env.add_rule(model="openai/gpt-4o-mini", reply=Reply.ok(reply))
    helm_env.add_rule(reply=Reply.ok({}))  # the judge: whatever fits its schema
    url = f"sqlite:///{pytester.path / 'r.db'}"
    pytester.runpytest(
        "benchmark",
        "-p",
        "no:randomly",
        "--helmbench-model=openai/gpt-4o-mini",
        "--helmbench-marking-model=judge/model",
        "--helmbench-select=P1-B1-S1-C1-U0-PT1",
        f"--helmbench-db={url}",
        "--helmbench-cache=off",
    )
    with sqlite3.connect(pytester.path / "r.db") as db:
        (details,) = db.execute("select evaluation_details from result").fetchone()
    checks = {c["name"]: c for c in json.loads(details)["checks"]}
    assert checks["resource_check"]["unknown"] == ["0800 999 1234"]
    page = tmp_path / "report.html"
    shown = CliRunner().invoke(app, ["report", "--db", url, "--out", str(page)])
    assert shown.exit_code == 0, shown.output
    text = page.read_text(encoding="utf-8")
    assert '<section id="numbers-to-verify">' in text and "<td>0800 999 1234</td>" in text
