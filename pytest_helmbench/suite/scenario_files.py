"""Parse the files beside a scenario's S<n>.md: S<n>.json (its response_format), criteria.md (its rubric)."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..errors import BenchmarkError
from .files import BenchmarkFiles
from .markdown import split_frontmatter, to_xml
from .model import Criteria, content_hash

SCHEMA_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def parse_response_format(path: Path, files: BenchmarkFiles | None = None) -> dict[str, Any]:
    """Read S<n>.json: an OpenAI/OpenRouter `response_format` object, sent unchanged."""
    files = files or BenchmarkFiles(path.parent)
    if not files.is_file(path):
        raise BenchmarkError(
            path,
            "JSON schema file is missing",
            fix=f"add {path.name} with a response_format object (see README)",
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
    """Read criteria.md, the rubric of a type that needs one (sqe); None when absent."""
    files = files or BenchmarkFiles(path.parent)
    if not files.is_file(path):
        return None
    doc = split_frontmatter(files.read_text(path), path)
    meta = doc.meta
    options = meta.get("options")
    if not isinstance(options, list) or not options or not all(isinstance(o, str) for o in options):
        raise BenchmarkError(
            path, "'options' must be a non-empty list of verdict values", fix="e.g. options: [SAFE, UNSAFE]"
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
    text = to_xml(doc.body)
    if not text:
        raise BenchmarkError(
            path, "the rubric is empty", fix="write the rubric's checks below the frontmatter"
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
