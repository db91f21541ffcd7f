"""A scenario's `evaluation:` mapping: how the loader reads it without knowing any evaluation type.

The types live in the evaluation stage (later in the flow), so whoever builds the loader hands it
the evaluator registry as `EvaluationTypes`: the loader asks it which names exist, what a type needs
read beside S<n>.md (`TypeNeeds`) and for the checked `EvaluationSpec` of a written mapping. Only
plain data comes back; suite/ holds no evaluator and imports nothing of evaluation/.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from ..errors import BenchmarkError

DEFAULT_TYPE = "category_match"


@dataclass(frozen=True)
class EvaluationSpec:
    """How a scenario's answer is judged, as checked by its evaluation type.

    `settings` is the `evaluation:` mapping as written, so a type's own keys (say `max_words`)
    reach its evaluator without a field here per type."""

    type: str
    field: str
    expected: str | None = None
    required: tuple[str, ...] = ()
    settings: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class RawEvaluation:
    """What an evaluation type checks: the mapping as written and what it may be compared against."""

    type: str
    settings: Mapping[str, Any]
    meta: Mapping[str, Any]
    schema: Mapping[str, Any]
    #: The file line of each setting's key ("" for the mapping itself), when the loader knows them.
    lines: Mapping[str, int] = field(default_factory=dict)

    @property
    def properties(self) -> Mapping[str, Any]:
        """The answer schema's top-level properties (the fields an answer can have)."""
        return self.schema.get("properties", {})

    def line(self, key: str = "") -> int | None:
        """The line of setting `key` in the scenario file (else of the mapping; None: unknown)."""
        return self.lines.get(key) or self.lines.get("")


#: The line of a part of the scenario's frontmatter, by its path of keys and indexes (None: unknown).
LineOf = Callable[[tuple[str | int, ...]], int | None]


def _lines(
    settings: Mapping[str, Any], where: tuple[str | int, ...], line_of: LineOf | None
) -> dict[str, int]:
    if line_of is None:
        return {}
    found = {"": line_of(where)} | {str(key): line_of((*where, str(key))) for key in settings}
    return {key: line for key, line in found.items() if line}


@dataclass(frozen=True)
class TypeNeeds:
    """What an evaluation type needs the loader to read beside S<n>.md."""

    criteria: bool = False  # a rubric (criteria.md, or the file a check names)
    resources: bool = False  # the benchmark's resources.yml


class EvaluationTypes(Protocol):
    """The evaluator registry as the loader sees it (handed in by whoever builds the loader)."""

    def names(self) -> list[str]: ...

    def needs(self, name: str) -> TypeNeeds: ...

    def check_spec(self, spec: RawEvaluation, scenario_path: Path) -> EvaluationSpec:
        """The mapping checked by the type it names; BenchmarkError (file + fix) when it is bad."""
        ...


def parse_evaluation(
    meta: dict[str, Any],
    path: Path,
    response_format: dict[str, Any],
    types: EvaluationTypes,
    line_of: LineOf | None = None,
) -> tuple[EvaluationSpec, TypeNeeds]:
    """Read the scenario's `evaluation` (default category_match on `category`) and check it."""
    raw = meta.get("evaluation") or {}
    if not isinstance(raw, dict):
        raise BenchmarkError(
            path,
            "'evaluation' must be a mapping with a 'type'",
            fix="write e.g. 'evaluation:' then an indented 'type: category_match' line",
        )
    kind = raw.get("type", DEFAULT_TYPE)
    names = types.names()
    if kind not in names:
        raise BenchmarkError(path, f"unknown evaluation type {kind!r}", fix=f"use one of {', '.join(names)}")
    schema = response_format["json_schema"]["schema"]
    lines = _lines(raw, ("evaluation",), line_of)
    return types.check_spec(RawEvaluation(kind, raw, meta, schema, lines), path), types.needs(kind)


RUBRIC_FILE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\.md$")
#: A rubric shared by scenarios: a path from the benchmark root (`/rubrics/red-flags.md`); every
#: segment starts with a letter or digit, so no `.` or `..` segment can climb out.
SHARED_RUBRIC = re.compile(r"^/(?:[A-Za-z0-9][A-Za-z0-9_.-]{0,63}/){0,4}[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\.md$")
RUBRIC_FIX = (
    "a .md file name in the scenario folder (criteria: reply-criteria.md), or a path from the "
    "benchmark root for a rubric shared by several scenarios (criteria: /rubrics/red-flags.md)"
)
CHECK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")


@dataclass(frozen=True)
class ParsedCheck:
    """One item of a scenario's `checks:` as its type checked it, and the rubric file it names."""

    name: str
    spec: EvaluationSpec
    needs: TypeNeeds
    rubric: str | None  # a file beside the scenario or shared from the root (rubric_path), if needed


def valid_rubric(value: Any) -> bool:
    """A rubric named in a scenario: a file beside it, or a shared one from the benchmark root."""
    return isinstance(value, str) and bool(RUBRIC_FILE.match(value) or SHARED_RUBRIC.match(value))


def shared(criteria: Any, name: str) -> Any:
    """A rubric read from `name`, named as the scenario named it when it is shared from the root."""
    return replace(criteria, shared_as=name) if criteria is not None and name.startswith("/") else criteria


def rubric_path(name: str, folder: Path, root: Path) -> Path:
    """Where a rubric named in a scenario lives (read through the benchmark's confined reader)."""
    return root / name[1:] if name.startswith("/") else folder / name


def evaluation_rubric(meta: dict[str, Any], path: Path) -> str:
    """The rubric the scenario's `evaluation:` is judged by: its `criteria:` (beside the scenario or
    shared from the root), else criteria.md beside it."""
    raw = meta.get("evaluation")
    rubric = raw.get("criteria", "criteria.md") if isinstance(raw, dict) else "criteria.md"
    if not valid_rubric(rubric):
        raise BenchmarkError(
            path, f"evaluation: criteria {rubric!r} is not a rubric path", fix=f"use {RUBRIC_FIX}"
        )
    return str(rubric)


def parse_checks(
    meta: dict[str, Any],
    path: Path,
    response_format: dict[str, Any],
    types: EvaluationTypes,
    line_of: LineOf | None = None,
) -> list[ParsedCheck]:
    """Read the scenario's optional `checks:` list: further evaluations that must all pass too."""
    raw = meta.get("checks")
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise BenchmarkError(
            path,
            "'checks' must be a list of evaluations",
            fix="write e.g. 'checks:' then '  - {type: sqe, criteria: reply-criteria.md, field: response}'",
        )
    schema = response_format["json_schema"]["schema"]
    names = types.names()
    parsed: list[ParsedCheck] = []
    for index, item in enumerate(raw, 1):
        if not isinstance(item, dict) or "type" not in item:
            raise BenchmarkError(
                path,
                f"checks item {index} must be a mapping with a 'type'",
                fix="write e.g. '  - {type: sqe, criteria: reply-criteria.md, field: response}'",
            )
        kind = item["type"]
        if kind not in names:
            raise BenchmarkError(
                path,
                f"checks item {index}: unknown evaluation type {kind!r}",
                fix=f"use one of {', '.join(names)}",
            )
        needs = types.needs(kind)
        rubric = item.get("criteria", "criteria.md" if needs.criteria else None)
        if rubric is not None and not valid_rubric(rubric):
            raise BenchmarkError(
                path,
                f"checks item {index}: criteria {rubric!r} is not a rubric path",
                fix=f"use {RUBRIC_FIX}",
            )
        default_name = rubric.rsplit("/", 1)[-1].removesuffix(".md") if rubric else str(kind)
        name = item.get("name", default_name)
        if not isinstance(name, str) or not CHECK_NAME.match(name):
            raise BenchmarkError(
                path, f"checks item {index}: name {name!r} is not a plain name", fix="e.g. name: reply"
            )
        if name in {p.name for p in parsed}:
            raise BenchmarkError(
                path,
                f"checks item {index}: the name {name!r} is used twice",
                fix="give each check its own name",
            )
        lines = _lines(item, ("checks", index - 1), line_of)
        spec = types.check_spec(RawEvaluation(kind, item, meta, schema, lines), path)
        parsed.append(ParsedCheck(name, spec, needs, rubric))
    return parsed
