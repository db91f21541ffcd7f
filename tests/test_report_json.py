"""`helmbench report --format json` (issue #25, "Done when"): each model's headline as data, in a shape
that is a contract, checked against the JSON Schema shipped with the package; a run of the oracle
models on a few cases of the shipped benchmark (a critical scenario, a control, an ordinary one)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from typer.testing import CliRunner

from pytest_helmbench.cli import app
from pytest_helmbench.reporting.json_report import ReportContractError, check_document, report_schema
from tests.dbquery import query
from tests.oracle_figures import BENCHMARK, copy_benchmark
from tests.test_cli_conventions import plain as usage_text
from tests.workbench_helpers import env

# The tests of the module-scoped run share one worker (xdist), which makes it once.
pytestmark = pytest.mark.xdist_group("report_json")

runner = CliRunner()
JUDGE = "oracle/judge"
# an ordinary scenario, a critical one, a control: every figure has something to stand on
SELECT = "P1-B1-S1-C2-U0-PT1,P1-B1-S3-C1-U0-PT1,P1-B3-S1-C2-U0-PT1,P1-B3-S1-C2-U1-PT2"
FIGURES = ("harm_rate", "critical_harm_rate", "over_escalation_rate", "care_score", "perfect_reply_rate")
KEYS = ["model", "run_ids", "layout", *FIGURES, "judge_corrected", "basis"]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> str:
    """oracle/safe and oracle/unsafe on four cases of the shipped benchmark, judged by oracle/judge, in
    a pytest process of their own, once for the module's tests (they only read it); the database's URL."""
    folder = tmp_path_factory.mktemp("recorded")
    (folder / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    url = f"sqlite:///{folder / 'results.db'}"
    done = subprocess.run(
        [
            sys.executable, "-m", "pytest", str(BENCHMARK), "-o", f"helmbench_root={BENCHMARK}",
            "--helmbench-model=oracle/safe,oracle/unsafe", f"--helmbench-marking-model={JUDGE}",
            f"--helmbench-select={SELECT}", f"--helmbench-db={url}", "--helmbench-cache=off",
            "-p", "no:cacheprovider", "-q",
        ],
        cwd=folder, env=env(), capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 1 and "4 failed, 4 passed" in done.stdout, done.stdout[-3000:] + done.stderr
    return url


def report(url: str, *args: str):
    return runner.invoke(app, ["report", "--format", "json", *args, "--db", url])


@pytest.mark.e2e  # its module-scoped run is a pytest process
def test_the_json_report_is_the_contract_and_validates_against_its_schema(recorded, tmp_path):
    out = tmp_path / "out" / "headline.json"
    written = report(recorded, "--out", str(out))
    assert written.exit_code == 0, written.output
    assert written.stdout == "" and "wrote the JSON report of 2 model(s), 2 run(s) to " in written.stderr
    document = json.loads(out.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(report_schema())
    assert list(Draft202012Validator(report_schema()).iter_errors(document)) == []
    assert list(document) == ["scoring_version", "models"] and document["scoring_version"] == 3
    safe, unsafe = document["models"]
    runs = dict(query(recorded, "select l.model_id, e.id from evaluationrun e join llm l on l.id = e.llm_id"))
    for entry, model in ((safe, "oracle/safe"), (unsafe, "oracle/unsafe")):
        assert list(entry) == KEYS
        assert (entry["model"], entry["run_ids"], entry["layout"]) == (model, [runs[model]], "seed")
        assert entry["judge_corrected"] is None  # no estimator of judge error yet: said by the null
        for name in FIGURES:
            assert set(entry[name]) == {"value", "ci_low", "ci_high"}, name
    # rates are fractions, the care score is out of 100
    assert safe["harm_rate"]["value"] == 0.0 and unsafe["harm_rate"]["value"] == 1.0
    assert unsafe["critical_harm_rate"]["value"] == 1.0 and safe["critical_harm_rate"]["value"] == 0.0
    assert unsafe["over_escalation_rate"]["value"] == 1.0 and safe["over_escalation_rate"]["value"] == 0.0
    # under the shipped tiers (only yellow care checks count in care) the unsafe oracle's care is 50
    assert safe["care_score"]["value"] == pytest.approx(100.0) and unsafe["care_score"]["value"] <= 50.0
    assert (safe["perfect_reply_rate"]["value"], unsafe["perfect_reply_rate"]["value"]) == (1.0, 0.0)


@pytest.mark.e2e  # its module-scoped run is a pytest process
def test_the_report_says_the_figures_each_run_stored(recorded):
    """One computation: the JSON of a run is the headline the run stored at its end."""
    [(run_id, stored)] = query(
        recorded,
        "select e.id, e.scores from evaluationrun e join llm l on l.id = e.llm_id "
        "where l.model_id = 'oracle/safe'",
    )
    stored = stored if isinstance(stored, dict) else json.loads(stored)
    written = report(recorded, "--run-id", str(run_id), "--out", "-")
    assert written.exit_code == 0, written.output
    [entry] = json.loads(written.stdout)["models"]
    assert entry["run_ids"] == [run_id]
    assert {name: entry[name] for name in FIGURES} == {name: stored[name] for name in FIGURES}
    assert "to standard output" in written.stderr


@pytest.mark.e2e  # its module-scoped run is a pytest process
def test_exports_and_the_pandas_api_carry_harm_and_care(recorded):
    """Per reply in `helmbench export` and results(db), per run in scores(db): the same figures."""
    from pytest_helmbench.results import results, scores

    exported = runner.invoke(app, ["export", "--format", "jsonl", "--db", recorded])
    assert exported.exit_code == 0, exported.output
    rows = [json.loads(line) for line in exported.stdout.splitlines()]
    assert len(rows) == 8
    for row in rows:
        assert row["harm"] is (row["model"] == "oracle/unsafe")
        assert 0 <= row["care_earned"] <= row["care_possible"] and row["scenario_weight"] in (1.0, 2.0)
        # P1-B1-S3 (imminent risk, weight 2): every check that applies to its C1-PT1 case is red, a harm
        # when missed, not care; its yellow care checks (a minor, memory) do not apply there
        assert (row["care_possible"] == 0) is (row["case_code"] == "P1-B1-S3-C1-PT1"), row["case_code"]
    frame = results(recorded)
    assert str(frame.harm.dtype) == "boolean" and frame.care_earned.sum() == sum(
        r["care_earned"] for r in rows
    )
    document = json.loads(report(recorded).stdout)
    by_model = scores(recorded).set_index("model")
    for entry in document["models"]:
        for name in ("harm_rate", "care_score"):
            assert by_model.loc[entry["model"], name] == entry[name]["value"]
            assert by_model.loc[entry["model"], f"{name}_low"] == entry[name]["ci_low"]


@pytest.mark.e2e  # its module-scoped run is a pytest process
def test_standard_output_holds_only_the_document(recorded):
    written = report(recorded)  # --format json without --out: standard output
    assert written.exit_code == 0, written.output
    check_document(json.loads(written.stdout))


def test_nothing_scored_for_a_figure_is_null(pytester, bench, helm_env):
    """A benchmark whose only check is a label that marks nothing harmful, with no control and no
    critical scenario: only the perfect-reply rate stands on something; the rest are null, never 0."""
    from tests.openrouter_server import Reply

    helm_env.add_rule(reply=Reply.ok({"category": "ANSWER", "response": "Mitochondria."}))
    pytester.runpytest("benchmark", "--helmbench-cache=off").assert_outcomes(passed=8)
    written = report(f"sqlite:///{pytester.path / 'helmbench.db'}")
    assert written.exit_code == 0, written.output
    [entry] = json.loads(written.stdout)["models"]
    assert [name for name in FIGURES if entry[name] is None] == [
        "harm_rate",
        "critical_harm_rate",
        "over_escalation_rate",
        "care_score",
    ]
    assert entry["perfect_reply_rate"] == {"value": 1.0, "ci_low": 1.0, "ci_high": 1.0}


@pytest.mark.e2e  # its module-scoped run is a pytest process
def test_errors_are_one_line(recorded, tmp_path):
    missing = report(recorded, "--run-id", "999")
    assert missing.exit_code == 1 and missing.output.startswith("error: no run with id 999")
    assert "Traceback" not in missing.output
    blocked = tmp_path / "file"
    blocked.write_text("x")
    unwritable = report(recorded, "--out", str(blocked / "headline.json"))
    assert unwritable.exit_code == 1 and unwritable.output.startswith(f"error: cannot write {blocked}")


def test_the_html_page_to_standard_output_is_a_usage_error(tmp_path, monkeypatch):
    """No pytester run here (see test_results_frames.test_parquet_needs_a_file): a usage error."""
    monkeypatch.chdir(tmp_path)
    page = runner.invoke(app, ["report", "--out", "-"])
    assert page.exit_code == 2 and "Invalid value for '--out': the HTML report is a page" in usage_text(
        page.output
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda d: d.update(scoring_version=2), "scoring_version"),
        (lambda d: d["models"][0]["harm_rate"].update(value=1.5), "models/0/harm_rate"),
        (lambda d: d["models"][0]["care_score"].update(ci_high=100.5), "models/0/care_score"),
        (lambda d: d["models"][0].pop("judge_corrected"), "models/0"),
        (lambda d: d["models"][0].update(layout="instructed"), "models/0/layout"),
        (lambda d: d["models"][0].update(extra=1), "models/0"),
        (lambda d: d["models"][0].update(judge_corrected={"harm_rate": None}), "models/0/judge_corrected"),
    ],
)
def test_the_schema_refuses_what_breaks_the_contract(change, where):
    figure = {"value": 0.25, "ci_low": 0.1, "ci_high": 0.4}
    document = {
        "scoring_version": 3,
        "models": [
            {
                "model": "m",
                "run_ids": [1],
                "layout": "seed",
                "harm_rate": figure,
                "critical_harm_rate": None,
                "over_escalation_rate": None,
                "care_score": {"value": 62.5, "ci_low": 50.0, "ci_high": 75.0},
                "perfect_reply_rate": figure,
                "judge_corrected": None,
            }
        ],
    }
    check_document(json.loads(json.dumps(document)))  # the unchanged document passes
    change(document)
    with pytest.raises(ReportContractError, match=f"at {where}:"):
        check_document(document)


def test_the_schema_is_package_data():
    import pytest_helmbench.reporting as reporting

    assert (Path(reporting.__file__).parent / "templates" / "report-v3.schema.json").is_file()
    assert report_schema()["properties"]["scoring_version"] == {"const": 3}


def test_a_conversation_stores_a_sheet_per_judged_reply_and_the_page_shows_harm_and_care(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A simulated conversation (several judged replies): each reply's sheet is stored with its turn, the
    case's combines them, harm and care are read back per turn, and the report page leads with them."""
    from sqlmodel import Session

    from pytest_helmbench.reporting.harm_care import by_turn
    from pytest_helmbench.storage.engine import make_engine
    from pytest_helmbench.storage.queries import load_case_results

    for name in ("HELMBENCH_MODEL", "HELMBENCH_MARKING_MODEL", "HELMBENCH_DB", "HELMBENCH_SELECT"):
        monkeypatch.delenv(name, raising=False)
    pytester.makeini("[pytest]\n")
    copy_benchmark(pytester.path)
    url = f"sqlite:///{pytester.path / 'results.db'}"
    pytester.runpytest(
        "benchmark",
        "--helmbench-model=oracle/safe,oracle/unsafe",
        f"--helmbench-marking-model={JUDGE}",
        "--helmbench-user-model=oracle/user",
        "--helmbench-select=P1-B1-S4-C1-U0-PT1",
        f"--helmbench-db={url}",
        "--helmbench-cache=off",
        "-p",
        "no:cacheprovider",
    ).assert_outcomes(passed=1, failed=1)
    stored = dict(
        query(
            url,
            "select l.model_id, r.evaluation_details from result r join evaluationrun e on e.id = r.run_id "
            "join llm l on l.id = e.llm_id",
        )
    )
    for model, details in stored.items():
        details = details if isinstance(details, dict) else json.loads(details)
        turns = details["turns"]
        assert len(turns) > 1 and all("sheet" in turn for turn in turns), model
        assert details["sheet"]["care"] == [
            sum(t["sheet"]["care"][0] for t in turns),
            sum(t["sheet"]["care"][1] for t in turns),
        ]
        assert details["sheet"]["harm"] is any(t["sheet"]["harm"] for t in turns)
        assert details["sheet"]["weight"] == 2.0  # imminent risk
    engine = make_engine(url)
    try:
        with Session(engine) as session:
            results = load_case_results(session)
    finally:
        engine.dispose()
    safe = by_turn([r for r in results if r.model == "oracle/safe"])
    assert len(safe) > 1 and all(f.harm_rate is not None and f.harm_rate.value == 0.0 for f in safe.values())
    page = pytester.path / "page.html"
    written = runner.invoke(app, ["report", "--out", str(page), "--db", url])
    assert written.exit_code == 0, written.output
    html = page.read_text(encoding="utf-8")
    assert '<section id="harm-care">' in html and 'id="harm-care-behaviour"' in html
    assert 'id="harm-care-perturbation-severity"' in html and "Harm rate (95% CI)" in html
    assert written.output.splitlines()[1].startswith(
        "oracle/safe (instructed (the model is shown the categories)): harm 0.0% [95% CI 0.0%-0.0%] | "
        "care 100.0/100"
    )
