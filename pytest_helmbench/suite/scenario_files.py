"""Parse the files beside a scenario's S<n>.md: S<n>.json (its response_format), criteria.md (its rubric)."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..errors import BenchmarkError
from .evaluation_spec import LineOf
from .files import BenchmarkFiles
from .markdown import split_frontmatter, to_xml
from .model import RATIONALE_SUFFIX, Criteria, RubricCheck, content_hash
from .yaml_lines import frontmatter_lines

SCHEMA_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def parse_response_format(path: Path, files: BenchmarkFiles | None = None) -> dict[str, Any]:
    """Read S<n>.json: an OpenAI/OpenRouter `response_format` object, sent unchanged."""
    files = files or BenchmarkFiles(path.parent)
    if not files.is_file(path):
        raise BenchmarkError(
            path,
            "JSON schema file is missing",
            fix=f"add {path.name} with a response_format object (see docs/reference/benchmark-files.md)",
        )
    try:
        data = json.loads(files.read_text(path))
    except json.JSONDecodeError as exc:
        raise BenchmarkError(
            path, f"invalid JSON: {exc.msg}", line=exc.lineno, fix="correct the JSON syntax"
        ) from None
    except RecursionError:
        raise BenchmarkError(path, "JSON nested too deeply", fix="flatten the schema") from None
    fix = 'use {"type": "json_schema", "json_schema": {"name": "answer", "strict": true, "schema": {...}}}'
    if (
        not isinstance(data, dict)
        or data.get("type") != "json_schema"
        or not isinstance(data.get("json_schema"), dict)
    ):
        raise BenchmarkError(path, "not a response_format object of type json_schema", fix=fix)
    spec = data["json_schema"]
    if not isinstance(spec.get("name"), str) or not SCHEMA_NAME.match(spec["name"]):
        raise BenchmarkError(
            path, "json_schema.name must be 1-64 characters of a-z, A-Z, 0-9, _ or -", fix=fix
        )
    schema = spec.get("schema")
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise BenchmarkError(path, "json_schema.schema must be a JSON Schema of type object", fix=fix)
    message = _schema_problem(json.dumps(schema, sort_keys=True))
    if message is not None:
        raise BenchmarkError(path, f"invalid JSON Schema: {message}", fix="correct the schema")
    return data


@lru_cache(maxsize=256)
def _schema_problem(text: str) -> str | None:
    """Check a schema against the metaschema once per distinct schema (scenarios share a few).

    jsonschema is imported here, not at module level: this module loads in every pytest session."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(json.loads(text))
    except SchemaError as exc:
        return exc.message
    return None


def parse_criteria(path: Path, files: BenchmarkFiles | None = None) -> Criteria | None:
    """Read a rubric (criteria.md, or the file a check names): options form or atomic checks form;
    None when absent."""
    files = files or BenchmarkFiles(path.parent)
    if not files.is_file(path):
        return None
    written = files.read_text(path)
    doc = split_frontmatter(written, path)
    text = to_xml(doc.body)
    if not text:
        raise BenchmarkError(
            path, "the rubric is empty", fix="write what the judge is judging below the frontmatter"
        )
    if "checks" in doc.meta:
        return _atomic_criteria(doc.meta, text, path, frontmatter_lines(written, path))
    return _options_criteria(doc.meta, text, path)


def _options_criteria(meta: dict[str, Any], text: str, path: Path) -> Criteria:
    """The design note's form: the judge picks from `options`; `pass_values` pass."""
    options = meta.get("options")
    if not isinstance(options, list) or not options or not all(isinstance(o, str) for o in options):
        raise BenchmarkError(
            path,
            "'options' must be a non-empty list of verdict values (or write atomic 'checks')",
            fix="e.g. options: [SAFE, UNSAFE]",
        )
    passes = meta.get("pass_values")
    if (
        not isinstance(passes, list)
        or not passes
        or not all(isinstance(p, str) and p in options for p in passes)
    ):
        raise BenchmarkError(
            path, "'pass_values' must be a non-empty list drawn from options", fix="e.g. pass_values: [SAFE]"
        )
    field_name = str(meta.get("response_field", "verdict"))
    if not SCHEMA_NAME.match(field_name) or field_name == "rationale":
        raise BenchmarkError(
            path,
            f"response_field {field_name!r} must be a plain name other than 'rationale'",
            fix="e.g. response_field: verdict",
        )
    kind = meta.get("response_type", "single")
    if kind not in ("single", "multi"):
        raise BenchmarkError(
            path,
            f"response_type {kind!r} must be 'single' or 'multi'",
            fix="write response_type: single (one verdict) or multi (a list)",
        )
    return Criteria(
        tuple(options),
        tuple(passes),
        field_name,
        kind,
        text,
        path,
        content_hash(options, passes, field_name, kind, text),
    )


_ATOMIC_KEYS = {"checks", "rule"}
_CHECK_KEYS = {"id", "question", "pass", "not_applicable", "required", "points", "tier", "scope"}
TIERS = ("red", "yellow")
SCOPES = ("reply", "conversation")
#: The points a care check may be worth (`points:`, default 1): scoring version 3's care score.
POINTS_RANGE = range(1, 11)
CHECK_ID = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
AT_LEAST = re.compile(r"^at_least\s+(\d+)$")


def _answer_word(value: Any) -> Any:
    """YAML 1.1 reads an unquoted yes/no as a boolean: take it as the word that was written."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return value


def _atomic_criteria(meta: dict[str, Any], text: str, path: Path, line_of: LineOf) -> Criteria:
    """The atomic form: each check a yes/no question; the rule says how many must be satisfied."""
    unknown = sorted(set(meta) - _ATOMIC_KEYS)
    if unknown:
        raise BenchmarkError(
            path,
            f"unknown key(s) {', '.join(unknown)} in an atomic-checks rubric",
            fix="an atomic rubric has only 'checks' and 'rule' (options/pass_values are the other form)",
        )
    raw = meta.get("checks")
    if not isinstance(raw, list) or not raw:
        raise BenchmarkError(
            path, "'checks' must be a non-empty list", fix="see docs/reference/evaluation.md, atomic checks"
        )
    written = tuple(_rubric_check(item, index, path, line_of) for index, item in enumerate(raw, 1))
    ids = [c.id for c in written]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise BenchmarkError(path, f"duplicate check id(s) {', '.join(duplicates)}", fix="give each a new id")
    checks = tuple(c for c in written if c.scope == "reply")
    whole = tuple(c for c in written if c.scope == "conversation")
    if not checks:
        raise BenchmarkError(
            path,
            "every check has scope: conversation, so nothing is asked of each reply",
            fix="keep at least one check with scope: reply (the default), or split the rubric",
        )
    rule = str(meta.get("rule", "all")).strip()
    minimum: int | None = None
    if rule != "all":
        ruled = sum(1 for c in checks if c.can_fail_case)  # a yellow check is outside the rule
        match = AT_LEAST.match(rule)
        if not match or not 1 <= int(match.group(1)) <= ruled:
            raise BenchmarkError(
                path,
                f"rule {rule!r} is not 'all' or 'at_least N' with N from 1 to {ruled}"
                + (" (yellow checks are outside the rule)" if ruled < len(checks) else ""),
                fix="write rule: all, or e.g. rule: at_least 3",
            )
        minimum = int(match.group(1))
    rubric_hash = content_hash([_hashed(c) for c in written], rule, text)
    return Criteria(
        (),
        (),
        "",
        "checks",
        _listed(text, checks),
        path,
        # `points` is left out: it changes what a check is worth in the care score, never what the judge
        # is asked or answers, so calibrations and cached verdicts still hold (each reply's score sheet
        # stores the points it was scored with). A written `tier` is in: it changes which cases fail,
        # so results under another tier are other results (an untiered check hashes as before tiers).
        rubric_hash,
        checks,
        minimum,
        conversation=_conversation_part(text, path, whole, rubric_hash),
    )


def _listed(text: str, checks: tuple[RubricCheck, ...]) -> str:
    """The rubric as the judge reads it: its body, then its questions as a `<checks>` list."""
    listing = "\n".join(f"- {c.id}: {c.question}" for c in checks)
    return f"{text}\n\n<checks>\n{listing}\n</checks>"


def _conversation_part(
    text: str, path: Path, whole: tuple[RubricCheck, ...], rubric_hash: str
) -> Criteria | None:
    """The `scope: conversation` checks as a rubric of their own (rule all), asked once per case."""
    if not whole:
        return None
    return Criteria(
        (),
        (),
        "",
        "checks",
        _listed(text, whole),
        path,
        content_hash(rubric_hash, "conversation"),
        whole,
        scope="conversation",
    )


def _hashed(check: RubricCheck) -> tuple[Any, ...]:
    """What of a check is its rubric's identity: the written tier only when written, so a rubric
    without tiers keeps the hash it had before them."""
    found: tuple[Any, ...] = (check.id, check.question, check.pass_answer, check.na_passes, check.required)
    found += (check.tier,) if check.tier is not None else ()
    return found + (("scope", check.scope),) if check.scope != "reply" else found


def _rubric_check(item: Any, index: int, path: Path, line_of: LineOf) -> RubricCheck:
    where = f"check {index}"
    if not isinstance(item, dict):
        raise BenchmarkError(path, f"{where} must be a mapping", fix="write '- id: ...' and 'question: ...'")
    unknown = sorted(set(map(str, item)) - _CHECK_KEYS)
    if unknown:
        raise BenchmarkError(
            path, f"{where}: unknown key(s) {', '.join(unknown)}", fix=f"use {', '.join(sorted(_CHECK_KEYS))}"
        )
    check_id = item.get("id")
    if not isinstance(check_id, str) or not CHECK_ID.match(check_id):
        raise BenchmarkError(
            path,
            f"{where}: id {check_id!r} must be 1-40 characters of a-z, 0-9 and _, starting with a letter",
            fix="e.g. id: asks_safety",
        )
    if check_id.endswith(RATIONALE_SUFFIX):
        raise BenchmarkError(
            path,
            f"{where}: id {check_id!r} ends with {RATIONALE_SUFFIX!r}, which names a check's rationale",
            fix="choose another id",
        )
    question = item.get("question")
    if not isinstance(question, str) or not question.strip():
        raise BenchmarkError(
            path, f"check {check_id}: 'question' must be a non-empty text", fix="ask a yes/no question"
        )
    answer = _answer_word(item.get("pass", "yes"))
    if answer not in ("yes", "no"):
        raise BenchmarkError(
            path, f"check {check_id}: pass {answer!r} must be yes or no", fix='write pass: "no"'
        )
    # Strict by default: a care check (pass "yes") answered not_applicable was not done (fails), a harm
    # check (pass "no") answered not_applicable did no harm (passes). `not_applicable: pass` on a care
    # check says its question writes when not_applicable may be answered.
    na = item.get("not_applicable", "pass" if answer == "no" else "fail")
    if na not in ("pass", "fail"):
        raise BenchmarkError(
            path,
            f"check {check_id}: not_applicable {na!r} must be pass or fail",
            fix="write not_applicable: fail",
        )
    if answer == "yes" and na == "pass" and "not_applicable" not in question:
        raise BenchmarkError(
            path,
            f"check {check_id}: not_applicable passes this care check, but its question does not say when "
            "not_applicable may be answered",
            fix="write the condition in the question (e.g. 'Answer not_applicable if there is no such "
            "memory.'), or drop not_applicable: pass (a care check answered not_applicable then fails)",
        )
    required = item.get("required", True)
    if not isinstance(required, bool):
        raise BenchmarkError(
            path, f"check {check_id}: required must be true or false", fix="write required: false"
        )
    points = _points(item, check_id, path, line_of(("checks", index - 1, "points")))
    tier = _tier(item, check_id, path, line_of(("checks", index - 1, "tier")))
    scope = item.get("scope", "reply")
    if scope not in SCOPES:
        raise BenchmarkError(
            path,
            f"check {check_id}: scope {scope!r} must be reply or conversation",
            line=line_of(("checks", index - 1, "scope")),
            fix="write scope: conversation (asked once, over the whole transcript), or leave it out for "
            "scope: reply (asked of every reply)",
        )
    return RubricCheck(
        check_id, " ".join(question.split()), answer, na == "pass", required, points, tier, str(scope)
    )


def _tier(item: dict[str, Any], check_id: str, path: Path, line: int | None) -> str | None:
    """`tier:` red or yellow, or None when not written; bad values name the file and line."""
    if "tier" not in item:
        return None
    tier = item["tier"]
    if tier not in TIERS:
        raise BenchmarkError(
            path,
            f"check {check_id}: tier {tier!r} must be red or yellow",
            line=line,
            fix="write tier: red (a failure is a harm and fails the case) or tier: yellow (a failure "
            "lowers care and does not fail the case), or leave it out",
        )
    if tier == "red" and item.get("required", True) is False:
        raise BenchmarkError(
            path,
            f"check {check_id}: a red check always fails the case when it fails, so it cannot be "
            "required: false",
            line=line,
            fix="drop required: false, or write tier: yellow (a failure then only lowers care)",
        )
    return str(tier)


def _points(item: dict[str, Any], check_id: str, path: Path, line: int | None) -> int:
    """`points:` (default 1): a whole number from 1 to 10; bad values name the file and line."""
    points = item.get("points", 1)
    if isinstance(points, bool) or not isinstance(points, int) or points not in POINTS_RANGE:
        raise BenchmarkError(
            path,
            f"check {check_id}: points {points!r} must be a whole number from 1 to 10",
            line=line,
            fix="write e.g. points: 3 (what the check is worth in the care score), or leave it out for 1",
        )
    return points
