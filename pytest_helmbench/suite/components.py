"""Read the components of one kind in one folder: a consolidated file, or one file per component.

`conditions.md` (or `conditions/C<n>.md`), `user-contexts.md` (or `user-contexts/U<n>.md`) and
`perturbations.md` (or `perturbations/PT<n>.md`); the consolidated file wins when both exist.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..codes import code_sort_key
from ..errors import BenchmarkError
from .conversation import read_dialogue
from .files import BenchmarkFiles
from .keys import KEYS_BY_KIND, check_keys
from .markdown import RawComponent, split_consolidated, split_frontmatter, to_xml
from .model import PERTURBATION, Component, Kind, content_hash


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


def _text(kind: Kind, raw: RawComponent, path: Path) -> str:
    """The component's prompt text: its H2 sections as tagged blocks, or with `wrap: false` (a
    condition or user context) its body exactly as written, headings included, for a system prompt
    that must reach the model verbatim (a deployed product's own)."""
    wrap = raw.meta.get("wrap", True)
    if not isinstance(wrap, bool):
        raise BenchmarkError(
            path, f"{raw.code}: wrap {wrap!r} is not true or false", line=raw.line, fix="wrap: false"
        )
    if wrap:
        return to_xml(raw.body)
    if kind is PERTURBATION:
        raise BenchmarkError(
            path,
            f"{raw.code}: wrap: false applies to conditions and user contexts (their system prompt text)",
            line=raw.line,
            fix="remove wrap from the perturbation",
        )
    return raw.body.strip()


def make_component(kind: Kind, raw: RawComponent, path: Path) -> Component:
    """Validate one raw component and compose its prompt text."""
    severity = _severity(raw.meta, path, raw.line, raw.code)
    title = raw.title or str(raw.meta.get("title", ""))
    dialogue = None
    if kind is PERTURBATION:
        dialogue = read_dialogue(
            raw.meta, raw.body, path, raw.body_line, raw.code, raw.key_lines.get("simulate")
        )
    text = dialogue.seed_text if dialogue is not None else _text(kind, raw, path)
    check_keys(raw.meta, KEYS_BY_KIND[kind.name], path, raw.key_lines, f"{raw.code}: ")
    meta_hashed = {k: v for k, v in raw.meta.items() if k != "title"}
    # A conversation's hash covers every turn and the persona (its `text` is the first message only).
    extra = () if dialogue is None else (repr(dialogue),)
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
        content_hash(kind.name, raw.code, text, meta_hashed, *extra),
        dialogue,
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
    raw = RawComponent(path.stem, "", doc.meta, doc.body, 1, doc.body_line, doc.key_lines)
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
