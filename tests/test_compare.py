"""Comparison with a baseline (issue #29, point 3): `helmbench compare BASE NEW`, `helmbench baseline
save`, and `pytest --helmbench-baseline FILE --helmbench-fail-on-regression` (exit 13 when a critical
case newly fails or the harm rate rose beyond its interval), on two stored runs with known
differences against the loopback server; the statistics against hand-computed values."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from pytest_helmbench.cli import app
from pytest_helmbench.reporting.compare import (
    CaseVerdict,
    Verdicts,
    central_95,
    compare,
    load_baseline,
    mcnemar_exact,
)
from tests.benchfiles import SCENARIO, write, write_benchmark
from tests.openrouter_server import Reply

runner = CliRunner()
GOOD = {"category": "ANSWER", "response": "It is the mitochondria."}
BAD = {"category": "HANDOFF", "response": "Please call a helpline."}


def _case(code: str, passed: bool, harm: bool | None, critical: bool = False) -> CaseVerdict:
    return CaseVerdict(code, "seed", 0, "P1-B1", critical, passed, harm, (1 if passed else 0, 1))


def _verdicts(cases: list[CaseVerdict]) -> Verdicts:
    return Verdicts("m", 1, {c.key: c for c in cases})


def test_mcnemar_exact_p_values():
    assert mcnemar_exact(0, 0) is None
    assert mcnemar_exact(5, 0) == pytest.approx(0.0625)  # 2 * (1/2)^5
    assert mcnemar_exact(3, 3) == 1.0
    assert mcnemar_exact(1, 9) == pytest.approx(2 * (1 + 10) / 2**10)


def test_the_care_interval_is_the_2_5th_and_97_5th_percentile_of_the_replicates():
    """Known percentiles: of 0..2000 the 2.5th is 50 and the 97.5th 1950 (order statistics); between
    order statistics they are interpolated (0.025 of the way from 0 to 1), in any input order; the
    same interval as the summary's bootstraps (reporting/bootstrap.py)."""
    from pytest_helmbench.reporting.bootstrap import percentile_interval

    assert central_95([float(v) for v in reversed(range(2001))]) == (50.0, 1950.0)
    assert central_95([1.0, 0.0]) == pytest.approx((0.025, 0.975))
    values = [(v * 37 % 101) / 7 for v in range(2000)]
    assert central_95(values) == pytest.approx(percentile_interval(values))
    same = [(_case(f"P1-B1-S{n}", True, False), _case(f"P1-B1-S{n}", True, False)) for n in range(1, 6)]
    found = compare(_verdicts([b for b, _ in same]), _verdicts([a for _, a in same]))
    assert found.care == (100.0, 100.0, 0.0, 0.0, 0.0)


def test_a_paired_comparison_names_what_changed_critical_first():
    before = _verdicts(
        [_case(f"P1-B1-S1-C1-PT{n}", True, False) for n in range(1, 21)]
        + [_case("P1-B1-S2-C1-PT1", True, False, True)]
    )
    after_cases = [_case(f"P1-B1-S1-C1-PT{n}", n > 12, n <= 12) for n in range(1, 21)]
    after = _verdicts([*after_cases, _case("P1-B1-S2-C1-PT1", False, True, True)])
    found = compare(before, after)
    assert found.pairs == 21
    assert found.harm is not None and found.harm.before == 0.0 and found.harm.after == pytest.approx(13 / 21)
    assert found.harm.low > 0 and found.harm.p_value == pytest.approx(mcnemar_exact(13, 0))
    assert [c.code for c in found.newly_failing][:1] == ["P1-B1-S2-C1-PT1"]  # critical first
    assert len(found.newly_failing) == 13 and found.newly_passing == ()
    assert found.regressed and found.critical_newly_failing
    steady = compare(before, before)
    assert not steady.regressed and steady.harm.change == 0 and steady.harm.p_value is None


def _bench(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")
    root = write_benchmark(pytester.path / "benchmark", scenarios=("P1-B1-S1", "P1-B1-S2"))
    critical = SCENARIO.replace("category: ANSWER\n", "category: ANSWER\ncritical: true\n")
    write(root / "scenarios" / "P1-B1-S2" / "S2.md", critical)


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("benchmark", "-p", "no:randomly", "--helmbench-cache=off", *args)


def test_compare_baseline_save_and_the_regression_gate_end_to_end(pytester, helm_env, tmp_path):
    _bench(pytester)
    url = f"sqlite:///{pytester.path / 'helmbench.db'}"
    helm_env.add_rule(reply=Reply.ok(GOOD))
    _run(pytester).assert_outcomes(passed=16)  # run 1: every case passes
    saved = runner.invoke(
        app, ["baseline", "save", str(tmp_path / "base.json"), "--run-id", "1", "--db", url]
    )
    assert saved.exit_code == 0, saved.output
    assert "wrote the baseline of openai/gpt-4o-mini (16 scored case(s))" in saved.output
    baseline = load_baseline(tmp_path / "base.json")
    assert len(baseline["openai/gpt-4o-mini"].cases) == 16

    # Run 2: the same model now answers the critical scenario's slang message wrongly.
    helm_env.reset()
    helm_env.add_rule(contains="agian", reply=Reply.ok(BAD))
    helm_env.add_rule(reply=Reply.ok(GOOD))
    gated = _run(pytester, f"--helmbench-baseline={tmp_path / 'base.json'}", "--helmbench-fail-on-regression")
    assert gated.ret == 13, gated.stdout.str()[-3000:]
    out = gated.stdout.str()
    assert "newly failing (8): P1-B1-S2-C1-PT2 [critical]" in out
    assert "REGRESSED: 4 critical case(s) newly failing" in out
    assert "regressed against the baseline: exit status 13" in out

    compared = runner.invoke(app, ["compare", "1", "2", "--db", url])
    assert compared.exit_code == 13, compared.output
    assert "openai/gpt-4o-mini: 16 case(s) scored in both" in compared.output
    assert "perfect-reply rate 100.0% -> 50.0% (-50.0 pts" in compared.output
    as_json = runner.invoke(
        app, ["compare", str(tmp_path / "base.json"), "2", "--db", url, "--format", "json"]
    )
    assert as_json.exit_code == 13
    found = json.loads(as_json.stdout)["comparisons"][0]
    assert found["regressed"] is True and found["pairs"] == 16
    assert [c["code"] for c in found["newly_failing"]][:4] == [
        "P1-B1-S2-C1-PT2",
        "P1-B1-S2-C1-U1-PT2",
        "P1-B1-S2-C2-PT2",
        "P1-B1-S2-C2-U1-PT2",
    ]
    same = runner.invoke(app, ["compare", "1", "1", "--db", url])
    assert same.exit_code == 0 and "no regression" in same.output
    page = tmp_path / "report.html"
    shown = runner.invoke(
        app,
        [
            "report",
            "--db",
            url,
            "--run-id",
            "2",
            "--baseline",
            str(tmp_path / "base.json"),
            "--out",
            str(page),
        ],
    )
    assert shown.exit_code == 0, shown.output
    text = page.read_text(encoding="utf-8")
    assert '<section id="baseline">' in text and "newly failing (8): P1-B1-S2-C1-PT2 [critical]" in text


def test_a_baseline_that_cannot_be_read_is_a_usage_error(pytester, helm_env, tmp_path):
    _bench(pytester)
    (tmp_path / "bad.json").write_text('{"models": {}}')
    result = _run(pytester, f"--helmbench-baseline={tmp_path / 'bad.json'}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "is not a HELMBench baseline" in result.stderr.str() and helm_env.chat_requests == []
    alone = _run(pytester, "--helmbench-fail-on-regression")
    assert alone.ret == pytest.ExitCode.USAGE_ERROR
    assert "--helmbench-fail-on-regression needs --helmbench-baseline FILE" in alone.stderr.str()
