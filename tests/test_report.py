"""`helmbench report`: the database read back (dataset), the HTML page drawn in headless Chromium, no XSS.

The data come from real HELMBench sessions (pytester) against the loopback server: two models,
passes, failures, errors, an sqe judge, a critical scenario, and a model whose answer (and a
benchmark whose titles) carry script and onerror payloads.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from contextlib import closing
from datetime import UTC
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml
from sqlmodel import Session
from typer.testing import CliRunner

from pytest_helmbench import cli
from pytest_helmbench.reporting.analytics import score
from pytest_helmbench.reporting.html_report import render_report
from pytest_helmbench.storage.engine import make_engine
from pytest_helmbench.storage.queries import (
    DatasetError,
    ReportData,
    load_case_results,
    load_failures,
    load_labels,
    load_report_data,
    load_runs,
    resolve_run_ids,
)
from tests.benchfiles import SCENARIO, write, write_benchmark, write_scenario
from tests.openrouter_server import FakeOpenRouter, Reply

GOOD_MODEL, EVIL_MODEL = "good/model", "evil/model"
SCRIPT_PAYLOAD = "<script>window.__pwned=1;document.title='PWNED'</script>"
IMG_PAYLOAD = "<img src=x onerror=\"document.title='PWNED'\">"
GOOD = {"category": "ANSWER", "response": "Mitochondria."}
WRONG = {"category": "HANDOFF", "response": "Please call a helpline."}
EVIL = {"category": "HANDOFF", "response": f"Sure. {SCRIPT_PAYLOAD}{IMG_PAYLOAD}"}
EVIL_RATIONALE = f"The answer echoed markup {IMG_PAYLOAD} {SCRIPT_PAYLOAD}"
BEHAVIOUR_TITLES = {
    "P1-B1": f"Answers plainly </script>{SCRIPT_PAYLOAD}",
    "P1-B2": f"Judged safely {IMG_PAYLOAD} & more",
}

SQE_SCENARIO = SCENARIO.replace(
    "category: ANSWER\nevaluation:\n  type: category_match\n  field: category\n",
    "critical: true\nevaluation:\n  type: sqe\n",
)
CRITERIA = (
    "---\noptions: [SAFE, UNSAFE]\npass_values: [SAFE]\nresponse_field: verdict\n---\n\n"
    "## Checks\n\n- UNSAFE if the answer contains markup.\n"
)

INSTALL_HINT = (
    "headless Chromium is needed to check that reports draw their charts and never run model text: "
    "install it with `apt-get update && apt-get install -y chromium` (Debian/Ubuntu; .ci/run does this), "
    "or point $CHROMIUM at a Chromium/Chrome binary"
)


# ---------------------------------------------------------------------------------------------
# Building real runs


def build_benchmark(root: Path) -> Path:
    """Two behaviours: P1-B1-S1 (category_match) and P1-B2-S1 (sqe, critical); titles carry payloads."""
    write_benchmark(root)
    write_scenario(root, "P1-B2-S1", frontmatter_md=SQE_SCENARIO, criteria=CRITERIA)
    info = {
        "version": "0.1",
        "description": "report test",
        "pillars": {"P1": {"name": "Crisis <b>care</b>", "description": "d"}},
        "behaviours": {
            code: {"title": title, "description": "d", "compliance": "c"}
            for code, title in BEHAVIOUR_TITLES.items()
        },
    }
    write(root / "benchmark.yml", yaml.safe_dump(info, sort_keys=False))
    return root


def script_server(server: FakeOpenRouter) -> None:
    """good/model: fails the slang perturbation; evil/model: echoes markup, errors on the user context."""
    server.add_rule(
        model="judge/model",
        contains="PWNED",
        reply=Reply.ok({"rationale": EVIL_RATIONALE, "verdict": "UNSAFE"}, cost=0.01),
    )
    server.add_rule(model="judge/model", reply=Reply.ok({"rationale": "fine", "verdict": "SAFE"}, cost=0.01))
    server.add_rule(model=EVIL_MODEL, contains="roast me", reply=Reply.error(500, "upstream down"))
    server.add_rule(model=EVIL_MODEL, reply=Reply.ok(EVIL, cost=0.002))
    server.add_rule(model=GOOD_MODEL, contains="agian", reply=Reply.ok(WRONG, cost=0.001))
    server.add_rule(model=GOOD_MODEL, reply=Reply.ok(GOOD, cost=0.001))


def run_benchmark(
    pytester: pytest.Pytester, *args: str, models: str = f"{GOOD_MODEL},{EVIL_MODEL}"
) -> pytest.RunResult:
    return pytester.runpytest(
        "benchmark",
        "-p",
        "no:randomly",
        "-p",
        "no:xdist",
        "--helmbench-retries=0",
        f"--helmbench-model={models}",
        *args,
    )


_BUILT: dict[str, Path] = {}  # the recorded session's database, built once per test process


def copy_db(source: Path, target: Path) -> None:
    """A consistent copy of a SQLite database (WAL included)."""
    with closing(sqlite3.connect(source)) as src, closing(sqlite3.connect(target)) as dst:
        src.backup(dst)


@pytest.fixture
def recorded(
    pytester: pytest.Pytester, helm_env: FakeOpenRouter, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """A database holding one real session of both models, in the test's own folder; returns its path.

    The session is really run once per test process, then each test gets its own copy (tests may
    change it, and may run more sessions against the same benchmark and server script).
    """
    pytester.makeini("[pytest]\n")
    build_benchmark(pytester.path / "benchmark")
    script_server(helm_env)
    target = pytester.path / "helmbench.db"
    if "db" in _BUILT:
        copy_db(_BUILT["db"], target)
        return target
    result = run_benchmark(pytester)
    result.assert_outcomes(passed=12, failed=12, errors=8)
    _BUILT["db"] = tmp_path_factory.mktemp("recorded") / "helmbench.db"
    copy_db(target, _BUILT["db"])
    return target


def session_for(db: Path) -> Session:
    return Session(make_engine(f"sqlite:///{db}"))


def sql(db: Path, query: str) -> list[tuple]:
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute(query).fetchall()


# ---------------------------------------------------------------------------------------------
# Headless Chromium


def chromium_binary() -> str:
    """The Chromium to test with; fails (never skips) with install instructions when there is none."""
    for candidate in (
        os.environ.get("CHROMIUM"),
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
        shutil.which("google-chrome"),
        "/usr/bin/chromium",
    ):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    pytest.fail(INSTALL_HINT, pytrace=False)


@pytest.fixture(scope="module")
def chromium() -> str:
    return chromium_binary()


def dump_dom(browser: str, page: Path, profile: Path, *, script: bool = True) -> str:
    """The DOM after the page's scripts ran (no network: file URL, CSP, background networking off).

    ``script=False`` disables JavaScript through the profile's content setting: this Chromium's
    headless mode prints nothing with ``--blink-settings=scriptEnabled=false`` and ignores
    ``--disable-javascript``.
    """
    if not script:
        (profile / "Default").mkdir(parents=True, exist_ok=True)
        settings = {"profile": {"default_content_setting_values": {"javascript": 2}}}
        (profile / "Default" / "Preferences").write_text(json.dumps(settings), encoding="utf-8")
    command = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--virtual-time-budget=5000",
        "--dump-dom",
        page.resolve().as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=90)
    assert done.returncode == 0 and "<html" in done.stdout, (
        f"chromium failed ({done.returncode}): {done.stderr[-2000:]}"
    )
    return done.stdout


class Dom(HTMLParser):
    """Start tags with their attributes and the ids of their ancestors; the document title."""

    VOID = {
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "source",
        "track",
        "wbr",
    }

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str], tuple[str, ...]]] = []
        self.stack: list[tuple[str, str]] = []
        self.title = ""
        self._in_title = False
        self.texts: list[tuple[str, tuple[str, ...]]] = []  # SVG <text> contents with ancestor ids
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {k: v or "" for k, v in attrs}
        self.elements.append((tag, attributes, tuple(i for _, i in self.stack if i)))
        self._in_title = tag == "title" and not self.stack_has("svg")
        if tag not in self.VOID:
            self.stack.append((tag, attributes.get("id", "")))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, {k: v or "" for k, v in attrs}, tuple(i for _, i in self.stack if i)))

    def handle_endtag(self, tag: str) -> None:
        self._in_title = False
        for index in range(len(self.stack) - 1, -1, -1):
            if self.stack[index][0] == tag:
                del self.stack[index:]
                break

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        if self.stack and self.stack[-1][0] == "text":
            self.texts.append((data, tuple(i for _, i in self.stack if i)))

    def text_in(self, inside: str) -> list[str]:
        return [t for t, ids in self.texts if inside in ids]

    def stack_has(self, tag: str) -> bool:
        return any(t == tag for t, _ in self.stack)

    def find(self, tag: str, cls: str | None = None, inside: str | None = None) -> list[dict[str, str]]:
        return [
            a
            for t, a, ids in self.elements
            if t == tag
            and (cls is None or cls in a.get("class", "").split())
            and (inside is None or inside in ids)
        ]


def assert_not_pwned(dom: Dom) -> None:
    """Neither payload ran: the title is untouched and no element carries the injected attributes."""
    assert "PWNED" not in dom.title
    assert not [a for _, a, _ in dom.elements if "onerror" in a], (
        "an injected onerror attribute became live markup"
    )
    assert not [a for a in dom.find("img") if a.get("src") == "x"], "model text became an <img> element"


# ---------------------------------------------------------------------------------------------
# dataset


def test_dataset_reads_runs_results_failures_and_labels(recorded):
    with session_for(recorded) as session:
        runs = load_runs(session)
        results = load_case_results(session)
        failures = load_failures(session)
        labels = load_labels(session)
    assert [(r.model, r.status, r.passed, r.failed, r.errors) for r in runs] == [
        (EVIL_MODEL, "completed", 0, 8, 8),
        (GOOD_MODEL, "completed", 12, 4, 0),
    ]
    evil_run = runs[0]
    # four judged critical failures: each judged once, then re-judged 3 times (--helmbench-rejudge)
    assert evil_run.cost_usd == pytest.approx(8 * 0.002) and evil_run.judge_cost_usd == pytest.approx(
        4 * (1 + 3) * 0.01
    )
    assert (
        evil_run.prompt_tokens > 0
        and evil_run.options["temperature"] == 0.0
        and evil_run.finished_at is not None
    )
    assert len(results) == 32 == sql(recorded, "select count(*) from result")[0][0]
    by_key = {(r.model, r.case_code): r for r in results}
    r = by_key[(GOOD_MODEL, "P1-B2-S1-C2-U1-PT2")]
    assert (r.pillar, r.behaviour, r.scenario, r.condition, r.user_context, r.perturbation) == (
        "P1",
        "P1-B2",
        "P1-B2-S1",
        "C2",
        "U1",
        "PT2",
    )
    assert (r.condition_severity, r.user_context_severity, r.perturbation_severity, r.perturbation_style) == (
        2,
        1,
        2,
        "slang",
    )
    assert r.critical and r.status == "passed" and r.repeat == 0 and r.run_id == runs[1].id
    base = by_key[(EVIL_MODEL, "P1-B1-S1-C1-PT1")]
    assert (
        base.user_context,
        base.user_context_severity,
        base.condition_severity,
        base.critical,
        base.status,
    ) == (None, 0, -1, False, "failed")
    assert score(x for x in results if x.model == GOOD_MODEL).n_passed == 12

    assert len(failures) == 20 and {f.status for f in failures} == {"failed", "error"}
    judged = next(f for f in failures if f.model == EVIL_MODEL and f.case_code == "P1-B2-S1-C1-PT1")
    assert (
        judged.judge_verdict == ("UNSAFE",) and judged.judge_rationale == EVIL_RATIONALE and judged.critical
    )
    assert (
        SCRIPT_PAYLOAD in judged.raw_response
        and judged.parsed_answer == EVIL
        and judged.prompt.startswith("<your_job>")
    )
    matched = next(f for f in failures if f.model == GOOD_MODEL and f.case_code == "P1-B1-S1-C1-PT2")
    assert (matched.expected, matched.actual, matched.judge_verdict) == ("ANSWER", "HANDOFF", None)
    errored = next(f for f in failures if f.status == "error")
    assert "HTTP 500" in errored.reason and errored.model == EVIL_MODEL
    assert [f.case_code for f in failures[:3]] == [
        "P1-B1-S1-C1-PT1",
        "P1-B1-S1-C1-PT2",
        "P1-B1-S1-C1-U1-PT1",
    ]  # code order

    assert labels.behaviour_titles == BEHAVIOUR_TITLES and labels.pillar_names == {"P1": "Crisis <b>care</b>"}
    assert labels.condition_titles == {
        "C1": "friendly tutor",
        "C2": "terse",
    } and labels.user_context_titles == {"U1": "Nigel"}


def test_default_selection_is_the_latest_run_of_each_model(recorded, pytester):
    run_benchmark(pytester, "--helmbench-select=P1-B1-S1-C1-U0-PT1", models=GOOD_MODEL).assert_outcomes(
        passed=1
    )
    first = dict(
        sql(
            recorded,
            "select l.model_id, min(r.id) from evaluationrun r join llm l on l.id = r.llm_id "
            "group by l.model_id",
        )
    )
    with session_for(recorded) as session:
        latest = load_runs(session)
        assert [(r.id, r.model) for r in latest] == [(first[EVIL_MODEL], EVIL_MODEL), (3, GOOD_MODEL)]
        assert len(load_case_results(session)) == 16 + 1
        assert [r.id for r in load_runs(session, [3, first[GOOD_MODEL]])] == [first[GOOD_MODEL], 3]
        assert len(load_case_results(session, [first[GOOD_MODEL]])) == 16
        assert resolve_run_ids(session, None, all_runs=True) == [1, 2, 3]
        with pytest.raises(DatasetError, match=r"no run with id 9 \(known runs: 1-3\)"):
            load_report_data(session, [9])


def test_empty_database_is_a_clear_error(tmp_path):
    from pytest_helmbench.storage.engine import upgrade

    url = f"sqlite:///{tmp_path / 'empty.db'}"
    upgrade(url)
    with Session(make_engine(url)) as session:
        with pytest.raises(DatasetError, match="holds no evaluation run"):
            load_report_data(session)


# ---------------------------------------------------------------------------------------------
# The HTML page


def test_report_draws_every_chart_and_never_runs_model_text(recorded, chromium, tmp_path):
    with session_for(recorded) as session:
        data = load_report_data(session, source="test.db")
    page = render_report(data)
    # Static guarantees: exactly our one script element, no markup from stored text, nothing to fetch.
    assert page.lower().count("<script") == 1
    assert (
        SCRIPT_PAYLOAD not in page
        and IMG_PAYLOAD not in page
        and "<img" not in page
        and "<b>care" not in page
    )
    assert (
        "default-src 'none'" in page
        and "<link" not in page
        and 'src="http' not in page
        and "@import" not in page
    )
    path = tmp_path / "report.html"
    path.write_text(page, encoding="utf-8")

    dom_text = dump_dom(chromium, path, tmp_path / "profile")
    dom = Dom(dom_text)
    assert dom.title == "HELMBench report"
    assert_not_pwned(dom)
    root = dom.find("html")[0]
    assert root.get("data-script") == "ready", (
        f"the page's script did not run cleanly: {root.get('data-script')}"
    )
    cells = dom.find("rect", "cell", inside="heatmap")
    assert sorted((c["data-model"], c["data-behaviour"]) for c in cells) == sorted(
        (m, b) for m in (EVIL_MODEL, GOOD_MODEL) for b in ("P1-B1", "P1-B2")
    )
    cell_scores = {(c["data-model"], c["data-behaviour"]): float(c["data-score"]) for c in cells}
    for (model, behaviour), shown in cell_scores.items():
        assert shown == pytest.approx(
            score(r for r in data.results if r.model == model and r.behaviour == behaviour).score, abs=0.01
        )
    assert cell_scores[(GOOD_MODEL, "P1-B2")] == 100 and cell_scores[(EVIL_MODEL, "P1-B1")] < 10
    bars = dom.find("rect", "bar", inside="conditions")
    assert {(b["data-model"], b["data-condition"]) for b in bars} == {
        (m, c) for m in (EVIL_MODEL, GOOD_MODEL) for c in ("C1", "C2")
    }
    effects = dom.find("g", "effect", inside="attribution")
    assert {(e["data-model"], e["data-factor"], e["data-level"]) for e in effects} >= {
        (GOOD_MODEL, "style", "slang"),
        (GOOD_MODEL, "condition", "C2"),
        (GOOD_MODEL, "user_context", "U1"),
    }
    assert len(dom.find("line", "ci", inside="attribution")) == len(effects)
    assert len(dom.find("circle", "point", inside="scores")) == 2
    assert {g["data-run"] for g in dom.find("g", "cost", inside="cost")} == {"1", "2"}
    failures = dom.find("details", "failure")
    assert len(failures) == 20 and {f["data-status"] for f in failures} == {"failed", "error"}
    # The payloads are shown as text, escaped, in the drill-down and the labels.
    assert "&lt;script&gt;window.__pwned=1;document.title='PWNED'&lt;/script&gt;" in dom_text
    assert "&lt;img src=x onerror=" in dom_text and "The answer echoed markup &lt;img" in dom_text
    assert "Judged safely &lt;img src=x onerror=" in dom_text and "Crisis &lt;b&gt;care&lt;/b&gt;" in dom_text
    gates = {row["data-gate"] for row in dom.find("tr") if "data-gate" in row}
    assert gates == {"failed", "passed"}


def test_one_model_report_shows_its_charts_with_script_disabled(recorded, chromium, tmp_path):
    """Charts are inline SVG drawn in Python: a mail client, a CI artifact viewer or a printout shows them."""
    good_run = sql(
        recorded,
        "select r.id from evaluationrun r join llm l on l.id = r.llm_id where l.model_id = 'good/model'",
    )[0][0]
    with session_for(recorded) as session:
        data = load_report_data(session, [good_run])
    path = tmp_path / "one.html"
    path.write_text(render_report(data), encoding="utf-8")

    dom = Dom(dump_dom(chromium, path, tmp_path / "profile", script=False))
    assert "data-script" not in dom.find("html")[0], "the page's script ran: JavaScript was not disabled"
    assert_not_pwned(dom)
    for chart in ("scores", "heatmap", "conditions", "attribution", "cost"):
        svgs = dom.find("svg", inside=chart)
        assert len(svgs) == 1 and svgs[0]["role"] == "img" and svgs[0]["aria-label"], chart
    good = [r for r in data.results if r.model == GOOD_MODEL]
    overall = score(good)
    assert GOOD_MODEL in dom.text_in("scores")
    assert any(t.startswith(f"score {overall.score:.1f} \u00b7 pass 75.0%") for t in dom.text_in("scores"))
    assert len(dom.find("circle", "point", inside="scores")) == 1
    heatmap = dom.text_in("heatmap")
    assert {GOOD_MODEL, "P1-B1", "P1-B2"} <= set(heatmap)
    for behaviour in ("P1-B1", "P1-B2"):
        assert f"{score(r for r in good if r.behaviour == behaviour).score:.1f}" in heatmap
    conditions = dom.text_in("conditions")
    assert {GOOD_MODEL, "C1", "C2"} <= set(conditions)
    for condition in ("C1", "C2"):
        assert f"{score(r for r in good if r.condition == condition).score:.0f}" in conditions
    bars = dom.find("rect", "bar", inside="conditions")
    assert sorted(b["data-condition"] for b in bars) == ["C1", "C2"]
    assert {"Condition", "User context", "Perturbation style"} <= set(dom.text_in("attribution"))


def test_report_numbers_gates_and_repeats(recorded):
    with (
        closing(sqlite3.connect(recorded)) as conn,
        conn,
    ):  # a second attempt of every good/model case: pass^2 appears
        columns = [
            c[1] for c in conn.execute("pragma table_info(result)") if c[1] not in ("id", "repeat_index")
        ]
        conn.execute(
            f"insert into result ({', '.join(columns)}, repeat_index) "
            f"select {', '.join(columns)}, 1 from result where run_id = "
            "(select r.id from evaluationrun r join llm l on l.id = r.llm_id where l.model_id = ?)",
            (GOOD_MODEL,),
        )
        conn.execute(
            "update result set status = 'failed' where repeat_index = 1 and case_code = 'P1-B1-S1-C1-PT1'"
        )
    with session_for(recorded) as session:
        data = load_report_data(session)
    page = render_report(data)
    assert "pass^k" in page and "k=2" in page
    assert '<tr data-gate="failed"><th scope="row">evil/model</th>' in page
    assert 'href="#failure-' in page  # a failed critical case links to its drill-down
    assert "71.9%" in page  # good/model: 23 of 32 attempts passed
    from pytest_helmbench.reporting.series import summaries, summary_line

    lines = {s.model: summary_line(s) for s in summaries(data)}
    assert (
        lines[GOOD_MODEL].startswith("good/model (instructed (the model is shown the categories)): harm ")
        and "pass^2 68.8%" in lines[GOOD_MODEL]
    )  # 11 of 16 cases
    assert "critical gate passed" in lines[GOOD_MODEL]
    assert (
        "critical gate failed (P1-B2-S1-C1-PT1, P1-B2-S1-C1-PT2, P1-B2-S1-C2-PT1, P1-B2-S1-C2-PT2)"
        in lines[EVIL_MODEL]
    )


def test_report_of_runs_with_nothing_scored_still_draws(chromium, tmp_path):
    """A run without results and a model whose every case errored: charts show their empty states."""
    from datetime import datetime

    from pytest_helmbench.reporting.analytics import CaseResult
    from pytest_helmbench.storage.queries import Labels, RunInfo

    now = datetime.now(UTC)
    runs = [
        RunInfo(id, model, status, "s", now, None, 0, 0, 0, errors, 0, 0.0, 0.0, 0, 0, {})
        for id, model, status, errors in ((1, "a/empty", "interrupted", 0), (2, "b/errors", "completed", 1))
    ]
    errored = CaseResult(
        "b/errors",
        2,
        "P1-B1-S1-C1-PT1",
        "P1",
        "P1-B1",
        "P1-B1-S1",
        "C1",
        0,
        None,
        0,
        "PT1",
        0,
        None,
        "error",
        critical=True,
    )
    page = render_report(ReportData(runs, [errored], [], Labels()))
    assert (
        "No failed or errored case" in page
        and '<tr data-gate="incomplete"><th scope="row">b/errors</th>' in page
    )
    path = tmp_path / "empty.html"
    path.write_text(page, encoding="utf-8")
    dom = Dom(dump_dom(chromium, path, tmp_path / "profile"))
    assert dom.find("html")[0].get("data-script") == "ready"
    cells = dom.find("rect", "cell", inside="heatmap")
    assert [(c["data-model"], c["data-score"]) for c in cells] == [("a/empty", ""), ("b/errors", "")]


def test_report_with_twenty_thousand_results(recorded):
    """Load and render 20,000 results (how fast is bench material; this checks it completes and is cut)."""
    with closing(sqlite3.connect(recorded)) as conn, conn:
        columns = [
            c[1] for c in conn.execute("pragma table_info(result)") if c[1] not in ("id", "repeat_index")
        ]
        listed = ", ".join(columns)
        conn.execute(
            # 32 x 625 = 20,000
            "with recursive n(k) as (select 1 union all select k + 1 from n where k < 624) "
            f"insert into result ({listed}, repeat_index) "
            f"select {listed}, n.k from result, n where repeat_index = 0"
        )

    assert sql(recorded, "select count(*) from result")[0][0] == 20_000
    with session_for(recorded) as session:
        data = load_report_data(session)
        page = render_report(data, max_failures=500)
    assert len(data.results) == 20_000 and len(data.failures) == 12_500
    assert page.count('class="failure"') == 500 and "12000 more failures are not shown" in page


# ---------------------------------------------------------------------------------------------
# pytest-html


def test_pytest_html_report_never_runs_model_text(pytester, helm_env, chromium, tmp_path):
    pytester.makeini("[pytest]\n")
    write_benchmark(pytester.path / "benchmark")
    helm_env.add_rule(contains="powerhouse", reply=Reply.ok(EVIL))
    result = pytester.runpytest(
        "benchmark",
        "-p",
        "no:randomly",
        "--helmbench-select=C1-U0-PT1",
        "--html=r.html",
        "--self-contained-html",
    )
    result.assert_outcomes(failed=1)
    report = pytester.path / "r.html"
    dom_text = dump_dom(chromium, report, tmp_path / "profile")
    dom = Dom(dom_text)
    assert_not_pwned(dom)
    assert "r.html" in dom.title  # pytest-html titles the page after its file
    assert "P1-B1-S1-C1-PT1" in dom_text  # the report was rendered, the failing case listed
    assert (
        "&lt;script&gt;window.__pwned=1;document.title='PWNED'&lt;/script&gt;" in dom_text
    )  # shown, as text


# ---------------------------------------------------------------------------------------------
# The command


def test_report_command_writes_the_page_and_one_line_per_model(recorded, monkeypatch):
    monkeypatch.chdir(recorded.parent)
    result = CliRunner().invoke(cli.app, ["report", "--out", "out/page.html"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "wrote out/page.html (2 run(s), 32 results, 20 failures and errors)"
    assert (
        lines[1].startswith(
            "evil/model (instructed (the model is shown the categories)): harm n/a | care n/a | "
            "critical harm n/a | over-escalation n/a | "
        )
        and "perfect replies 0.0% | 0 passed, 8 failed, 8 errors" in lines[1]
        and "critical gate failed" in lines[1]
    )
    assert (
        lines[2].startswith("good/model (instructed (the model is shown the categories)): harm ")
        and "12 passed, 4 failed, 0 errors" in lines[2]
    )
    assert (recorded.parent / "out/page.html").read_text().startswith("<!DOCTYPE html>")
    good_run = sql(
        recorded,
        "select r.id from evaluationrun r join llm l on l.id = r.llm_id where l.model_id = 'good/model'",
    )[0][0]
    result = CliRunner().invoke(
        cli.app, ["report", "--run-id", str(good_run), "--out", "one.html", "--db", f"sqlite:///{recorded}"]
    )
    assert (
        result.exit_code == 0
        and result.output.splitlines()[1].startswith("good/model (instructed")
        and len(result.output.splitlines()) == 2
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["--run-id", "7"], "error: no run with id 7 (known runs: 1-2)"),
        (["--out", "/proc/forbidden/report.html"], "error: cannot write /proc/forbidden/report.html"),
        (["--db", "sqlite:///nowhere/none.db"], "error: no database at nowhere/none.db"),
        (["--db", "notaurl://"], "error: "),
    ],
)
def test_report_command_bad_input(recorded, monkeypatch, args, message):
    monkeypatch.chdir(recorded.parent)
    result = CliRunner().invoke(cli.app, ["report", *args])
    assert result.exit_code == 1
    assert result.output.startswith(message) and result.output.count("\n") == 1, result.output
    assert "Traceback" not in result.output and isinstance(
        result.exception, SystemExit
    )  # a clean exit, not a crash


def test_report_command_on_an_empty_database(tmp_path, monkeypatch):
    from pytest_helmbench.storage.engine import upgrade

    monkeypatch.chdir(tmp_path)
    upgrade(f"sqlite:///{tmp_path / 'helmbench.db'}")
    monkeypatch.delenv("HELMBENCH_DB", raising=False)
    result = CliRunner().invoke(cli.app, ["report"])
    assert (
        result.exit_code == 1
        and result.output == "error: the database holds no evaluation run yet (run the benchmark first)\n"
    )
    assert not (tmp_path / "report.html").exists()
