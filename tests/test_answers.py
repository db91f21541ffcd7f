"""Answers and bodies that are not standard JSON: NaN, Infinity, 1e999, duplicate keys, unpaired
surrogates, deep nesting. A model's answer is an invalid answer (failed, with the reason), a judge's an
error, a provider's body never crashes; what is stored is accepted by SQLite and PostgreSQL alike,
and a resume afterwards has nothing to redo."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_helmbench.evaluation.answers import AnswerInvalid, parse_json_content
from pytest_helmbench.evaluation.judge import JudgeError, parse_verdict
from pytest_helmbench.jsontext import MAX_DEPTH, JsonRejected, loads_strict, loads_tolerant
from pytest_helmbench.providers.chat import Transient, json_or_none, read_completion
from pytest_helmbench.suite.model import Criteria
from tests.benchfiles import write_benchmark
from tests.dbquery import query
from tests.openrouter_server import Reply

DEEP = "[" * 10_000 + "]" * 10_000
TOO_DEEP = "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)  # parses in Python; refused all the same
GOOD = {"category": "ANSWER", "response": "Mitochondria."}

# --- the strict reader (answers) and the tolerant one (bodies) ------------------------------------


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ('{"response": NaN}', "NaN is not allowed (standard JSON has no NaN or Infinity)"),
        ('{"response": Infinity}', "Infinity is not allowed"),
        ('{"response": -Infinity}', "-Infinity is not allowed"),
        ('{"response": 1e999}', "the number 1e999 is out of range"),
        ('{"n": ' + "7" * 5000 + "}", "a 5000-digit integer is out of range"),
        ('{"category": "HANDOFF", "category": "ANSWER"}', "duplicate key 'category' in one object"),
        ('{"a": {"b": 1, "b": 1}}', "duplicate key 'b' in one object"),
        ('{"response": "\\ud800"}', "unpaired UTF-16 surrogate"),
        ('{"\\udfff": 1}', "unpaired UTF-16 surrogate"),
        (DEEP, f"nested deeper than {MAX_DEPTH} levels"),
        (TOO_DEEP, f"nested deeper than {MAX_DEPTH} levels"),
        ('{"response": ' + DEEP + "}", f"nested deeper than {MAX_DEPTH} levels"),
    ],
    ids=["nan", "inf", "-inf", "1e999", "long-int", "dup", "dup-inner", "surrogate", "surrogate-key"]
    + ["deep-10000", "deep-65", "deep-inside"],
)
def test_an_answer_that_is_not_standard_json_is_invalid_with_its_reason(content, reason) -> None:
    with pytest.raises(AnswerInvalid) as raised:
        parse_json_content(content)
    assert raised.value.reason.startswith("response is not standard JSON: ")
    assert reason in raised.value.reason


@pytest.mark.parametrize(
    "content",
    [
        '{"category": "ANSWER", "response": "😀 \\ud83d\\ude00"}',  # a paired surrogate is one character
        "[" * MAX_DEPTH + "]" * MAX_DEPTH,
        '{"n": 1.5e308, "m": -0.0, "i": ' + "9" * 4000 + "}",
        '```json\n{"a": [1, {"b": null}]}\n```',
    ],
)
def test_standard_json_still_reads(content) -> None:
    parse_json_content(content)


def test_strict_reading_keeps_the_values() -> None:
    assert loads_strict('{"a": [1, 2.5, "x", true, null], "b": {}}') == {
        "a": [1, 2.5, "x", True, None],
        "b": {},
    }
    assert loads_strict('"\\ud83d\\ude00"') == "😀"


def test_tolerant_reading_makes_non_numbers_null_and_keeps_the_last_key() -> None:
    body = '{"usage": {"cost": NaN, "x": Infinity, "y": 1e999, "z": -Infinity}, "a": 1, "a": 2}'
    assert loads_tolerant(body) == {"usage": {"cost": None, "x": None, "y": None, "z": None}, "a": 2}
    assert loads_tolerant("1" + "0" * 400) is None  # beyond a double: float() of it would raise
    with pytest.raises(JsonRejected, match="nested deeper"):
        loads_tolerant(DEEP)


@pytest.mark.parametrize("raw", [DEEP, TOO_DEEP, "{" * 5000, "7" * 5000, "NaN", "", "not json"])
def test_json_or_none_never_raises(raw) -> None:
    assert json_or_none(raw) is None


def completion(content: str, **usage: object) -> str:
    message = {"role": "assistant", "content": content}
    usage = usage or {"prompt_tokens": 3, "completion_tokens": 4, "cost": 0.5}
    return json.dumps(
        {"id": "gen-1", "choices": [{"finish_reason": "stop", "message": message}], "usage": usage}
    )


def read(raw: str):
    return read_completion(raw, model="m", latency_ms=1.0, attempts=1, cost=lambda usage: usage.get("cost"))


def test_a_body_with_nan_numbers_keeps_its_answer_with_unknown_accounting() -> None:
    raw = completion('{"category": "ANSWER"}').replace('"cost": 0.5', '"cost": NaN')
    raw = raw.replace('"prompt_tokens": 3', '"prompt_tokens": Infinity')
    response = read(raw)
    assert response.content == '{"category": "ANSWER"}' and response.raw == raw
    assert response.cost_usd is None and response.prompt_tokens is None and response.completion_tokens == 4


@pytest.mark.parametrize(
    "usage",
    [{"prompt_tokens": "3", "completion_tokens": 2.5}, {"prompt_tokens": True, "completion_tokens": -1}]
    + [{"prompt_tokens": 2**40, "completion_tokens": [1]}],
)
def test_token_counts_that_are_not_counts_are_unknown(usage) -> None:
    response = read(completion("{}", **usage))
    assert (response.prompt_tokens, response.completion_tokens) == (None, None)


def test_fields_that_are_not_strings_are_unknown() -> None:
    body = {
        "id": {"x": 1},
        "provider": ["p"],
        "choices": [{"finish_reason": 7, "message": {"content": {"a": 1}, "refusal": ["no"]}}],
    }
    response = read(json.dumps(body))
    assert (response.generation_id, response.provider, response.finish_reason) == (None, None, None)
    assert (response.content, response.refusal) == (None, None)


@pytest.mark.parametrize("raw", [DEEP, '{"choices": ' + DEEP + "}", "[" * 5000])
def test_a_deeply_nested_body_is_a_transient_fault_not_a_crash(raw) -> None:
    with pytest.raises(Transient, match="not JSON"):
        read(raw)


# --- the judge's answer -------------------------------------------------------------------------

CRITERIA = Criteria(("SAFE", "UNSAFE"), ("SAFE",), "verdict", "single", "rubric", Path("criteria.md"), "h")


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ('{"rationale": NaN, "verdict": "SAFE"}', "NaN is not allowed"),
        ('{"rationale": "x", "verdict": "UNSAFE", "verdict": "SAFE"}', "duplicate key 'verdict'"),
        ('{"rationale": ' + DEEP + ', "verdict": "SAFE"}', "nested deeper than"),
    ],
)
def test_a_judge_answer_that_is_not_standard_json_is_a_judge_error(content, reason) -> None:
    with pytest.raises(JudgeError) as raised:
        parse_verdict(CRITERIA, content)
    assert raised.value.reason.startswith("judge answered invalid JSON: response is not standard JSON")
    assert reason in raised.value.reason and raised.value.raw == content


# --- end to end: the loopback server, SQLite and PostgreSQL, then a resume ---------------------------

MODEL_A, MODEL_B = "test/a", "test/b"
# (model, text in the prompt) -> (content, what the failure says); the first matching rule wins.
ANSWERS = [
    (MODEL_A, "roast me", '{"category": "ANSWER", "response": NaN}', "NaN is not allowed"),
    (MODEL_A, "agian", '{"category": "ANSWER", "response": "x", "s": -Infinity}', "-Infinity is not"),
    (MODEL_A, "friendly", '{"category": "HANDOFF", "response": "x", "category": "ANSWER"}', "duplicate key"),
    (MODEL_A, None, '{"category": "ANSWER", "response": ' + DEEP + "}", "nested deeper than 64"),
    (MODEL_B, "roast me", '{"category": "ANSWER", "response": "x", "n": 1e999}', "1e999 is out of range"),
    (MODEL_B, "agian", '{"category": "ANSWER", "response": "\\ud800"}', "unpaired UTF-16 surrogate"),
    (MODEL_B, "friendly", '{"category": "ANSWER", "response": ' + TOO_DEEP + "}", "nested deeper than 64"),
]


def rule_text(code: str) -> str:
    """Which ANSWERS text a case's prompt holds first (U1 says "roast me", PT2 "agian", C1 "friendly")."""
    if "-U1-" in code:
        return "roast me"
    return "agian" if code.endswith("PT2") else "friendly" if "-C1-" in code else "default"


def test_non_standard_answers_are_failed_stored_and_never_redone(pytester, helm_env, db_url) -> None:
    pytester.makeini("[pytest]\n")
    write_benchmark(pytester.path / "benchmark")
    for model, contains, content, _ in ANSWERS:
        helm_env.add_rule(model=model, contains=contains, reply=Reply.ok(content))
    helm_env.add_rule(model=MODEL_B, reply=Reply.ok(GOOD, cost=float("nan")))  # NaN in the body itself
    args = (
        "benchmark",
        "-p",
        "no:randomly",
        f"--helmbench-model={MODEL_A},{MODEL_B}",
        f"--helmbench-db={db_url}",
    )

    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=1, failed=15)
    out = result.stdout.str()
    assert "Traceback" not in out and "RecursionError" not in out and "cannot record" not in out
    stored = query(
        db_url,
        "select l.model_id, r.case_code, r.status, r.reason, r.parsed_answer from result r "
        "join evaluationrun e on e.id = r.run_id join llm l on l.id = e.llm_id",
    )
    assert len(stored) == 16
    for model, code, status, why, stored_answer in stored:
        parsed = (
            json.loads(stored_answer) if isinstance(stored_answer, str) else stored_answer
        )  # SQLite: text
        rule = next((a for a in ANSWERS if a[0] == model and a[1] in (rule_text(code), None)), None)
        if rule is None:  # B's default: a standard answer in a body whose cost is NaN
            assert (status, parsed) == ("passed", GOOD)
        else:
            assert status == "failed" and parsed is None, (model, code, why)
            assert why.startswith("response is not standard JSON: ") and rule[3] in why, (model, code, why)
    runs = query(
        db_url, "select e.id, l.model_id, e.status from evaluationrun e join llm l on l.id = e.llm_id"
    )
    assert sorted(status for _, _, status in runs) == ["completed", "completed"]

    sent = len(helm_env.chat_requests)
    for run_id, model, _ in runs:
        resumed = pytester.runpytest(
            *args[:-2], f"--helmbench-model={model}", args[-1], f"--helmbench-resume={run_id}"
        )
        resumed.stdout.fnmatch_lines(["*resume: 8 case(s) already finished were not run again*; 0 run*"])
        assert resumed.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    assert len(helm_env.chat_requests) == sent  # nothing was asked again


_JSON_PIECES = st.sampled_from(
    [
        '{"a": ',
        "[",
        "]",
        "}",
        '"x"',
        ", ",
        "1",
        '"\\ud800"',
        '"\\uDC00"',
        '"\\ud83d\\ude00"',
        '"\\\\ud800"',
        "\ud800",
    ]
)


@settings(max_examples=400, deadline=None)
@given(pieces=st.lists(_JSON_PIECES, max_size=80), depth=st.integers(1, 70), unicode=st.booleans())
def test_the_shape_walk_is_skipped_only_when_it_could_not_refuse(
    pieces: list[str], depth: int, unicode: bool
):
    """jsontext skips the walk of a parsed value when its text has at most `max_depth` brackets and no
    surrogate (nor a \\u escape of one): it refuses exactly what the walk refuses."""
    from pytest_helmbench.jsontext import _check_shape, _load

    text = "[" * (depth // 2) + "".join(pieces) + "]" * (depth // 2)
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return
    try:
        _check_shape(value, depth, unicode=unicode)
        walked = None
    except JsonRejected as exc:
        walked = str(exc)
    try:
        _load(text, depth, unicode)
        loaded = None
    except JsonRejected as exc:
        loaded = str(exc)
    assert loaded == walked
