"""What CI sees of a run: JUnit XML valid against Jenkins' junit-10.xsd with each case's metadata, and
short summaries (-rA, --tb=line, JUnit messages) that give a case's reason, with skips located at the
scenario file."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema

from tests.benchfiles import write_benchmark
from tests.openrouter_server import Reply

SCHEMA = xmlschema.XMLSchema(str(Path(__file__).with_name("junit-10.xsd")))
WRONG = {"category": "HANDOFF", "response": "Please call a helpline."}
GOOD = {"category": "ANSWER", "response": "Mitochondria."}
MODEL, DRY_MODEL = "openai/gpt-4o-mini", "other/dry-model"
FAILED_REASON = "expected category 'ANSWER', got 'HANDOFF'"


@pytest.fixture
def bench(pytester: pytest.Pytester, helm_env, monkeypatch) -> Path:
    """Two models: the first's cases pass (PT1 without a user context), fail (PT2 without one) and error
    (with U1); the second names a key variable that is not set, so its cases are dry-run skips."""
    monkeypatch.delenv("HELMBENCH_DRY_RUN_KEY", raising=False)
    pytester.makeini("[pytest]\n")
    helm_env.add_rule(contains="roast me", reply=Reply.error(500, "upstream down"))
    helm_env.add_rule(contains="agian", reply=Reply.ok(WRONG))
    helm_env.add_rule(contains="powerhouse", reply=Reply.ok(GOOD))
    models = (
        f"models:\n  - id: {MODEL}\n  - id: {DRY_MODEL}\n    base_url: {helm_env.base_url}\n"
        "    api_key_env: HELMBENCH_DRY_RUN_KEY\n"
    )
    return write_benchmark(pytester.path / "benchmark", models=models)


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("benchmark", "--helmbench-retries=0", *args)


def junit_cases(path: Path) -> dict[str, ET.Element]:
    return {case.get("name", ""): case for case in ET.parse(path).getroot().iter("testcase")}


def metadata(case: ET.Element) -> dict[str, str]:
    """The case's `helmbench_*` values: from <system-out> lines (xunit2) or <properties> (xunit1)."""
    found = {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
    for out in case.iter("system-out"):
        for line in (out.text or "").splitlines():
            name, _, value = line.partition("=")
            if name.startswith("helmbench_"):
                found[name] = value
    return found


def assert_every_outcome(result: pytest.RunResult) -> None:
    result.assert_outcomes(passed=2, failed=2, errors=4, skipped=8)


@pytest.mark.parametrize("family", [None, "xunit2"], ids=["default-family", "xunit2"])
def test_junit_xml_validates_against_junit_10_xsd_with_the_metadata_in_system_out(pytester, bench, family):
    args = ["--junitxml=junit.xml"] + (["-o", f"junit_family={family}"] if family else [])
    result = run(pytester, *args)
    assert_every_outcome(result)
    junit = pytester.path / "junit.xml"
    SCHEMA.validate(str(junit))  # raises, naming the element, when invalid
    cases = junit_cases(junit)
    assert not [name for name, case in cases.items() if case.find("properties") is not None]
    passed = metadata(cases[f"P1-B1-S1-C1-PT1[{MODEL}]"])
    assert passed == {
        "helmbench_code": "P1-B1-S1-C1-PT1",
        "helmbench_model": MODEL,
        "helmbench_scenario": "P1-B1-S1",
        "helmbench_condition": "C1",
        "helmbench_user_context": "",
        "helmbench_perturbation": "PT1",
        "helmbench_repeat": "0",
        "helmbench_layout": "seed",
        "helmbench_status": "passed",
        "helmbench_reason": "category is 'ANSWER' as expected",
    }
    failed = cases[f"P1-B1-S1-C1-PT2[{MODEL}]"]
    assert failed.find("failure").get("message") == FAILED_REASON  # the reason, not the case's code
    assert metadata(failed)["helmbench_status"] == "failed"
    errored = cases[f"P1-B1-S1-C1-U1-PT1[{MODEL}]"]
    assert errored.find("error").get("message").startswith('failed on setup with "HTTP 500: upstream down')
    assert metadata(errored)["helmbench_user_context"] == "U1"
    skipped = cases[f"P1-B1-S1-C1-PT1[{DRY_MODEL}]"]
    assert skipped.find("skipped").get("message") == "dry run"
    assert metadata(skipped) | {"helmbench_status": "skipped", "helmbench_reason": "dry run"} == metadata(
        skipped
    )


def test_the_checker_rejects_what_pytest_writes_for_testcase_properties(tmp_path):
    """The schema really refuses <properties> inside a testcase (what xunit2 output used to hold)."""
    bad = tmp_path / "bad.xml"
    bad.write_text(
        '<testsuites><testsuite name="s" tests="1" failures="0" errors="0"><testcase name="t">'
        '<properties><property name="a" value="b"/></properties></testcase></testsuite></testsuites>'
    )
    assert not SCHEMA.is_valid(str(bad))


def test_xunit1_keeps_the_metadata_as_testcase_properties(pytester, bench):
    result = run(pytester, "--junitxml=junit.xml", "-o", "junit_family=xunit1")
    assert_every_outcome(result)
    cases = junit_cases(pytester.path / "junit.xml")
    for name, case in cases.items():
        properties = {p.get("name"): p.get("value") for p in case.iter("property")}
        assert properties["helmbench_code"] == name.partition("[")[0], name
        assert {"helmbench_model", "helmbench_status", "helmbench_reason"} <= properties.keys()
        assert not [out for out in case.iter("system-out") if "helmbench_" in (out.text or "")]
    failed = cases[f"P1-B1-S1-C1-PT2[{MODEL}]"]
    assert {p.get("name"): p.get("value") for p in failed.iter("property")}[
        "helmbench_reason"
    ] == FAILED_REASON


def test_junit_xml_under_xdist_is_valid_and_carries_the_metadata(pytester, bench):
    result = run(pytester, "--junitxml=junit.xml", "-n", "2")
    assert_every_outcome(result)
    SCHEMA.validate(str(pytester.path / "junit.xml"))
    cases = junit_cases(pytester.path / "junit.xml")
    assert len(cases) == 16
    assert all(metadata(case)["helmbench_code"] == name.partition("[")[0] for name, case in cases.items())


def test_short_summary_gives_the_reason_and_skips_point_at_the_scenario_file(pytester, bench, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # room for the reason after the long node ids
    result = run(pytester, "-rA")
    assert_every_outcome(result)
    out = result.stdout.str()
    scenario = "benchmark/scenarios/P1-B1-S1/S1.md"
    result.stdout.fnmatch_lines(
        [
            f"SKIPPED [[]8[]] {scenario}:1: dry run",
            f"ERROR {scenario}::P1-B1-S1-C1-U1-PT1?{MODEL}? - HTTP 500: upstream down (gave up after 1 *)",
            f"FAILED {scenario}::P1-B1-S1-C1-PT2?{MODEL}? - {FAILED_REASON}",
        ]
    )
    assert "items.py" not in out
    # The failure's own section starts with the reason too, before the case's prompt and response.
    result.stdout.fnmatch_lines([f"*P1-B1-S1-C1-PT2 [[]{MODEL}[]]*", FAILED_REASON, "HELMBench FAILED *"])


def test_the_full_short_summary_on_ci_is_the_reason_alone(pytester, bench, monkeypatch):
    """On CI (or with -vv) pytest prints a failure's whole message in the summary: the reason only,
    never the composed prompt or the raw response."""
    monkeypatch.setenv("CI", "true")
    result = run(pytester, "-rfE", "--tb=no")
    summary = result.stdout.str().split("short test summary info", 1)[1]
    assert f"::P1-B1-S1-C1-PT2[{MODEL}] - {FAILED_REASON}\n" in summary
    assert "composed prompt" not in summary and "powerhouse" not in summary


def test_tb_line_names_the_scenario_file_and_the_reason(pytester, bench):
    result = run(pytester, "--tb=line")
    result.stdout.fnmatch_lines([f"*benchmark/scenarios/P1-B1-S1/S1.md:1: {FAILED_REASON}"])
