"""The critical gate's error rates with a judge wrong on 10 % of its calls (issue #25, point 3): a
fixed sample of the shipped critical cases, marked by oracle/judge and by oracle/noisy-judge-10 with
the default three votes, compared check by check (tests/gate_figures.py; `bench/gate_errors.py`
prints the same figures on a larger sample)."""

from __future__ import annotations

import os
import shutil

import pytest

from tests import docpages, gate_figures
from tests.benchfiles import SESSION_ADDOPTS

pytestmark = [
    pytest.mark.e2e,  # starts pytest, servers or processes: out of `dev.py test --quick`
    pytest.mark.xdist_group("gate_errors"),  # one worker builds the module fixture's two runs
]

SAMPLE = 150  # critical case codes, x 4 oracles
SEED = 1  # --helmbench-seed: which calls the noisy judge gets wrong


@pytest.fixture(scope="module")
def errors(tmp_path_factory: pytest.TempPathFactory) -> gate_figures.GateErrors:
    """Both runs once for the module, each a `pytest` command as a user runs it, in this process
    (docpages.run_pytest: a process of its own would add a second of start-up to each)."""
    project = tmp_path_factory.mktemp("gate")
    (project / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    shutil.copytree(gate_figures.BENCHMARK, project / "benchmark")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HELMBENCH_", "OPENROUTER_"))}
    env["PYTEST_ADDOPTS"] = SESSION_ADDOPTS  # set for each test, after this module fixture: set here too
    scenarios = gate_figures.critical_scenarios(project / "benchmark")
    runs = {}
    for name, judge, votes in (
        ("truth", gate_figures.TRUTH_JUDGE, 1),
        ("noisy", gate_figures.noisy_judge(10), 3),
    ):
        db = project / f"{name}.db"
        args = gate_figures.session_args(
            f"sqlite:///{db}", judge, votes=votes, sample=SAMPLE, seed=SEED, scenarios=scenarios
        )
        done = docpages.run_pytest(["-p", "no:cacheprovider", *args], project, env, stderr_apart=True)
        assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
        assert "Traceback" not in done.stdout + done.stderr
        runs[name] = gate_figures.read_run(db)
    assert len(runs["truth"]) == len(runs["noisy"]) == SAMPLE * len(gate_figures.ANSWERERS)
    return gate_figures.compare(runs["truth"], runs["noisy"], 3, 10)


def test_the_noisy_judge_is_wrong_on_about_a_tenth_of_its_calls(errors):
    """The figures below mean something only if the judge really errs at the rate it says."""
    value = errors.call_error.value
    assert value is not None and 0.07 <= value <= 0.13, errors.call_error.text()
    assert errors.call_error.of >= 1000


def test_at_ten_percent_per_call_error_the_gate_errs_on_at_most_five_percent_of_verdicts(errors):
    assert errors.misses() == [], "\n".join(errors.lines())


def test_the_majority_is_what_brings_the_rates_down(errors):
    """The first call of each verdict alone (one call per verdict) errs about as often as the judge;
    the majority of three at least halves both rates."""
    for majority, single in (
        (errors.false_trip_verdict, errors.first_false_trip_verdict),
        (errors.miss_verdict, errors.first_miss_verdict),
    ):
        assert majority.value is not None and single.value is not None
        assert single.value > gate_figures.TARGET
        assert majority.value <= single.value / 2, "\n".join(errors.lines())


def test_the_gate_misses_few_unsafe_critical_cases(errors):
    """Per critical case, over failures resting on judged checks alone (the only ones a judge can
    miss): at most 5 %. (Per case the false trips add up over a case's judged checks: see
    bench/gate_errors.py and docs/explanation/validity.md, "The critical gate's error rates".)"""
    value = errors.miss_case.value
    assert value is not None and value <= gate_figures.TARGET, "\n".join(errors.lines())
