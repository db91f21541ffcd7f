"""Oracle models: built-in answerers that prove the benchmark cannot be gamed (no network, no key).

* `oracle/safe` answers each case with its scenario's safe reference answer (references.yml): the
  perturbation's variant when the references give one (a message in another language is answered
  in it), the reply of the case's locale when they give that locale;
* `oracle/unsafe` with the unsafe reference answer;
* `oracle/label-gamer` with the unsafe reference's `response` and every other field (labels, lists)
  of the safe answer: a model that labels a harmful reply correctly;
* `oracle/borderline-safe` and `oracle/borderline-unsafe` with the scenario's `borderline_safe` /
  `borderline_unsafe` answers (the near misses either side of the line), following the transcript's
  safe / unsafe side after a conversation's first reply;
* `oracle/refuse-all` with a polite refusal and, in every enum field, the highest-priority label;
* `oracle/kitchen-sink`, `oracle/hedger` and `oracle/over-escalator`, the template oracles
  (oracle_templates.py): one fixed reply for every case, built to game a score;
* `oracle/judge`, a marking model: the stored gold verdict of any reference or calibration reply
  of the rubric it is asked about, and an error (never a guess) for any other reply; asked for an
  extraction (the deployed layout), the labels of the reference answer that holds the reply;
* `oracle/noisy-judge-P` (P a whole percent, 0 to 50): `oracle/judge` wrong on a share P/100 of its
  calls — a call's verdict is flipped (a pass made a failure by one required check answered the
  wrong way, a failure made a pass by every check answered the passing way) when a draw seeded by
  the request (rubric, prompt, graded text, the call's seed) falls below P/100; each vote of a
  critical verdict carries its own seed, so its draws are independent, and a run's --helmbench-seed
  moves them all. It measures how the critical gate fares with a judge of a known error rate;
* `oracle/user`, a simulated user: the user turns of the perturbation's reference transcript, in
  order, then the end of the conversation.

An answer oracle finds the case by its opening messages among every case of the benchmark, in either
layout (oracle_index.py); at the model's k-th reply of a conversation it answers the k-th answer of
the perturbation's reference transcript (`transcripts:` in references.yml), else the scenario's
answer. In the deployed layout (no response_format) it answers the reply alone, as plain text.
Anything it does not know is a CallError: the case is an ERROR, not a score.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

from ..config import ModelConfig
from ..errors import BenchmarkError, HelmbenchError
from ..jsontext import response_text
from ..suite.gold import Gold, check_gold, gold_values
from ..suite.model import Criteria
from ..suite.prompt import GUIDANCE_TAG
from ..suite.references import BORDERLINE_SAFE, ReferenceAnswer, References
from .base import ClientCache, InProcessClient, ModelClient, Provider, ProviderContext
from .chat import CallError, ChatRequest, ModelRejected, Pricing
from .judge_wire import is_extraction, read_judge_messages
from .oracle_index import CaseEntry, LazyIndex, OracleIndex, RubricGold, gold_key, reply_key
from .oracle_templates import REFUSAL, TEMPLATES, template_answer, template_reply
from .user_agent_wire import read_user_agent_messages

PREFIX = "oracle/"
LABEL_PRIORITY = ("EMERGENCY", "HANDOFF", "REDIRECT", "SUPPORT", "ANSWER")
ANSWERERS = (
    "safe",
    "unsafe",
    "label-gamer",
    "refuse-all",
    "borderline-safe",
    "borderline-unsafe",
    *TEMPLATES,
)
KNOWN = tuple(PREFIX + name for name in (*ANSWERERS, "judge", "user"))
NOISY_JUDGE = re.compile(r"^oracle/noisy-judge-(\d{1,2})$")  # its per-call error, in whole percent


def noise_rate(model_id: str) -> float | None:
    """The per-call error of an `oracle/noisy-judge-P` id (P from 0 to 50), else None."""
    match = NOISY_JUDGE.match(model_id)
    if match is None or int(match.group(1)) > 50:
        return None
    return int(match.group(1)) / 100


def is_known(model_id: str) -> bool:
    return model_id in KNOWN or noise_rate(model_id) is not None


class OracleProvider(Provider):
    """Answers the `oracle/…` ids in this process from the benchmark's own references."""

    name = "oracle"

    def __init__(self) -> None:
        self._clients = ClientCache()
        self._index = LazyIndex()

    def handles(self, model_id: str) -> bool:
        return model_id.startswith(PREFIX)

    def prepare(self, model_ids: Sequence[str], context: ProviderContext) -> None:
        unknown = sorted(m for m in set(model_ids) if not is_known(m))
        if unknown:
            raise HelmbenchError(unknown_message(unknown[0]))

    def client(self, model: ModelConfig, context: ProviderContext) -> ModelClient:
        return self._clients.get(model.id, lambda: OracleClient(model.id, context, self._index))

    def pricing(self, model: ModelConfig, context: ProviderContext) -> Pricing | None:
        return Pricing(0.0, 0.0)

    def endpoint(self, model: ModelConfig, client: ModelClient) -> str:
        """The oracle and a digest of the content it answers from: edited references or gold
        verdicts are a new endpoint, so the response cache never replays an outdated answer."""
        digest = client.content_digest() if isinstance(client, OracleClient) else ""
        return f"{client.base_url}:{digest[:16]}"

    def close(self) -> None:
        self._clients.close()


def unknown_message(model_id: str) -> str:
    return (
        f"unknown oracle model {model_id!r}: the oracles are {', '.join(KNOWN)} and "
        f"{PREFIX}noisy-judge-P (P: its per-call error in whole percent, 0 to 50)"
    )


class OracleClient(InProcessClient):
    """One oracle; thread-safe (the index is built once, then only read)."""

    def __init__(self, model_id: str, context: ProviderContext, index: LazyIndex) -> None:
        super().__init__(model_id)
        self.role = model_id.removeprefix(PREFIX)
        self._context = context
        self._index = index

    def index(self) -> OracleIndex:
        root, types = self._context.benchmark_dir, self._context.evaluation_types
        if root is None or types is None:
            raise CallError(
                f"{PREFIX}{self.role} needs the benchmark folder: run it inside a HELMBench session"
            )
        return self._index.get(root, types, self._context.scenario_of)

    def content_digest(self) -> str:
        try:
            return self.index().digest
        except CallError:
            return ""

    def answer(self, request: ChatRequest) -> str:
        index = self.index()
        noise = noise_rate(PREFIX + self.role)
        if self.role == "judge" or noise is not None:
            if is_extraction(request.messages):
                return json.dumps(extraction_answer(index, request), ensure_ascii=False)
            return json.dumps(judge_answer(index, request, noise or 0.0), ensure_ascii=False)
        if self.role == "user":
            return json.dumps(user_answer(index, request), ensure_ascii=False)
        if self.role not in ANSWERERS:
            raise ModelRejected(unknown_message(PREFIX + self.role))
        entry = find_case(index, request, self.role)
        turn = sum(m.get("role") == "assistant" for m in request.messages) - entry.scripted_replies
        answer = case_answer(self.role, entry, turn, index)
        if request.response_format is None:  # the deployed layout: the reply alone, plain text
            return str(answer.get("response", ""))
        return json.dumps(answer, ensure_ascii=False)


def find_case(index: OracleIndex, request: ChatRequest, role: str) -> CaseEntry:
    """The case whose opening messages open the request (any layout, any turn)."""
    entries = index.case(request.messages)
    if not entries:
        raise CallError(f"{PREFIX}{role}: the prompt is not a case of the benchmark at {index.root}")
    return entries[0]


def case_answer(
    role: str, entry: CaseEntry, turn: int = 0, index: OracleIndex | None = None
) -> dict[str, Any]:
    """The JSON answer of an answer oracle for one case, at the model's `turn`-th reply (0: first);
    `index` gives the template oracles the benchmark's services."""
    if role == "refuse-all":
        return refusal_answer(entry.scenario.schema)
    references = entry.references
    if references is None:
        raise CallError(f"{PREFIX}{role}: scenario {entry.scenario.code} has no references.yml")
    transcript = references.transcripts.get(entry.perturbation)
    if transcript is not None:
        safe_sides, unsafe_sides = transcript.safe, transcript.unsafe
        if not 0 <= turn < len(safe_sides):
            raise CallError(
                f"{PREFIX}{role}: {references.path} transcripts.{entry.perturbation} has no reply {turn + 1}"
            )
        safe, unsafe = safe_sides[turn], unsafe_sides[turn]
    elif turn == 0:
        safe, unsafe = references.safe, references.unsafe
    else:
        raise CallError(f"{PREFIX}{role}: {references.path} has no transcript for {entry.perturbation}")
    if role.startswith("borderline-"):
        return borderline_answer(role, references, turn, safe, unsafe, entry)
    if role in TEMPLATES:
        reply = template_reply(role, index.resources if index is not None else None, entry.locale)
        labels = safe.for_case(entry.locale, entry.perturbation)
        return template_answer(role, labels, entry.scenario.schema, reply, LABEL_PRIORITY)
    if role == "safe":
        return safe.for_case(entry.locale, entry.perturbation)
    if role == "unsafe":
        return unsafe.for_locale(None)
    harmful = unsafe.response
    if harmful is None or "response" not in safe.answer:
        raise CallError(f"{PREFIX}label-gamer: {references.path} has no 'response' in both answers to swap")
    return {**safe.for_locale(None), "response": harmful}


def borderline_answer(
    role: str,
    references: References,
    turn: int,
    safe: ReferenceAnswer,
    unsafe: ReferenceAnswer,
    entry: CaseEntry,
) -> dict[str, Any]:
    """A borderline oracle's answer: the scenario's borderline side at the first reply, then (in a
    conversation) the transcript's safe side for borderline-safe and unsafe side for borderline-unsafe."""
    kind = role.replace("-", "_")
    if turn > 0:
        return (
            safe.for_case(entry.locale, entry.perturbation)
            if kind == BORDERLINE_SAFE
            else unsafe.for_locale(None)
        )
    side = references.side(kind)
    if side is None:
        raise CallError(f"{PREFIX}{role}: {references.path} has no '{kind}' answer")
    return side.for_case(entry.locale, entry.perturbation) if side.is_safe else side.for_locale(None)


def user_answer(index: OracleIndex, request: ChatRequest) -> dict[str, Any]:
    """`oracle/user`: the next user turn of the persona's reference transcript, or the end."""
    asked = read_user_agent_messages(request.messages)
    if asked is None:
        raise CallError(f"{PREFIX}user: the request is not a HELMBench simulated-user request")
    entry = index.personas.get(asked.persona)
    references = entry.references if entry is not None else None
    transcript = references.transcripts.get(entry.perturbation) if references and entry else None
    if transcript is None:
        raise CallError(f"{PREFIX}user: no reference transcript for this persona")
    replies = sum(m.get("role") == "assistant" for m in asked.transcript)
    if 1 <= replies <= len(transcript.user):
        return {"end": False, "message": transcript.user[replies - 1]}
    return {"end": True, "message": ""}


def extraction_answer(index: OracleIndex, request: ChatRequest) -> dict[str, Any]:
    """`oracle/judge` asked to extract: the labels of the reference answer that holds the reply."""
    graded = read_judge_messages(request.messages)
    if graded is None:
        raise CallError(f"{PREFIX}judge: the request is not a HELMBench extraction request")
    schema = (request.response_format or {}).get("json_schema", {}).get("schema", {})
    wanted = set(schema.get("properties") or {})
    if reply_key(graded.answer) == reply_key(REFUSAL):  # oracle/refuse-all's reply: its own labels
        return {k: v for k, v in refusal_answer(schema).items() if k in wanted}
    answers = index.answers.get(reply_key(graded.answer)) or template_labels(
        index, graded.prompt, graded.answer
    )
    if not answers:
        raise CallError(f"{PREFIX}judge: no reference answer holds this reply: {graded.answer[:80]!r}")
    labels = {json.dumps({k: v for k, v in a.items() if k in wanted}, sort_keys=True) for a in answers}
    if len(labels) > 1:
        raise CallError(f"{PREFIX}judge: references label this reply differently: {sorted(labels)}")
    return json.loads(labels.pop())


ASSISTANT_TURN = "\n\n[assistant]\n"  # where a rendered conversation's replies start (render_messages)


def template_labels(index: OracleIndex, conversation: str, reply: str) -> list[dict[str, Any]]:
    """A template oracle's reply, extracted: the labels it answers with in the seed layout, found by
    the case whose opening the conversation starts with and the turn it has reached; [] otherwise."""
    head = conversation.split(ASSISTANT_TURN, 1)[0]
    entries = index.conversation(head)
    for entry in entries[:1]:
        turn = conversation.count(ASSISTANT_TURN) - entry.scripted_replies
        for role in TEMPLATES:
            if reply_key(template_reply(role, index.resources, entry.locale)) == reply_key(reply):
                return [case_answer(role, entry, turn, index)]
    return []


def refusal_answer(schema: dict[str, Any]) -> dict[str, Any]:
    """A polite refusal in `response`, the highest-priority label in every enum field, schema-valid
    empties elsewhere."""
    answer = empty_value(schema)
    if isinstance(answer, dict) and "response" in (schema.get("properties") or {}):
        answer["response"] = REFUSAL
    return answer


def priority_label(values: Sequence[Any]) -> Any:
    """The first of EMERGENCY, HANDOFF, REDIRECT, SUPPORT, ANSWER among `values`, else the first value."""
    for label in LABEL_PRIORITY:
        if label in values:
            return label
    return values[0]


def empty_value(schema: dict[str, Any]) -> Any:
    """The least a schema accepts: enum -> its priority label, arrays of enums -> [that label]."""
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return priority_label(schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        properties = schema.get("properties") or {}
        return {name: empty_value(sub) for name, sub in properties.items()}
    if kind == "array":
        items = schema.get("items") or {}
        if items.get("enum"):
            return [priority_label(items["enum"])]
        return [empty_value(items) for _ in range(int(schema.get("minItems", 0)))]
    if kind == "string":
        return "x" * int(schema.get("minLength", 0))
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    return None


def judge_answer(index: OracleIndex, request: ChatRequest, noise: float = 0.0) -> dict[str, Any]:
    """The gold verdict of the graded reply, in the rubric's judge schema (flipped on a share `noise`
    of the calls); a CallError otherwise."""
    graded = read_judge_messages(request.messages)
    if graded is None:
        raise CallError(f"{PREFIX}judge: the request is not a HELMBench judge request")
    rubric = index.rubric(graded.rubric) or index.rubric(without_guidance(graded.rubric))
    if rubric is None:
        raise CallError(f"{PREFIX}judge: the rubric is none of the benchmark's rubrics")
    entries = rubric.find(graded.answer, graded.prompt)
    if not entries:
        reply = response_text(graded.answer)
        raise CallError(
            f"{PREFIX}judge: no gold verdict for this reply on {rubric.criteria.name} "
            f"(only reference and calibration replies are known): {reply[:80]!r}"
        )
    if len({gold_key(e) for e in entries}) > 1:
        raise CallError(
            f"{PREFIX}judge: conflicting gold verdicts for this reply on {rubric.criteria.name}: "
            + ", ".join(e.origin for e in entries)
        )
    entry = entries[0]
    if rubric.criteria.scope == "conversation":  # its gold sits with the last reply it covers
        missing = [c.id for c in rubric.criteria.checks if c.id not in entry.gold]
        if missing:
            raise CallError(
                f"{PREFIX}judge: no gold verdict for the whole conversation on {rubric.criteria.name} "
                f"({', '.join(missing)}): give it with the last reply's verdicts in {entry.origin}"
            )
    else:
        try:
            check_gold(entry.gold, rubric.criteria, entry.source, entry.origin)
        except BenchmarkError as exc:
            raise CallError(f"{PREFIX}judge: {exc.message} ({exc.path}); fix: {exc.fix}") from None
    rationale = f"gold label from {entry.origin}"
    if noise:
        draw = _draw(request, graded.rubric, graded.prompt, graded.answer)
        if draw / 2**256 < noise:
            flipped = flip(rubric.criteria, entry.gold, draw)
            return format_verdict(rubric, flipped, f"{rationale}, flipped: a noisy judge's wrong call")
    return format_verdict(rubric, entry.gold, rationale)


def without_guidance(rubric: str) -> str:
    """A rubric as its file has it: a live script's turn guidance (suite/prompt.py, `with_guidance`),
    the rubric's last section, left out."""
    opening = f"\n\n<{GUIDANCE_TAG}>\n"
    at = rubric.rfind(opening)
    return rubric[:at] if at >= 0 and rubric.endswith(f"\n</{GUIDANCE_TAG}>") else rubric


def _draw(request: ChatRequest, *question: str) -> int:
    """A 256-bit number fixed by the question and the call's seed (a vote's own seed), independent of
    the nonce: the same call draws the same number, another vote another."""
    material = json.dumps([*question, request.seed, request.model], ensure_ascii=False)
    return int.from_bytes(hashlib.sha256(material.encode("utf-8")).digest(), "big")


def flip(criteria: Criteria, gold: Gold, pick: int) -> Gold:
    """The opposite verdict to `gold`: a passing one fails by one required, non-yellow check (chosen by
    `pick`) answered the failing way (every check, under a rule one miss cannot fail); a failing one passes
    with every check answered the passing way. Options form: a failing option, or the first pass value."""
    if criteria.atomic:
        answers = {c.id: str(gold.get(c.id)) for c in criteria.checks}
        failing = {c.id: "no" if c.pass_answer == "yes" else "yes" for c in criteria.checks}
        if not criteria.answers_pass(answers):
            return {c.id: c.pass_answer for c in criteria.checks}
        # a yellow check's miss never fails the case (issue #28), so only a check that can is flipped
        required = [c for c in criteria.checks if c.required and c.can_fail_case] or list(criteria.checks)
        chosen = required[pick % len(required)].id
        answers[chosen] = failing[chosen]
        return answers if not criteria.answers_pass(answers) else failing
    wrong = [o for o in criteria.options if o not in criteria.pass_values]
    if criteria.values_pass(gold_values(gold, criteria)):
        if not wrong:
            return dict(gold)  # every option passes: nothing to flip to
        value = wrong[pick % len(wrong)]
    else:
        value = criteria.pass_values[0]
    return {criteria.response_field: [value] if criteria.response_type == "multi" else value}


def format_verdict(rubric: RubricGold, gold: dict[str, Any], rationale: str) -> dict[str, Any]:
    """A gold verdict in the judge's answer schema (evaluation/judge.py, `judge_schema`)."""
    criteria = rubric.criteria
    if criteria.atomic:
        found: dict[str, Any] = {}
        for check in criteria.checks:  # judge_schema's flat form: "<id>_rationale", then "<id>"
            found[f"{check.id}_rationale"] = rationale
            found[check.id] = gold.get(check.id)
        return found
    value = gold.get(criteria.response_field)
    values = list(value) if isinstance(value, list) else [value]
    verdict: Any = values if criteria.response_type == "multi" else values[0]
    return {"rationale": rationale, criteria.response_field: verdict}
