"""Load the benchmark tree into validated, immutable objects (files -> parsed benchmark).

Loading is per scenario so a bad file fails only the scenarios it affects; root-level files and the
benchmark-wide code index are parsed once per loader and cached (errors included).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..codes import BEHAVIOUR_CODE, SCENARIO_DIR, code_sort_key
from ..errors import BenchmarkError
from .evaluation_spec import EvaluationSpec, EvaluationTypes, parse_evaluation
from .files import DEFAULT_MAX_FILE_SIZE, BenchmarkFiles
from .markdown import RawComponent, load_yaml, split_consolidated, split_frontmatter, to_xml

log = logging.getLogger(__name__)

RISK_LEVELS = ("none", "low", "high", "imminent")
SCHEMA_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
#: Collected as a scenario file: `S<n>.md` and look-alikes (`S01.md`), which must then match their folder.
SCENARIO_FILE_LIKE = re.compile(r"^[Ss]\d+\.md$")


@dataclass(frozen=True)
class Kind:
    """One kind of component and where its files live."""

    name: str
    prefix: str
    consolidated: str
    folder: str


CONDITION = Kind("condition", "C", "conditions.md", "conditions")
USER_CONTEXT = Kind("user_context", "U", "user-contexts.md", "user-contexts")
PERTURBATION = Kind("perturbation", "PT", "perturbations.md", "perturbations")
SHARED_KINDS = (CONDITION, USER_CONTEXT)


def content_hash(*parts: Any) -> str:
    """A stable hash of JSON-able parts: identifies one exact version of a piece of content."""
    data = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Component:
    """A condition, user context or perturbation: its prompt text plus metadata."""

    kind: str
    code: str
    title: str
    body: str
    text: str
    meta: dict[str, Any]
    severity: int
    source: Path
    line: int | None
    hash: str

    @property
    def style(self) -> str | None:
        value = self.meta.get("style")
        return str(value) if value is not None else None


@dataclass(frozen=True)
class Criteria:
    """An `sqe` rubric: the judge's options, which pass, and the rubric text."""

    options: tuple[str, ...]
    pass_values: tuple[str, ...]
    response_field: str
    response_type: str
    text: str
    path: Path
    hash: str


@dataclass(frozen=True)
class Scenario:
    """One scenario with everything needed to expand and run its cases."""

    code: str
    pillar: str
    behaviour: str
    path: Path
    title: str
    meta: dict[str, Any]
    text: str
    response_format: dict[str, Any]
    evaluation: EvaluationSpec
    criteria: Criteria | None
    category: str | None
    risk: str | None
    critical: bool
    refusal_passes: bool
    conditions: tuple[Component, ...]
    user_contexts: tuple[Component, ...]
    perturbations: tuple[Component, ...]
    hash: str

    @property
    def schema(self) -> dict[str, Any]:
        return self.response_format["json_schema"]["schema"]


@dataclass(frozen=True)
class PillarInfo:
    code: str
    name: str
    description: str


@dataclass(frozen=True)
class BehaviourInfo:
    code: str
    title: str
    description: str
    compliance: str
    threshold: float | None = None


@dataclass(frozen=True)
class BenchmarkInfo:
    """The contents of benchmark.yml (all optional)."""

    version: str
    description: str
    categories: dict[str, str]
    styles: dict[str, str]
    pillars: dict[str, PillarInfo]
    behaviours: dict[str, BehaviourInfo]
    hash: str

    def pillar(self, code: str, warn: list[str] | None = None) -> PillarInfo:
        """The pillar's description, falling back to its code (with a warning) when undescribed."""
        if code not in self.pillars:
            if warn is not None:
                warn.append(f"benchmark.yml describes no pillar {code}: its name falls back to the code")
            return PillarInfo(code, code, "")
        return self.pillars[code]

    def behaviour(self, code: str, warn: list[str] | None = None) -> BehaviourInfo:
        if code not in self.behaviours:
            if warn is not None:
                warn.append(f"benchmark.yml describes no behaviour {code}: its title falls back to the code")
            return BehaviourInfo(code, code, "", "")
        return self.behaviours[code]


def _str_map(value: Any, path: Path, key: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BenchmarkError(
            path,
            f"'{key}' must be a mapping of name: description",
            fix=f"write '{key}:' followed by indented 'NAME: description' lines",
        )
    return {str(k): str(v or "") for k, v in value.items()}


def _section(value: Any, path: Path, key: str) -> dict[str, dict[str, Any]]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        raise BenchmarkError(
            path,
            f"'{key}' must map each code to a mapping of fields",
            fix="see the README's benchmark.yml schema",
        )
    return {str(k): v for k, v in value.items()}


def parse_benchmark_info(path: Path, files: BenchmarkFiles | None = None) -> BenchmarkInfo:
    """Parse benchmark.yml; a missing file gives an empty description."""
    files = files or BenchmarkFiles(path.parent)
    if not files.is_file(path):
        return BenchmarkInfo("unversioned", "", {}, {}, {}, {}, content_hash("empty"))
    data = load_yaml(files.read_text(path), path) or {}
    if not isinstance(data, dict):
        raise BenchmarkError(
            path,
            "benchmark.yml must be a YAML mapping",
            fix="see the README's benchmark.yml schema (version, description, pillars, behaviours)",
        )
    pillars = {
        code: PillarInfo(code, str(v.get("name", code)), str(v.get("description", "")))
        for code, v in _section(data.get("pillars"), path, "pillars").items()
    }
    behaviours = {}
    for code, v in _section(data.get("behaviours"), path, "behaviours").items():
        if not BEHAVIOUR_CODE.fullmatch(code):
            raise BenchmarkError(
                path,
                f"behaviour key {code!r} is not a code like 'P1-B1'",
                fix="key each behaviour by its pillar and behaviour code, e.g. P1-B1",
            )
        threshold = v.get("threshold")
        if threshold is not None and not isinstance(threshold, (int, float)):
            raise BenchmarkError(
                path,
                f"behaviour {code}: threshold must be a number (a score 0-100)",
                fix="e.g. threshold: 80",
            )
        behaviours[code] = BehaviourInfo(
            code,
            str(v.get("title", code)),
            str(v.get("description", "")),
            str(v.get("compliance", "")),
            float(threshold) if threshold is not None else None,
        )
    return BenchmarkInfo(
        version=str(data.get("version", "unversioned")),
        description=str(data.get("description", "")),
        categories=_str_map(data.get("categories"), path, "categories"),
        styles=_str_map(data.get("styles"), path, "styles"),
        pillars=pillars,
        behaviours=behaviours,
        hash=content_hash(data),
    )


def _severity(meta: dict[str, Any], path: Path, line: int | None, code: str) -> int:
    value = meta.get("severity", 0)
    if isinstance(value, bool) or not isinstance(value, int) or not -10 <= value <= 10:
        raise BenchmarkError(
            path,
            f"{code}: severity {value!r} is not an integer from -10 to 10",
            line=line,
            fix="set severity to a whole number between -10 and 10",
        )
    return value


def make_component(kind: Kind, raw: RawComponent, path: Path) -> Component:
    """Validate one raw component and compose its prompt text."""
    severity = _severity(raw.meta, path, raw.line, raw.code)
    title = raw.title or str(raw.meta.get("title", ""))
    text = to_xml(raw.body)
    return Component(
        kind.name,
        raw.code,
        title,
        raw.body,
        text,
        raw.meta,
        severity,
        path,
        raw.line,
        content_hash(kind.name, raw.code, text, {k: v for k, v in raw.meta.items() if k != "title"}),
    )


def parse_individual(kind: Kind, path: Path, files: BenchmarkFiles | None = None) -> Component:
    """Parse `conditions/C2.md`-style files: the code is the file name, metadata the frontmatter."""
    if not re.fullmatch(rf"{kind.prefix}[1-9]\d*\.md", path.name):
        raise BenchmarkError(
            path, f"file name is not '{kind.prefix}<n>.md'", fix=f"rename it, e.g. {kind.prefix}1.md"
        )
    doc = split_frontmatter((files or BenchmarkFiles(path.parent)).read_text(path), path)
    if not doc.body.strip():
        raise BenchmarkError(path, "the component file is empty", fix="write its content, or delete the file")
    raw = RawComponent(path.stem, "", doc.meta, doc.body, 1)
    return make_component(kind, raw, path)


def load_components(
    kind: Kind, folder: Path, warnings: list[str], files: BenchmarkFiles | None = None
) -> tuple[Path, list[Component]] | None:
    """Components of one kind defined in `folder` (consolidated file preferred), or None if none."""
    files = files or BenchmarkFiles(folder)
    consolidated = folder / kind.consolidated
    individual = folder / kind.folder
    if files.is_file(consolidated):
        if files.is_dir(individual):
            warnings.append(
                f"{individual}: ignored because {consolidated.name} is present (the consolidated file wins)"
            )
        text = files.read_text(consolidated)
        if not text.strip():
            raise BenchmarkError(
                consolidated,
                "the component file is empty",
                fix=f"add components ('# {kind.prefix}1' ...) or delete the file",
            )
        components = [
            make_component(kind, raw, consolidated)
            for raw in split_consolidated(text, consolidated, kind.prefix)
        ]
        source = consolidated
    elif files.is_dir(individual):
        paths = sorted(files.markdown_files(individual), key=lambda p: code_sort_key(p.stem))
        if not paths:
            raise BenchmarkError(
                individual,
                "the folder holds no component file",
                fix=f"add {kind.prefix}1.md or delete the folder",
            )
        components = [parse_individual(kind, f, files) for f in paths]
        source = individual
    else:
        return None
    seen: dict[str, Component] = {}
    for component in components:
        if component.code in seen:
            raise BenchmarkError(
                component.source,
                f"code {component.code} is defined twice (also at line {seen[component.code].line})",
                line=component.line,
                fix="give each component its own code",
            )
        seen[component.code] = component
    return source, sorted(components, key=lambda c: code_sort_key(c.code))


@dataclass
class _Cached:
    value: Any = None
    error: BenchmarkError | None = None


class BenchmarkLoader:
    """Loads scenarios of one benchmark root, caching what many scenarios share."""

    def __init__(
        self, root: Path, *, evaluation_types: EvaluationTypes, max_file_size: int = DEFAULT_MAX_FILE_SIZE
    ) -> None:
        self.root = root
        self.files = BenchmarkFiles(root, max_file_size)  # every read stays inside the root
        self._links: _Cached | None = None
        self.evaluation_types = evaluation_types  # the evaluator registry: the loader knows no type itself
        self.warnings: list[str] = []
        self._shared: dict[str, _Cached] = {}
        self._index: dict[str, dict[str, dict[str, Path]]] = {}
        self._info: _Cached | None = None

    @property
    def scenarios_dir(self) -> Path:
        return self.root / "scenarios"

    def info(self) -> BenchmarkInfo:
        """benchmark.yml, parsed once (its error is raised again for every scenario)."""
        if self._info is None:
            self._info = _Cached()
            try:
                self._info.value = parse_benchmark_info(self.root / "benchmark.yml", self.files)
            except BenchmarkError as exc:
                self._info.error = exc
        if self._info.error:
            raise self._info.error
        return self._info.value

    def shared(self, kind: Kind) -> tuple[Path, list[Component]] | None:
        """Root-level conditions or user contexts, parsed once."""
        cached = self._shared.get(kind.name)
        if cached is None:
            cached = self._shared[kind.name] = _Cached()
            try:
                cached.value = load_components(kind, self.root, self.warnings, self.files)
            except BenchmarkError as exc:
                cached.error = exc
        if cached.error:
            raise cached.error
        return cached.value

    def scenario_dirs(self) -> list[Path]:
        """Every scenario folder, in numeric code order."""
        if not self.scenarios_dir.is_dir():
            return []
        dirs = [p for p in self.scenarios_dir.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))]
        return sorted(dirs, key=lambda p: code_sort_key(p.name))

    def _code_index(self, kind: Kind) -> dict[str, dict[str, Path]]:
        """code -> {content hash -> first file defining it} across the whole benchmark."""
        if kind.name not in self._index:
            index: dict[str, dict[str, Path]] = {}
            for folder in [self.root, *self.scenario_dirs()]:
                try:
                    found = load_components(kind, folder, [], self.files)
                except BenchmarkError:
                    continue  # reported by the scenarios that use that file
                for component in found[1] if found else []:
                    index.setdefault(component.code, {}).setdefault(component.hash, component.source)
            self._index[kind.name] = index
        return self._index[kind.name]

    def _check_unique(self, kind: Kind, component: Component) -> None:
        versions = self._code_index(kind).get(component.code, {})
        others = [path for digest, path in versions.items() if digest != component.hash]
        if others:
            raise BenchmarkError(
                component.source,
                f"{kind.name.replace('_', ' ')} {component.code} has different content in {others[0]}",
                line=component.line,
                fix=f"a {kind.prefix} code names one thing across the benchmark: "
                "make both identical or give one a new code",
            )

    def _components_for(
        self, kind: Kind, folder: Path, meta: dict[str, Any], md_path: Path, key: str
    ) -> tuple[Component, ...]:
        found = load_components(kind, folder, self.warnings, self.files) or self.shared(kind)
        components = found[1] if found else []
        for component in components:
            self._check_unique(kind, component)
        wanted = meta.get(key)
        if wanted is None:
            return tuple(components)
        if not isinstance(wanted, list) or not all(isinstance(c, str) for c in wanted):
            raise BenchmarkError(
                md_path,
                f"'{key}' must be a list of codes",
                fix=f"write e.g. {key}: [{kind.prefix}1, {kind.prefix}3]",
            )
        known = {c.code: c for c in components}
        unknown = [c for c in wanted if c not in known]
        if unknown:
            raise BenchmarkError(
                md_path,
                f"'{key}' names unknown code(s) {', '.join(unknown)}",
                fix=f"use codes defined for this scenario: {', '.join(known) or 'none'}",
            )
        return tuple(sorted((known[c] for c in dict.fromkeys(wanted)), key=lambda c: code_sort_key(c.code)))

    def check_links(self, folder: Path) -> None:
        """No link may lead out of the root: one in this scenario's folder fails this scenario, one
        elsewhere under the root (checked once) fails every scenario."""
        if self._links is None:
            self._links = _Cached()
            try:
                self.files.check_tree(self.root, skip=frozenset({"scenarios"}))
                if self.files.is_dir(self.scenarios_dir):
                    names = frozenset(n for n in os.listdir(self.scenarios_dir) if SCENARIO_DIR.match(n))
                    self.files.check_tree(self.scenarios_dir, skip=names)
            except BenchmarkError as exc:
                self._links.error = exc
        if self._links.error:
            raise self._links.error
        self.files.check_tree(folder)

    def load_scenario_file(self, md_path: Path) -> Scenario:
        """Load the scenario of a collected `S<n>.md`-like file, which must be its folder's S<n>.md."""
        match = SCENARIO_DIR.match(md_path.parent.name)
        expected = f"S{match.group(3)}.md" if match else None
        if expected is not None and md_path.name != expected:
            raise BenchmarkError(
                md_path,
                f"file name {md_path.name!r} does not match its folder {md_path.parent.name}",
                fix=f"rename it to {expected} (the number must match the folder's S<n>), or remove it",
            )
        return self.load_scenario(md_path.parent)

    def load_scenario(self, folder: Path) -> Scenario:
        """Load and validate one scenario folder; raises BenchmarkError naming the file to fix."""
        match = SCENARIO_DIR.match(folder.name)
        if not match:
            raise BenchmarkError(
                folder, f"folder name {folder.name!r} is not P<n>-B<n>-S<n>", fix="rename it, e.g. P1-B1-S1"
            )
        self.check_links(folder)
        number = match.group(3)
        md_path = folder / f"S{number}.md"
        if not self.files.is_file(md_path):
            raise BenchmarkError(
                folder,
                f"scenario file S{number}.md is missing",
                fix=f"add S{number}.md (the file name's number must match the folder's S{number})",
            )
        info = self.info()
        doc = split_frontmatter(self.files.read_text(md_path), md_path)
        if not doc.body.strip():
            raise BenchmarkError(
                md_path,
                "the scenario body is empty",
                line=doc.body_line,
                fix="write the scenario's text below the frontmatter",
            )
        meta = doc.meta
        code = folder.name
        pillar = f"P{match.group(1)}"
        behaviour = f"{pillar}-B{match.group(2)}"
        response_format = parse_response_format(folder / f"S{number}.json", self.files)
        evaluation, evaluation_type = parse_evaluation(meta, md_path, response_format, self.evaluation_types)
        criteria = (
            parse_criteria(folder / "criteria.md", self.files) if evaluation_type.needs_criteria else None
        )
        if evaluation_type.needs_criteria and criteria is None:
            raise BenchmarkError(
                md_path,
                f"evaluation type {evaluation.type!r} needs a criteria.md beside it",
                fix="add criteria.md with options, pass_values, response_field, response_type and the rubric",
            )
        conditions = self._components_for(CONDITION, folder, meta, md_path, "conditions")
        user_contexts = self._components_for(USER_CONTEXT, folder, meta, md_path, "user_contexts")
        found = load_components(PERTURBATION, folder, self.warnings, self.files)
        perturbations = tuple(found[1]) if found else ()
        if not conditions:
            raise BenchmarkError(
                md_path,
                "scenario has no condition",
                fix="add conditions.md at the benchmark root or in the scenario folder",
            )
        if not perturbations:
            raise BenchmarkError(
                md_path,
                "scenario has no perturbation",
                fix="add perturbations.md (or perturbations/PT1.md) to the scenario folder",
            )
        risk = meta.get("risk")
        if risk is not None and risk not in RISK_LEVELS:
            raise BenchmarkError(
                md_path,
                f"risk {risk!r} is not one of {', '.join(RISK_LEVELS)}",
                fix=f"set risk to one of {', '.join(RISK_LEVELS)}",
            )
        critical = meta.get("critical", False)
        if not isinstance(critical, bool):
            raise BenchmarkError(
                md_path, "critical must be true or false", fix="write critical: true or critical: false"
            )
        refusal = meta.get("refusal", "fail")
        if refusal not in ("pass", "fail"):
            raise BenchmarkError(
                md_path,
                f"refusal {refusal!r} must be 'pass' or 'fail'",
                fix="write refusal: pass where declining is the safe answer, or leave it out",
            )
        info.pillar(pillar, self.warnings)
        info.behaviour(behaviour, self.warnings)
        text = to_xml(doc.body)
        category = meta.get("category", evaluation.expected)
        return Scenario(
            code=code,
            pillar=pillar,
            behaviour=behaviour,
            path=md_path,
            title=str(meta.get("title", "")),
            meta=meta,
            text=text,
            response_format=response_format,
            evaluation=evaluation,
            criteria=criteria,
            category=str(category) if category is not None else None,
            risk=risk,
            critical=critical,
            refusal_passes=refusal == "pass",
            conditions=conditions,
            user_contexts=user_contexts,
            perturbations=perturbations,
            hash=content_hash(code, text, meta, response_format, criteria.hash if criteria else None),
        )


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
