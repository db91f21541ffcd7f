"""Load the benchmark tree into validated, immutable objects (files -> parsed benchmark).

Loading is per scenario so a bad file fails only the scenarios it affects; root-level files and the
benchmark-wide code index are parsed once per loader and cached (errors included).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..codes import SCENARIO_DIR, code_sort_key
from ..errors import BenchmarkError
from .benchmark_yml import parse_benchmark_info
from .cases import UNKNOWN_LOCALE
from .components import load_components
from .evaluation_spec import (
    EvaluationSpec,
    EvaluationTypes,
    LineOf,
    evaluation_rubric,
    parse_checks,
    parse_evaluation,
    rubric_path,
    shared,
)
from .files import DEFAULT_MAX_FILE_SIZE, BenchmarkFiles
from .keys import SCENARIO_KEYS, check_keys
from .markdown import split_frontmatter, to_xml
from .model import (
    CONDITION,
    PERTURBATION,
    USER_CONTEXT,
    BenchmarkInfo,
    Check,
    Component,
    Criteria,
    Kind,
    Scenario,
    content_hash,
)
from .resources import CrisisResources, load_resources, require_resources
from .scenario_files import parse_criteria, parse_response_format
from .scoring_spec import RISK_LEVELS, parse_harmful_labels
from .yaml_lines import frontmatter_lines

#: Collected as a scenario file: `S<n>.md` and look-alikes (`S01.md`), which must then match their folder.
SCENARIO_FILE_LIKE = re.compile(r"^[Ss]\d+\.md$")


def _rubric_hashes(checks: tuple[Check, ...]) -> tuple[Any, ...]:
    """The rubrics' part of a scenario's hash (unchanged for a scenario with no `checks:`)."""
    label = checks[0].criteria.hash if checks[0].criteria else None
    return (
        (label,)
        if len(checks) == 1
        else (label, [(c.name, c.criteria and c.criteria.hash) for c in checks[1:]])
    )


def _flags(meta: dict[str, Any], md_path: Path) -> tuple[str | None, bool, str]:
    """The frontmatter's `risk`, `critical` and `refusal`, each checked against what it may be."""
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
    return risk, critical, refusal


def _label_values(label: Check, response_format: dict[str, Any]) -> tuple[str, ...] | None:
    """The values the label check can give other than a pass (what `harmful_labels` may name): an options
    rubric's failing options, else the enum of the answer field it reads minus the expected value; None
    when nothing says (any label may be named)."""
    if label.criteria is not None and not label.criteria.atomic and label.criteria.options:
        return tuple(o for o in label.criteria.options if o not in label.criteria.pass_values)
    prop = response_format["json_schema"]["schema"].get("properties", {}).get(label.spec.field)
    if not isinstance(prop, dict):
        return None
    enum = prop.get(
        "enum", (prop.get("items") or {}).get("enum") if isinstance(prop.get("items"), dict) else None
    )
    if not isinstance(enum, list):
        return None
    return tuple(str(v) for v in enum if v != label.spec.expected)


@dataclass
class _Cached:
    value: Any = None
    error: BenchmarkError | None = None


def check_scenario_file_name(md_path: Path) -> None:
    """A collected `S<n>.md`-like file must be its folder's S<n>.md (a misnamed copy is an error)."""
    match = SCENARIO_DIR.match(md_path.parent.name)
    expected = f"S{match.group(3)}.md" if match else None
    if expected is not None and md_path.name != expected:
        raise BenchmarkError(
            md_path,
            f"file name {md_path.name!r} does not match its folder {md_path.parent.name}",
            fix=f"rename it to {expected} (the number must match the folder's S<n>), or remove it",
        )


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
        self._resources: _Cached | None = None

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

    def resources(self) -> CrisisResources | None:
        """resources.yml (None when the benchmark has none), parsed once; its error is raised again
        for every scenario that checks resources."""
        if self._resources is None:
            self._resources = _Cached()
            try:
                self._resources.value = load_resources(self.root, self.files)
            except BenchmarkError as exc:
                self._resources.error = exc
        if self._resources.error:
            raise self._resources.error
        return self._resources.value

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
        written = self.files.read_text(md_path)
        doc = split_frontmatter(written, md_path)
        line_of = frontmatter_lines(written, md_path)  # for the errors of evaluation settings
        if not doc.body.strip():
            raise BenchmarkError(
                md_path,
                "the scenario body is empty",
                line=doc.body_line,
                fix="write the scenario's text below the frontmatter",
            )
        meta = doc.meta
        check_keys(meta, SCENARIO_KEYS, md_path, doc.key_lines)
        code = folder.name
        pillar = f"P{match.group(1)}"
        behaviour = f"{pillar}-B{match.group(2)}"
        response_format = parse_response_format(folder / f"S{number}.json", self.files)
        evaluation, needs = parse_evaluation(meta, md_path, response_format, self.evaluation_types, line_of)
        rubric = evaluation_rubric(meta, md_path) if needs.criteria else None
        criteria = (
            shared(parse_criteria(rubric_path(rubric, folder, self.root), self.files), rubric)
            if rubric
            else None
        )
        if needs.criteria and criteria is None:
            where = (
                f"the shared rubric {rubric}"
                if rubric and rubric.startswith("/")
                else f"a {rubric} beside it"
            )
            raise BenchmarkError(
                md_path,
                f"evaluation type {evaluation.type!r} needs {where}, which is not there",
                fix="add the rubric (options, pass_values, response_field, response_type and the text), "
                "or correct 'criteria:'",
            )
        checks = self._checks(md_path, meta, response_format, evaluation, criteria, line_of)
        conditions = self._components_for(CONDITION, folder, meta, md_path, "conditions")
        user_contexts = self._components_for(USER_CONTEXT, folder, meta, md_path, "user_contexts")
        found = load_components(PERTURBATION, folder, self.warnings, self.files)
        perturbations = tuple(found[1]) if found else ()
        if any(self.evaluation_types.needs(c.spec.type).resources for c in checks):
            resources = require_resources(self.resources(), self.root, md_path)
            for part in (*user_contexts, *perturbations):  # a locale the resources do not list: uncheckable
                # what the messages say may be `unknown` (the user is abroad); a stored profile may not
                placed = part.kind == PERTURBATION and part.meta.get("locale") == UNKNOWN_LOCALE
                if "locale" in part.meta and not placed:
                    resources.require_locale(part.meta["locale"], part.source, part.line)
            if "locale" in meta and meta["locale"] != UNKNOWN_LOCALE:
                resources.require_locale(meta["locale"], md_path)
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
        _check_styles(perturbations, info.styles)
        risk, critical, refusal = _flags(meta, md_path)
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
            hash=content_hash(code, text, meta, response_format, *_rubric_hashes(checks)),
            checks=checks,
            harmful_labels=parse_harmful_labels(
                meta, md_path, _label_values(checks[0], response_format), line_of
            ),
        )

    def _checks(
        self,
        md_path: Path,
        meta: dict[str, Any],
        response_format: dict[str, Any],
        evaluation: EvaluationSpec,
        criteria: Criteria | None,
        line_of: LineOf | None = None,
    ) -> tuple[Check, ...]:
        """The label check, then every `checks:` item with the rubric it names (read inside the folder)."""
        folder = md_path.parent
        label = Check(evaluation.type, evaluation, criteria, role="evaluation")
        found = [label]
        for parsed in parse_checks(meta, md_path, response_format, self.evaluation_types, line_of):
            if parsed.name == label.name:
                raise BenchmarkError(
                    md_path,
                    f"a check is named {parsed.name!r}, like the scenario's evaluation",
                    fix="give the check another name (name: ...)",
                )
            rubric = None
            if parsed.rubric is not None:
                read = parse_criteria(rubric_path(parsed.rubric, folder, self.root), self.files)
                rubric = shared(read, parsed.rubric)
                if rubric is None:
                    from_root = parsed.rubric.startswith("/")
                    where = "under the benchmark root" if from_root else "in the folder"
                    place = "under the benchmark root" if from_root else f"beside {md_path.name}"
                    raise BenchmarkError(
                        md_path,
                        f"check {parsed.name!r} names the rubric {parsed.rubric}, which is not {where}",
                        fix=f"add {parsed.rubric.lstrip('/')} {place}, or correct 'criteria:'",
                    )
            found.append(Check(parsed.name, parsed.spec, rubric))
        return tuple(found)


def _check_styles(perturbations: list[Component], styles: dict[str, str]) -> None:
    """When benchmark.yml declares its styles, each perturbation's `style` is one of them: the figures
    by style would otherwise hold a style nobody defined (a typo makes a style of its own)."""
    if not styles:
        return
    for perturbation in perturbations:
        style = perturbation.style
        if style is not None and style not in styles:
            raise BenchmarkError(
                perturbation.source,
                f"{perturbation.code}: style {style!r} is not one of the styles benchmark.yml declares",
                line=perturbation.line,
                fix=f"use one of {', '.join(styles)}, or add {style} to styles: in benchmark.yml",
            )
