"""A cost nobody reported (an OpenAI-compatible server: no `usage.cost`, no price list) is stored as
NULL and shown as unknown — or as a lower bound with the count of unpriced calls — in the terminal
summary, `helmbench report`, `helmbench costs` and the estimate; never as $0.0000."""

from __future__ import annotations

import json

import pytest
from sqlmodel import Session
from typer.testing import CliRunner

from pytest_helmbench.cli import app
from pytest_helmbench.execution.unpriced import Unpriced
from pytest_helmbench.reporting.cost_text import usd, usd_cell
from pytest_helmbench.reporting.html_report import render_report
from pytest_helmbench.reporting.series import summaries, summary_line
from pytest_helmbench.storage.engine import make_engine
from pytest_helmbench.storage.queries import load_report_data, load_runs
from tests.dbquery import rows
from tests.openrouter_server import Reply

GOOD = {"category": "ANSWER", "response": "Mitochondria."}
MODEL = "openai/gpt-4o-mini"


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("benchmark", "-p", "no:randomly", "-p", "no:cacheprovider", *args)


def report(url: str):
    engine = make_engine(url)
    try:
        with Session(engine) as session:
            return load_report_data(session)
    finally:
        engine.dispose()


def test_usd_says_unknown_or_a_lower_bound():
    assert usd(0.0412) == "$0.0412" and usd(0.0) == "$0.0000"  # priced at 0 (a local model): known
    assert usd(0.0, 3) == "unknown (3 calls without a price)"
    assert usd(0.0412, 1) == "≥ $0.0412, 1 call without a price"
    assert (usd_cell(0.5), usd_cell(0.0, 2), usd_cell(0.5, 2)) == ("0.5000", "unknown", "≥0.5000")
    assert Unpriced(1, 2) + Unpriced(3, 0) == Unpriced(4, 2) and Unpriced(4, 2).total == 6


def test_a_server_that_reports_no_cost_gives_unknown_everywhere(pytester, bench, helm_env, monkeypatch):
    helm_env.add_rule(reply=Reply.ok(GOOD, cost="missing"))  # no usage.cost, and no price in /models
    result = run(pytester, "--helmbench-api=openai", f"--helmbench-base-url={helm_env.openai_base_url}")
    assert result.ret == 0
    out = result.stdout.str()
    assert "cost unknown (8 calls without a price) (+ judge $0.0000)" in out and "cost $0.0000" not in out
    db = pytester.path / "helmbench.db"
    assert rows(db, "select distinct cost_usd from result") == [(None,)]  # NULL, not 0
    assert rows(db, "select cost_usd from evaluationrun") == [(0.0,)]  # the known part of the sum

    data = report(f"sqlite:///{db}")
    assert data.runs[0].unpriced == Unpriced(8, 0)
    [summary] = summaries(data)
    assert "| cost unknown (8 calls without a price) |" in summary_line(summary)
    page = render_report(data)
    assert "unknown (8 calls without a price)" in page and "8 calls without a price: the server" in page

    monkeypatch.chdir(pytester.path)
    costs = CliRunner().invoke(app, ["costs"]).stdout.splitlines()
    assert costs[1].split()[-3:] == ["unknown", "0.0000", "unknown"]
    assert "run 1: 8 calls without a price (model)" in costs[2]
    assert costs[-1] == "total: unknown (8 calls without a price) over 1 run(s)"


def test_some_calls_priced_make_a_lower_bound_and_cached_answers_cost_nothing(pytester, bench, helm_env):
    helm_env.add_rule(contains="agian", reply=Reply.ok(GOOD, cost="missing"))
    helm_env.add_rule(reply=Reply.ok(GOOD, cost=0.001))
    result = run(pytester)
    assert "cost ≥ $0.0040, 4 calls without a price" in result.stdout.str()
    again = run(pytester)  # temperature 0: every answer replayed from the cache, nothing paid now
    assert "cost $0.0000 (+ judge $0.0000) | 8 from cache" in again.stdout.str()
    db = pytester.path / "helmbench.db"
    url = f"sqlite:///{db}"
    engine = make_engine(url)
    try:
        with Session(engine) as session:
            assert [r.unpriced for r in load_runs(session, [1, 2])] == [Unpriced(4, 0), Unpriced()]
    finally:
        engine.dispose()


def test_postgresql_counts_unpriced_calls_and_keeps_the_known_sum(pytester, bench, helm_env, postgres_url):
    helm_env.add_rule(contains="agian", reply=Reply.ok(GOOD, cost="missing"))
    helm_env.add_rule(reply=Reply.ok(GOOD, cost=0.001))
    assert run(pytester, f"--helmbench-db={postgres_url}").ret == 0
    data = report(postgres_url)
    assert data.runs[0].cost_usd == pytest.approx(0.004)  # the recorder's counters skip NULL
    assert data.runs[0].unpriced == Unpriced(4, 0)


def test_the_estimate_says_unknown_without_a_price(pytester, bench, helm_env):
    result = run(pytester, "--helmbench-estimate")
    assert "unknown (no price in /models or --helmbench-prices)" in result.stdout.str()
    assert "$0.0000" not in result.stdout.str()
    assert "could not be fetched" not in result.stdout.str()  # /models answered: it lacks the model
    assert helm_env.chat_requests == []


# --- #31.6: a price file for when /models cannot price (offline, a self-hosted server) ---------------

PRICES_YML = (
    f"{MODEL}: {{prompt: 0.000001, completion: 0.000002}}\njudge/model: {{prompt: 0, completion: 0}}\n"
)


def test_offline_the_estimate_says_prices_could_not_be_fetched_and_a_price_file_prices_it(
    pytester, bench, helm_env
):
    """No server answers /models (offline): each unpriced line says so once, with the fix; with
    --helmbench-prices the estimate is priced from the file."""
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}/api/v1"
    offline = ("--helmbench-estimate", f"--helmbench-base-url={closed}", "--helmbench-retries=0")
    out = run(pytester, *offline).stdout.str()
    assert "unknown (no price in /models or --helmbench-prices)" in out
    assert f"prices could not be fetched from {closed}/models: what is marked unknown has no price" in out
    (pytester.path / "prices.yml").write_text(PRICES_YML)
    priced = run(pytester, *offline, "--helmbench-prices=prices.yml")
    assert priced.ret == 0
    out = priced.stdout.str()
    assert "unknown" not in out and "could not be fetched" not in out, out
    assert "estimated total: $0.0" in out


def test_a_price_file_prices_the_calls_a_server_reports_no_cost_for(pytester, bench, helm_env):
    """An OpenAI-compatible server reports tokens but no cost: the file's price makes the stored cost
    tokens × price (not NULL), and a ceiling can be kept."""
    helm_env.add_rule(reply=Reply.ok(GOOD, cost="missing"))
    (pytester.path / "prices.yml").write_text(PRICES_YML)
    server = ("--helmbench-api=openai", f"--helmbench-base-url={helm_env.openai_base_url}")
    result = run(pytester, *server, "--helmbench-prices=prices.yml", "--helmbench-max-cost=5")
    assert result.ret == 0, result.stdout.str()[-2000:]
    stored = rows(
        pytester.path / "helmbench.db", "select cost_usd, prompt_tokens, completion_tokens from result"
    )
    assert stored and all(cost == pytest.approx(p * 1e-6 + c * 2e-6) for cost, p, c in stored), stored


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (f"{MODEL}: {{prompt: -1, completion: 0}}\n", f"{MODEL} prompt: -1 is not a price in USD per token"),
        (f"{MODEL}: {{prompt: .nan, completion: 0}}\n", "is not a price in USD per token"),
        (f"{MODEL}: {{prompt: 0}}\n", "no completion price"),
        (f"{MODEL}: {{prompt: 0, completion: 0, tip: 1}}\n", "unknown price 'tip'"),
        ("- just a list\n", "holds no mapping of model ids to prices"),
        ("a: [b\n", "is not valid YAML"),
        ('{"data": [{"id": "m", "pricing": {"prompt": "x", "completion": "0"}}]}', "data[0] (m) prompt: 'x'"),
        ("a: &x {prompt: 0, completion: 0}\nb: *x\n", "is not valid YAML"),
    ],
)
def test_a_bad_price_file_is_a_usage_error_naming_the_file_and_the_fix(pytester, bench, helm_env, text, says):
    (pytester.path / "prices.yml").write_text(text)
    result = run(pytester, "--helmbench-prices=prices.yml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "--helmbench-prices prices.yml" in err and says in err, err
    assert "Traceback" not in err and helm_env.chat_requests == []


def test_a_saved_models_answer_is_a_price_file(tmp_path):
    from pytest_helmbench.providers.chat import Pricing
    from pytest_helmbench.providers.prices import read_price_file

    saved = tmp_path / "models.json"
    entries = [
        {"id": "a/b", "pricing": {"prompt": "0.000001", "completion": "0.000002", "image": "0.1"}},
        {"id": "openrouter/auto"},
        {"id": "c/d", "pricing": {"prompt": "0", "completion": "0", "request": "0.01"}},
    ]
    saved.write_text(json.dumps({"data": entries}))
    assert read_price_file(saved) == {"a/b": Pricing(1e-6, 2e-6), "c/d": Pricing(0.0, 0.0, 0.01)}
