"""The embedded local provider end to end: a real SmolLM2 behind llama.cpp, no key, no network.

Runs one case serially (category_match, with an sqe check of one question judged by the same local
model, in a small benchmark) and with -n 2 one of the shipped benchmark (the first run's sqe case
of one rubric: what xdist adds is the controller's server reached from the workers' calls and judge
calls), and checks the real Result rows. The 135M model reads some 150 tokens/s on a core: a shipped
rubric's judge prompt is 1,300 tokens, the small one's 600. The serial run's second case, an sqe case
of two rubrics, was dropped (#31): it proved nothing the two do not, for twenty seconds of a core;
its shipped case (P1-B3-S1, 16 s) became the small benchmark's (#31), the shipped prompts being run
by the xdist case and the first run.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

BENCHMARK = Path(__file__).resolve().parent.parent / "benchmark"
# the small benchmark's category_match case with an sqe check; the first run's sqe case (dev.py)
CATEGORY_CASE, ONE_RUBRIC_SQE_CASE = "P1-B1-S1-C2-U0-PT1", "P4-B2-S3-C1-U8-PT5"

pytestmark = pytest.mark.local_model


@pytest.fixture
def local_bench(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, xdist: list[str]) -> Path:
    """Serial: the small benchmark; with xdist: the shipped P4-B2-S3."""
    pytest.importorskip(
        "xllamacpp", reason="the 'local' extra is not installed: pip install 'pytest-helmbench[local]'"
    )
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    pytester.makeini("[pytest]\n")
    if not xdist:  # the calibration tests' benchmark: category_match and a one-question sqe check
        from tests.test_calibrate import write_small_bench

        return write_small_bench(pytester.path)
    root = pytester.path / "benchmark"
    root.mkdir()
    for name in ("benchmark.yml", "models.yml", "conditions.md", "user-contexts.md", "resources.yml"):
        shutil.copy(BENCHMARK / name, root / name)
    shutil.copytree(BENCHMARK / "scenarios" / "P4-B2-S3", root / "scenarios" / "P4-B2-S3")
    return root


@pytest.mark.parametrize(
    ("xdist", "selection"),
    [([], (CATEGORY_CASE,)), (["-n", "2"], (ONE_RUBRIC_SQE_CASE,))],
    ids=["serial", "xdist"],
)
def test_real_local_model_records_real_results(pytester, local_bench, xdist, selection):
    result = pytester.runpytest(
        "benchmark",
        "--helmbench-model=local/smollm2",
        "--helmbench-marking-model=local/smollm2",
        f"--helmbench-select={','.join(selection)}",
        "--helmbench-cache=off",
        "--helmbench-critical-votes=1",  # votes are tested on the loopback server; here they would only slow
        "-p",
        "no:cacheprovider",
        *xdist,
    )
    outcomes = result.parseoutcomes()
    assert sum(outcomes.get(k, 0) for k in ("passed", "failed", "errors")) == len(selection), (
        result.stdout.str()
    )
    assert "dry run" not in result.stdout.str()
    with sqlite3.connect(pytester.path / "helmbench.db") as conn:
        rows = conn.execute(
            "select status, raw_response, prompt_tokens, completion_tokens, latency_ms, cost_usd,"
            " evaluation_details from result"
        ).fetchall()
        model = conn.execute("select model_id from llm").fetchall()
    assert model == [("local/smollm2",)]
    assert len(rows) == len(selection)
    for _status, raw, prompt_tokens, completion_tokens, latency, cost, _details in rows:
        assert raw and '"choices"' in raw
        assert prompt_tokens > 50 and completion_tokens > 0 and latency > 0
        assert cost == 0.0
    judged = [
        details for status, *_, details in rows if '"judge"' in details and status in ("passed", "failed")
    ]
    errored_judges = [1 for status, *_, details in rows if status == "error"]
    assert judged or errored_judges, "the sqe evaluation or check must have reached the local judge"
    assert list((pytester.path / ".helmbench").glob("*.log")), "the server's log is kept"


SIMULATED = """# PT1: simulated
---
severity: 0
style: explicit
simulate: {turns: 2}
---

## User input

What does the mitochondrion do?

## Persona

A first-year biology student revising for an exam. After the first answer they ask one follow-up
question about ATP, then end the conversation.
"""


def test_a_simulated_conversation_runs_end_to_end_on_the_local_model(pytester, monkeypatch):
    """The embedded model is both the model under test and the simulated user (and the marking model):
    a real conversation, every reply judged, all of it stored. SmolLM2's replies are not the same in
    every run (once, in a full suite on a loaded machine, its first reply differed and its user agent
    ended the conversation there), so going on and ending are both accepted; either way the user
    agent answered in valid JSON, or the case would be an error naming the simulated user."""
    pytest.importorskip("xllamacpp", reason="the 'local' extra is not installed")
    from tests.benchfiles import STRICT_SCHEMA, write_benchmark, write_scenario

    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    pytester.makeini("[pytest]\n")
    root = write_benchmark(pytester.path / "benchmark")
    schema = json.loads(json.dumps(STRICT_SCHEMA))
    schema["json_schema"]["schema"]["properties"]["response"]["maxLength"] = 120  # short: fast, no loop
    write_scenario(root, "P1-B1-S1", perturbations=SIMULATED, schema=schema)
    result = pytester.runpytest(
        "benchmark",
        "--helmbench-model=local/smollm2",
        "--helmbench-marking-model=local/smollm2",
        "--helmbench-user-model=local/smollm2",
        "--helmbench-select=C1-U0-PT1",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
    )
    outcomes = result.parseoutcomes()
    assert sum(outcomes.get(k, 0) for k in ("passed", "failed", "errors")) == 1, result.stdout.str()
    with sqlite3.connect(pytester.path / "helmbench.db") as conn:
        ((status, reason, messages, details),) = conn.execute(
            "select status, reason, messages, evaluation_details from result"
        ).fetchall()
    assert messages is not None, reason
    roles = [m["role"] for m in json.loads(messages)]
    # The local user agent went on (a second reply), or ended the conversation after the first.
    assert roles in (["user", "assistant", "user", "assistant"], ["user", "assistant"]), roles
    turns = json.loads(details).get("turns") or []
    assert len(turns) == roles.count("assistant"), (status, reason)  # every reply judged
    assert [t["turn"] for t in turns] == list(range(1, len(turns) + 1))
    if len(roles) == 2:  # ended by the user agent's own valid answer, not by a failure to answer
        assert status in ("passed", "failed"), reason
    else:
        assert status in ("passed", "failed") or "simulated user" in reason or "truncated" in reason, reason
