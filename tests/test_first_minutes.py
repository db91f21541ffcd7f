"""Issue #31 ("the first ten minutes"), end to end through real sessions: the oracle judge is never
told to calibrate; a failure never prints `judge verdict: None` nor an `expected` equal to its
`actual`; a headline resting on few of its results says `from N of M results` (terminal summary,
`helmbench report` line, HTML page, JSON); a long list of gate codes is cut to the terminal's width."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from pytest_helmbench import cli
from pytest_helmbench.codes import code_list
from pytest_helmbench.reporting.series import summaries, summary_line
from tests import oracle_figures
from tests.benchfiles import write_benchmark
from tests.openrouter_server import Reply
from tests.test_report_layout import report_data

GOOD = {"category": "ANSWER", "response": "Mitochondria."}
FLAKY, STEADY = "flaky/model", "steady/model"


def oracle_session(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, model: str) -> str:
    """A small sample of the shipped benchmark answered by `model`, marked by oracle/judge; its output."""
    for name in ("OPENROUTER_API_KEY", "HELMBENCH_MODEL", "HELMBENCH_DB", "HELMBENCH_DRY_RUN"):
        monkeypatch.delenv(name, raising=False)
    pytester.makeini("[pytest]\n")
    oracle_figures.copy_benchmark(pytester.path)
    result = pytester.runpytest(
        "benchmark",
        f"--helmbench-model={model}",
        "--helmbench-marking-model=oracle/judge",
        "--helmbench-user-model=oracle/user",
        "--helmbench-sample=12",
        f"--helmbench-db=sqlite:///{pytester.path / 'oracle.db'}",
        "--helmbench-cache=off",
        "-p",
        "no:cacheprovider",
    )
    return result.stdout.str()


def test_the_oracle_judge_is_not_told_to_calibrate_and_failures_read_true(pytester, monkeypatch):
    """oracle/label-gamer picks the right label and writes a bad reply: its failures are other checks'
    (`label as expected`), each judge verdict printed is the judge's answers, never None."""
    out = oracle_session(pytester, monkeypatch, "oracle/label-gamer")
    assert "judge oracle/judge: rule-based, gives the authors' gold verdicts (nothing to calibrate)" in out
    assert "helmbench calibrate --marking-model oracle/judge" not in out and "uncalibrated" not in out
    assert "HELMBench FAILED" in out, out[-3000:]
    assert "judge verdict: None" not in out and "judge rationale: None" not in out
    verdicts = re.findall(r"^judge verdict: (.*)$", out, flags=re.MULTILINE)
    assert verdicts and all(v.startswith("{'") for v in verdicts), verdicts
    assert "label as expected: " in out
    pairs = re.findall(r"^expected: (.*)\nactual:   (.*)$", out, flags=re.MULTILINE)
    assert all(expected != actual for expected, actual in pairs), pairs


def flaky_session(pytester: pytest.Pytester, helm_env) -> pytest.RunResult:
    """flaky/model errors on 6 of its 8 cases (the U1 context and the slang wording); steady/model
    answers all 8."""
    pytester.makeini("[pytest]\n")
    write_benchmark(pytester.path / "benchmark")
    helm_env.add_rule(model=FLAKY, contains="roast me", reply=Reply.error(500, "upstream down"))
    helm_env.add_rule(model=FLAKY, contains="agian", reply=Reply.error(500, "upstream down"))
    helm_env.add_rule(reply=Reply.ok(GOOD))
    return pytester.runpytest(
        "benchmark", "-p", "no:xdist", "--helmbench-retries=0", f"--helmbench-model={FLAKY},{STEADY}"
    )


def test_a_headline_from_few_results_says_so_everywhere(pytester, helm_env, monkeypatch, tmp_path):
    result = flaky_session(pytester, helm_env)
    result.assert_outcomes(passed=10, errors=6)
    out = result.stdout.str()
    summary = out[out.index("HELMBench summary") :]
    flaky_block = summary[summary.index(FLAKY) : summary.index(STEADY)]
    assert "    from 2 of 8 results: harm " in flaky_block, summary
    assert "of 8 results" not in summary[summary.index(STEADY) :]

    monkeypatch.chdir(pytester.path)
    runner = CliRunner()
    done = runner.invoke(cli.app, ["report", "--out", str(tmp_path / "page.html")])
    assert done.exit_code == 0, done.output
    lines = {line.split(" ", 1)[0]: line for line in done.output.splitlines()[1:]}
    assert lines[FLAKY].startswith(f"{FLAKY} (instructed (the model is shown the categories)): from 2 of 8 ")
    assert "from " not in lines[STEADY].split("):", 1)[1].split("|", 1)[0]
    page = (tmp_path / "page.html").read_text(encoding="utf-8")
    assert page.count('class="warn thin-basis"') == 1 and ">from 2 of 8 results</strong>" in page

    done = runner.invoke(cli.app, ["report", "--format", "json", "--out", str(tmp_path / "r.json")])
    assert done.exit_code == 0, done.output
    models = {m["model"]: m for m in json.loads((tmp_path / "r.json").read_text())["models"]}
    assert models[FLAKY]["basis"] == {
        "results": 8,
        "scored": 2,
        "harm_known": models[FLAKY]["basis"]["harm_known"],
        "note": "from 2 of 8 results",
    }
    assert models[STEADY]["basis"]["note"] is None and models[STEADY]["basis"]["scored"] == 8


def test_a_gate_code_list_is_cut_to_the_terminal_width():
    """#31.6: `helmbench report` printed 72 codes on one line: the gate's list takes a few codes, as
    many as the width allows, then says how many more."""
    codes = tuple(f"P1-B1-S{k}-C1-PT1" for k in range(2, 74))
    assert code_list(codes, width=62) == ", ".join(codes[:3]) + " and 69 more"
    assert code_list(codes, width=5) == f"{codes[0]} and 71 more"  # one code at least
    assert code_list(codes, width=400) == ", ".join(codes[:5]) + " and 67 more"  # never more than five
    data = report_data(["a/model"], n_behaviours=2, n_critical_failures=72)
    line = summary_line(summaries(data)[0], width=80)
    gate = line[line.index("critical gate failed (") :].split(" | ")[0]
    assert len(gate) <= 80 and gate.endswith(" more)") and codes[0] in gate, gate


def test_the_basis_note_speaks_only_when_few_results_carry_the_figures():
    from pytest_helmbench.reporting.figure_text import basis_note
    from pytest_helmbench.reporting.harm_care import HarmCare

    def figures(scored: int, errors: int = 0, unknown: int = 0) -> HarmCare:
        return HarmCare(
            None, None, None, None, None, n_scored=scored, n_errors=errors, n_harm_unknown=unknown
        )

    assert basis_note(figures(8, errors=207)) == "from 8 of 215 results"
    assert basis_note(figures(108, errors=107)) == ""  # most results scored
    assert basis_note(figures(10, unknown=8)) == "harm from 2 of 10 results"
    assert basis_note(figures(10, unknown=10)) == ""  # no harm known: the harm rate says n/a itself
    assert basis_note(figures(0)) == ""
