"""Executor.run: one case through the loopback server to a passed / failed / error Outcome."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_helmbench.config import ModelConfig, OptionSource, Settings, build_settings, load_models_file
from pytest_helmbench.errors import ConfigError
from pytest_helmbench.evaluation.builtin import builtin_registry
from pytest_helmbench.evaluation.judge import judge_messages
from pytest_helmbench.execution.executor import (
    CaseError,
    Executor,
    ModelStopped,
    StopBoard,
)
from pytest_helmbench.plugin.options import OPTIONS
from pytest_helmbench.providers.base import ProviderContext
from pytest_helmbench.providers.pool import ClientPool, build_request
from pytest_helmbench.redaction import Secret
from pytest_helmbench.suite.cases import Case, expand
from pytest_helmbench.suite.loader import BenchmarkLoader
from pytest_helmbench.suite.model import Scenario
from pytest_helmbench.suite.prompt import compose
from tests.benchfiles import CRITERIA, MODELS, write_benchmark, write_scenario
from tests.openrouter_server import FakeOpenRouter, Reply

KEY = "sk-runner-test-SECRET-42"
MODEL = "openai/gpt-4o-mini"
JUDGE = "judge/model"
GOOD = {"category": "ANSWER", "response": "The mitochondria."}
SQE_MD = """---
evaluation:
  type: sqe
---

## Your job

Answer the user's science question.
"""
MODELS_WITH_PREFS = """marking_model: judge/model
models:
  - id: openai/gpt-4o-mini
    max_tokens: 300
    provider: {data_collection: deny}
    reasoning: {effort: low}
"""


@pytest.fixture
def server() -> Iterator[FakeOpenRouter]:
    with FakeOpenRouter(api_keys={KEY}) as srv:
        yield srv


def benchmark(tmp_path: Path, models: str = MODELS) -> Path:
    root = write_benchmark(tmp_path / "benchmark", scenarios=("P1-B1-S1", "P1-B2-S1"), models=models)
    write_scenario(root, "P1-B2-S1", frontmatter_md=SQE_MD, criteria=CRITERIA)
    return root


def settings_for(root: Path, base_url: str, **options: Any) -> Settings:
    """build_settings as the plugin calls it, with options resolved from a dict over the defaults."""
    values: dict[str, Any] = {o.name: o.default for o in OPTIONS}
    values.update({"base-url": base_url, "retries": "1", "backoff": "0", "timeout": "5"})
    values.update({k.replace("_", "-"): v for k, v in options.items()})
    return build_settings(values.get, load_models_file(root / "models.yml"), root.parent, KEY)


class Harness:
    """A benchmark on disk, Settings pointing at the fake server, and an Executor over them."""

    def __init__(self, tmp_path: Path, server: FakeOpenRouter, models: str = MODELS, **options: Any) -> None:
        self.root = benchmark(tmp_path, models)
        self.loader = BenchmarkLoader(self.root, evaluation_types=builtin_registry())
        self.settings = settings_for(self.root, server.base_url, **options)
        self.pool = ClientPool(ProviderContext(self.settings))
        self.board = StopBoard(tmp_path / "stops")
        self.executor = Executor(self.settings, self.loader.info(), self.pool, self.board)

    def scenario(self, code: str) -> Scenario:
        return self.loader.load_scenario(self.root / "scenarios" / code)

    def cases(self, code: str = "P1-B1-S1") -> list[Case]:
        return expand(self.scenario(code), self.settings.model_ids)

    def run(self, case: Case) -> Any:
        return self.executor.run(
            case, compose(case), f"benchmark/scenarios/{case.scenario.code}/S1.md::{case.code}"
        )


@pytest.fixture
def harness(tmp_path: Path, server: FakeOpenRouter) -> Iterator[Harness]:
    h = Harness(tmp_path, server)
    yield h
    h.pool.close()


# ---- settings and requests ------------------------------------------------------------------------


def test_cases_and_settings_of_the_small_benchmark(harness: Harness, server: FakeOpenRouter) -> None:
    assert [c.code for c in harness.cases()] == [
        "P1-B1-S1-C1-PT1",
        "P1-B1-S1-C1-PT2",
        "P1-B1-S1-C1-U1-PT1",
        "P1-B1-S1-C1-U1-PT2",
        "P1-B1-S1-C2-PT1",
        "P1-B1-S1-C2-PT2",
        "P1-B1-S1-C2-U1-PT1",
        "P1-B1-S1-C2-U1-PT2",
    ]
    assert harness.settings.model_ids == [MODEL]
    assert harness.settings.marking_model == ModelConfig(JUDGE)
    assert (harness.settings.base_url, harness.settings.api, harness.settings.max_tokens) == (
        server.base_url,
        "openrouter",
        4096,
    )
    assert KEY not in repr(harness.settings)


def test_build_request_model_settings_win_over_run_options() -> None:
    settings = Settings(
        models=(),
        marking_model=None,
        db_url="sqlite://",
        base_url="http://127.0.0.1:1/api/v1",
        api="openrouter",
        dry_run=False,
        temperature=0.0,
        max_tokens=4096,
        seed=7,
        timeout=5.0,
        retries=0,
        backoff=0.0,
        api_key=KEY,
    )
    model = ModelConfig(
        "x/y",
        max_tokens=256,
        temperature=0.5,
        provider={"data_collection": "deny"},
        reasoning={"effort": "high"},
        extra_body={"top_p": 0.9},
    )
    req = build_request(model, settings, "hello", {"type": "json_schema"})
    assert req.body("openrouter") == {
        "model": "x/y",
        "messages": [{"role": "user", "content": "hello"}],
        "response_format": {"type": "json_schema"},
        "temperature": 0.5,
        "max_tokens": 256,
        "seed": 7,
        "provider": {"data_collection": "deny", "require_parameters": True},
        "reasoning": {"effort": "high"},
        "top_p": 0.9,
    }
    plain = build_request(ModelConfig("x/y"), settings, "hello", {"type": "json_schema"})
    assert (plain.temperature, plain.max_tokens, plain.seed, plain.provider, plain.reasoning) == (
        0.0,
        4096,
        7,
        None,
        None,
    )


# ---- passed / failed ------------------------------------------------------------------------------


def test_passed_outcome(harness: Harness, server: FakeOpenRouter) -> None:
    server.add_rule(reply=Reply.ok(GOOD, prompt_tokens=120, completion_tokens=9, cost=0.00031))
    case = harness.cases()[0]
    prompt = compose(case)
    outcome = harness.run(case)
    assert outcome.status == "passed"
    assert outcome.reason == "category is 'ANSWER' as expected"
    assert (outcome.expected, outcome.actual, outcome.answer) == ("ANSWER", "ANSWER", GOOD)
    assert (outcome.model, outcome.case_code) == (MODEL, "P1-B1-S1-C1-PT1")
    assert outcome.nodeid == "benchmark/scenarios/P1-B1-S1/S1.md::P1-B1-S1-C1-PT1"
    assert (outcome.prompt, outcome.prompt_hash) == (prompt.text, prompt.hash)
    assert (outcome.prompt_tokens, outcome.completion_tokens, outcome.cost_usd) == (120, 9, 0.00031)
    assert (outcome.finish_reason, outcome.attempts) == ("stop", 1)
    assert outcome.latency_ms is not None and outcome.latency_ms > 0
    assert outcome.judge_cost_usd is None
    assert outcome.details == {
        "evaluation": "category_match",
        "checks": [
            {
                "name": "category_match",
                "type": "category_match",
                "role": "evaluation",
                "status": "passed",
                "reason": "category is 'ANSWER' as expected",
                "judges": [],
            }
        ],
        # scoring version 3's sheet: a label that marks nothing harmful cannot tell harm, and no care is owed
        "sheet": {"version": 3, "harm": None, "harms": [], "care": [0, 0], "weight": 1.0},
    }
    assert json.loads(json.loads(outcome.raw_response)["choices"][0]["message"]["content"]) == GOOD
    assert outcome.provenance["scenario"]["code"] == "P1-B1-S1"
    assert outcome.provenance["condition"]["code"] == "C1"
    assert outcome.provenance["user_context"] is None
    (sent,) = server.chat_requests
    assert sent.body == {
        "model": MODEL,
        "messages": [{"role": "user", "content": prompt.text}],
        "response_format": case.scenario.response_format,
        "temperature": 0.0,
        "max_tokens": 4096,
        "provider": {"require_parameters": True},
    }
    assert sent.headers["authorization"] == f"Bearer {KEY}"


def test_failed_outcome(harness: Harness, server: FakeOpenRouter) -> None:
    server.add_rule(reply=Reply.ok({"category": "HANDOFF", "response": "Call someone."}))
    outcome = harness.run(harness.cases()[2])
    assert outcome.status == "failed"
    assert outcome.case_code == "P1-B1-S1-C1-U1-PT1"
    assert outcome.reason == "expected category 'ANSWER', got 'HANDOFF'"
    assert (outcome.expected, outcome.actual) == ("ANSWER", "HANDOFF")
    assert outcome.provenance["user_context"]["code"] == "U1"


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (Reply.ok("the mitochondria"), "response is not valid JSON: Expecting value (line 1, column 1)"),
        (Reply.refusal("I can't help with that."), "model refused: I can't help with that."),
        (
            Reply.ok({"category": "ANSWER"}),
            "response violates the scenario's JSON schema: (root): 'response' is a required property",
        ),
    ],
    ids=["prose", "refusal", "schema"],
)
def test_invalid_answers_are_failures(
    harness: Harness, server: FakeOpenRouter, reply: Reply, reason: str
) -> None:
    server.add_rule(reply=reply)
    outcome = harness.run(harness.cases()[0])
    assert (outcome.status, outcome.reason) == ("failed", reason)


def test_model_provider_preferences_reach_the_request(tmp_path: Path, server: FakeOpenRouter) -> None:
    h = Harness(tmp_path, server, models=MODELS_WITH_PREFS)
    server.add_rule(reply=Reply.ok(GOOD))
    assert h.run(h.cases()[0]).status == "passed"
    h.pool.close()
    body = server.chat_requests[0].body or {}
    assert body["provider"] == {"data_collection": "deny", "require_parameters": True}
    assert body["reasoning"] == {"effort": "low"}
    assert body["max_tokens"] == 300
    assert "max_completion_tokens" not in body


# ---- errors ---------------------------------------------------------------------------------------


def test_outage_is_a_case_error_not_a_failure(harness: Harness, server: FakeOpenRouter) -> None:
    server.add_rule(reply=Reply.error(502))
    with pytest.raises(CaseError) as info:
        harness.run(harness.cases()[0])
    outcome = info.value.outcome
    assert outcome.status == "error"
    assert outcome.reason == "HTTP 502: Provider returned error (gave up after 2 attempts)"
    assert str(info.value) == outcome.reason
    assert outcome.attempts == 2
    assert json.loads(outcome.raw_response)["error"]["code"] == 502
    assert (outcome.answer, outcome.prompt_tokens, outcome.cost_usd) == (None, None, None)
    assert len(server.chat_requests) == 2
    assert harness.board.stopped() == {}  # an outage does not stop the model


def test_moderation_block_is_a_case_error(harness: Harness, server: FakeOpenRouter) -> None:
    server.add_rule(reply=Reply.error(403, metadata={"reasons": ["self-harm"]}))
    with pytest.raises(CaseError) as info:
        harness.run(harness.cases()[0])
    assert info.value.outcome.status == "error"
    assert (
        info.value.outcome.reason
        == "blocked by provider moderation (HTTP 403): Input was flagged by moderation (reasons: self-harm)"
    )
    assert harness.board.stopped() == {}


def test_truncation_is_a_case_error_that_keeps_the_tokens(harness: Harness, server: FakeOpenRouter) -> None:
    server.add_rule(
        reply=Reply.truncated('{"category": "ANS', prompt_tokens=150, completion_tokens=4096, cost=0.002)
    )
    with pytest.raises(CaseError) as info:
        harness.run(harness.cases()[0])
    outcome = info.value.outcome
    assert outcome.status == "error"
    assert (
        outcome.reason == "truncated at max_tokens (4096 completion tokens, finish_reason: length): "
        "raise --helmbench-max-tokens"
    )
    assert "max_tokens" in str(info.value)
    assert (outcome.prompt_tokens, outcome.completion_tokens, outcome.cost_usd) == (150, 4096, 0.002)
    assert outcome.finish_reason == "length"
    assert json.loads(outcome.raw_response)["choices"][0]["message"]["content"] == '{"category": "ANS'
    assert outcome.answer is None


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (
            Reply.error(402),
            "HTTP 402: Insufficient credits. Add more using https://example.invalid/credits"
            " — the account has insufficient credits",
        ),
        (
            Reply.error(401, "User not found."),
            "HTTP 401: User not found. — check OPENROUTER_API_KEY (the key is missing or invalid)",
        ),
        (
            Reply.error(404),
            "HTTP 404: the model or its parameters were rejected: "
            "No endpoints found that can handle the requested parameters.",
        ),
    ],
    ids=["402", "401", "404"],
)
def test_rejected_model_is_stopped_for_the_session(
    tmp_path: Path, harness: Harness, server: FakeOpenRouter, reply: Reply, reason: str
) -> None:
    server.add_rule(reply=reply)
    first, second, third = harness.cases()[:3]
    with pytest.raises(CaseError) as info:
        harness.run(first)
    assert info.value.outcome.status == "error"
    assert info.value.outcome.reason == f"model {MODEL} stopped: {reason}"
    assert harness.board.reason(MODEL) == reason
    assert harness.board.stopped() == {MODEL: reason}
    with pytest.raises(ModelStopped) as stopped:
        harness.run(second)
    assert str(stopped.value) == f"model {MODEL} was stopped: {reason}"
    # another xdist worker sees the same board through its folder
    other = Executor(harness.settings, harness.loader.info(), harness.pool, StopBoard(tmp_path / "stops"))
    with pytest.raises(ModelStopped):
        other.run(third, compose(third), "x")
    assert len(server.chat_requests) == 1  # nothing more reached the server


def test_unknown_model_id_stops_the_model(tmp_path: Path, harness: Harness, server: FakeOpenRouter) -> None:
    server.known_models = {"someone/else"}
    with pytest.raises(CaseError) as info:
        harness.run(harness.cases()[0])
    assert (
        info.value.outcome.reason
        == f"model {MODEL} stopped: HTTP 400: the model or its parameters were rejected: "
        f"{MODEL} is not a valid model ID"
    )
    assert MODEL in harness.board.stopped()


def test_stop_board_keeps_other_models_running(tmp_path: Path) -> None:
    board = StopBoard(tmp_path / "board")
    board.stop("a/one", "HTTP 402: no credit\nsecond line")
    assert board.reason("a/one") == "HTTP 402: no credit\nsecond line"
    assert board.reason("a/two") is None
    assert StopBoard(tmp_path / "board").stopped() == {"a/one": "HTTP 402: no credit\nsecond line"}
    assert [p.suffix for p in (tmp_path / "board").iterdir()] == [".stop"]  # no temporary file left behind


# ---- sqe --------------------------------------------------------------------------------------------


def sqe_case(harness: Harness) -> Case:
    return harness.cases("P1-B2-S1")[0]


def test_sqe_passed_with_judge_accounting(harness: Harness, server: FakeOpenRouter) -> None:
    server.add_rule(model=MODEL, reply=Reply.ok(GOOD, prompt_tokens=100, completion_tokens=10, cost=0.001))
    server.add_rule(
        model=JUDGE,
        reply=Reply.ok(
            {"rationale": "Correct.", "verdict": "SAFE"}, prompt_tokens=500, completion_tokens=20, cost=0.003
        ),
    )
    case = sqe_case(harness)
    prompt = compose(case)
    outcome = harness.run(case)
    assert outcome.status == "passed"
    assert outcome.reason == "judge verdict 'SAFE' passes (pass values ['SAFE']): Correct."
    assert (outcome.expected, outcome.actual) == (["SAFE"], "SAFE")
    assert (outcome.cost_usd, outcome.judge_cost_usd) == (0.001, 0.003)
    assert (outcome.judge_prompt_tokens, outcome.judge_completion_tokens) == (500, 20)
    assert outcome.details["evaluation"] == "sqe"
    assert outcome.details["judge"]["values"] == ["SAFE"]
    assert outcome.details["judge"]["rationale"] == "Correct."
    model_call, judge_call = server.chat_requests
    assert model_call.model == MODEL and judge_call.model == JUDGE
    content = json.loads(outcome.raw_response)["choices"][0]["message"]["content"]
    sent = judge_messages(case.scenario.criteria, prompt.text, content)  # type: ignore[arg-type]
    nonce = judge_call.last_user_content.rsplit("END DATA ", 1)[1]
    assert judge_call.body is not None
    assert judge_call.body["messages"] == sent.messages(nonce)


def test_sqe_failed_verdict(harness: Harness, server: FakeOpenRouter) -> None:
    server.add_rule(model=MODEL, reply=Reply.ok(GOOD))
    server.add_rule(model=JUDGE, reply=Reply.ok({"rationale": "Wrong.", "verdict": "UNSAFE"}))
    outcome = harness.run(sqe_case(harness))
    assert outcome.status == "failed"
    assert outcome.reason == "judge verdict 'UNSAFE' fails (pass values ['SAFE']): Wrong."


@pytest.mark.parametrize(
    ("judge_reply", "reason"),
    [
        (
            Reply.ok("SAFE"),
            "judge answered invalid JSON: response is not valid JSON: Expecting value (line 1, column 1)",
        ),
        (
            Reply.error(500),
            "judge could not be reached: HTTP 500: Internal Server Error (gave up after 2 attempts)",
        ),
        (Reply.refusal("No."), "judge refused: No."),
    ],
    ids=["invalid-json", "unreachable", "refusal"],
)
def test_sqe_judge_failure_is_a_case_error_keeping_the_model_response(
    harness: Harness, server: FakeOpenRouter, judge_reply: Reply, reason: str
) -> None:
    server.add_rule(model=MODEL, reply=Reply.ok(GOOD, prompt_tokens=100, completion_tokens=10, cost=0.001))
    server.add_rule(model=JUDGE, reply=judge_reply)
    with pytest.raises(CaseError) as info:
        harness.run(sqe_case(harness))
    outcome = info.value.outcome
    assert outcome.status == "error"
    assert outcome.reason == reason
    raw = json.loads(outcome.raw_response)
    assert raw["model"] == MODEL
    assert json.loads(raw["choices"][0]["message"]["content"]) == GOOD
    assert (outcome.prompt_tokens, outcome.completion_tokens, outcome.cost_usd) == (100, 10, 0.001)
    assert "judge_raw" in outcome.details
    assert harness.board.stopped() == {}


def test_sqe_without_marking_model_is_a_case_error(tmp_path: Path, server: FakeOpenRouter) -> None:
    h = Harness(tmp_path, server, models="models:\n  - id: openai/gpt-4o-mini\n")
    server.add_rule(reply=Reply.ok(GOOD))
    with pytest.raises(CaseError) as info:
        h.run(sqe_case(h))
    h.pool.close()
    assert info.value.outcome.status == "error"
    assert info.value.outcome.reason == (
        "no marking model for this judged check: set marking_model in models.yml or --helmbench-marking-model"
    )
    assert len(server.chat_requests) == 1


def test_marking_model_option_overrides_models_file(tmp_path: Path, server: FakeOpenRouter) -> None:
    h = Harness(tmp_path, server, marking_model="other/judge")
    server.add_rule(model=MODEL, reply=Reply.ok(GOOD))
    server.add_rule(model="other/judge", reply=Reply.ok({"rationale": "ok", "verdict": "SAFE"}))
    assert h.run(sqe_case(h)).status == "passed"
    h.pool.close()
    assert [r.model for r in server.chat_requests] == [MODEL, "other/judge"]


def test_api_key_never_in_outcomes(harness: Harness, server: FakeOpenRouter) -> None:
    server.script(Reply.ok(GOOD), Reply.error(500), Reply.error(500))
    outcomes = [harness.run(harness.cases()[0])]
    with pytest.raises(CaseError) as info:
        harness.run(harness.cases()[1])
    outcomes.append(info.value.outcome)
    for outcome in outcomes:
        assert KEY not in json.dumps(outcome.to_dict(), default=str)


def test_pool_cancel_stops_every_client_including_ones_made_later(
    tmp_path: Path, server: FakeOpenRouter
) -> None:
    h = Harness(tmp_path, server)
    model = h.settings.models[0]
    before = h.pool.for_model(model)
    h.pool.cancel()
    assert before.cancel.is_set()
    local = h.pool.for_model(ModelConfig("local/other"))  # another endpoint, made after the stop
    assert local.cancel.is_set()
    h.pool.close()


def test_rejected_judge_stops_the_sqe_cases_before_their_answer_is_paid(
    harness: Harness, server: FakeOpenRouter
) -> None:
    """A judge key without credits (402): that case errors, later sqe cases are skipped without any
    call, and cases that need no judge still run."""
    server.add_rule(model=JUDGE, reply=Reply.error(402, "Insufficient credits"))
    first, second = harness.cases("P1-B2-S1")[:2]
    with pytest.raises(CaseError) as info:
        harness.run(first)
    assert info.value.outcome.reason.startswith("judge could not be reached: HTTP 402")
    assert [r.model for r in server.chat_requests] == [MODEL, JUDGE]
    with pytest.raises(
        ModelStopped, match=f"marking model {JUDGE} was stopped: as the marking model: HTTP 402"
    ):
        harness.run(second)
    assert len(server.chat_requests) == 2  # the second case's answer was not bought
    assert harness.run(harness.cases()[0]).status in ("passed", "failed")  # category_match needs no judge
    assert harness.board.stopped() == {
        JUDGE: "as the marking model: HTTP 402: Insufficient credits — the account has insufficient credits"
    }


def test_stop_board_of_a_single_process_answers_from_memory(tmp_path: Path) -> None:
    """Without xdist every stop is made in-process: the check before each call reads no file, and the
    file is still written for the summary."""
    board = StopBoard(tmp_path / "board", cross_process=False)
    assert board.reason("a/one") is None
    StopBoard(tmp_path / "board").stop("a/one", "HTTP 401: bad key")  # another process: not looked for
    assert board.reason("a/one") is None
    board.stop("b/two", "HTTP 402: no credit")
    assert board.reason("b/two") == "HTTP 402: no credit"
    assert board.stopped() == {"a/one": "HTTP 401: bad key", "b/two": "HTTP 402: no credit"}


# --- where the key goes (Settings.credential) ----------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "model", "env"),
    [
        (OptionSource.CLI, ModelConfig("a/b"), "OPENROUTER_API_KEY"),
        (OptionSource.ENV, ModelConfig("a/b"), "OPENROUTER_API_KEY"),
        (OptionSource.INI, ModelConfig("a/b"), None),
        (OptionSource.INI, ModelConfig("a/b", api_key_env="MY_KEY"), "MY_KEY"),
        (OptionSource.CLI, ModelConfig("a/b", base_url="http://127.0.0.1:9/v1"), None),
        (
            OptionSource.CLI,
            ModelConfig("a/b", base_url="http://127.0.0.1:9/v1", api_key_env="MY_KEY"),
            "MY_KEY",
        ),
        (OptionSource.INI, ModelConfig("a/b", base_url="https://openrouter.ai/api/v1"), "OPENROUTER_API_KEY"),
    ],
    ids=["cli", "env", "ini", "ini-named", "models-yml", "models-yml-named", "models-yml-openrouter"],
)
def test_the_key_goes_only_where_it_belongs(
    tmp_path: Path, source: OptionSource, model: ModelConfig, env: str | None
) -> None:
    root = write_benchmark(tmp_path / "benchmark")
    settings = replace(settings_for(root, "http://127.0.0.1:8/v1"), base_url_source=source)
    settings = settings.with_keys({"MY_KEY": Secret("sk-my-server-key-0001")})
    credential = settings.credential(model)
    assert (credential.env if credential else None) == env
    if env == "MY_KEY":
        assert credential is not None and credential.key.reveal() == "sk-my-server-key-0001"
    assert not settings.is_dry_run(needs_key=True, model=model)


def test_the_key_is_held_so_no_repr_shows_it(tmp_path: Path) -> None:
    settings = settings_for(write_benchmark(tmp_path / "benchmark"), "http://127.0.0.1:8/v1")
    assert isinstance(settings.api_key, Secret) and settings.api_key.reveal() == KEY
    for text in (repr(settings), str(settings), repr(settings.api_key), f"{settings.api_key}"):
        assert KEY not in text
    assert KEY not in repr(Settings(**{**settings.__dict__, "api_key": KEY}))  # a plain str is wrapped


def test_a_named_key_variable_unset_makes_that_model_a_dry_run(tmp_path: Path) -> None:
    settings = settings_for(write_benchmark(tmp_path / "benchmark"), "http://127.0.0.1:8/v1")
    model = ModelConfig("a/b", base_url="http://127.0.0.1:9/v1", api_key_env="UNSET_KEY")
    assert settings.is_dry_run(needs_key=True, model=model)
    assert not settings.is_dry_run(needs_key=True, model=ModelConfig("a/b", base_url="http://127.0.0.1:9/v1"))


@pytest.mark.parametrize("option", ["temperature", "timeout", "max-cost"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_numeric_settings_must_be_finite(tmp_path: Path, option: str, value: str) -> None:
    """`float()` reads 'nan' and 'inf'; no setting means them, so they are a usage error, not a NaN run."""
    root = benchmark(tmp_path)
    with pytest.raises(ConfigError, match=f"--helmbench-{option}: '{value}' is not a finite number"):
        settings_for(root, "http://127.0.0.1:9/api/v1", **{option: value})
