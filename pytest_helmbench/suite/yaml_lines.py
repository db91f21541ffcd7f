"""A YAML file's loaded data checked with the line of each part at fault, duplicate keys included.

PyYAML's loaded data carries no line numbers and silently keeps the last of two equal keys; composing
the same text into nodes (markdown.py's yaml_compose: no alias, bounded nesting) gives both.
Used for resources.yml, whose every error names the line and the fix.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NoReturn

import yaml

from ..errors import BenchmarkError
from .markdown import yaml_compose

Where = tuple[str | int, ...]
"""A path into the data: mapping keys and sequence indexes, e.g. ("locales", "GB", "services", 0)."""


class YamlReader:
    """Checks on loaded data whose errors name the file, the line of the part at fault and the fix.

    Lines come from composing the same text into YAML nodes (yaml_compose: no alias reaches
    here), which also finds the duplicate keys that loading silently drops."""

    def __init__(self, path: Path, source: str | yaml.Node | None) -> None:
        """`source`: the file's text, or the node its data was loaded from (markdown.load_yaml_node: the
        text is not composed a second time)."""
        self.path = path
        self.lines: dict[Where, int] = {}
        self.duplicates: list[tuple[Where, int]] = []
        root = yaml_compose(source) if isinstance(source, str) else source
        if root is not None:
            self._walk(root, ())

    def _walk(self, node: yaml.Node, where: Where) -> None:
        self.lines.setdefault(where, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for key, value in node.value:
                child = (*where, str(key.value))
                if str(key.value) in seen:
                    self.duplicates.append((child, key.start_mark.line + 1))
                seen.add(str(key.value))
                self.lines.setdefault(child, key.start_mark.line + 1)
                self._walk(value, child)
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                self._walk(item, (*where, index))

    def line(self, where: Where) -> int | None:
        while where and where not in self.lines:
            where = where[:-1]
        return self.lines.get(where)

    def fail(self, where: Where, message: str, fix: str) -> NoReturn:
        raise BenchmarkError(self.path, message, line=self.line(where), fix=fix)

    def check_duplicates(self) -> None:
        for where, line in self.duplicates:
            what = f"locale {where[1]}" if len(where) == 2 and where[0] == "locales" else f"key {where[-1]!r}"
            raise BenchmarkError(
                self.path,
                f"{what} appears twice (the second would silently replace the first)",
                line=line,
                fix="keep one entry and merge what the two say",
            )

    def keys(self, entry: Mapping[Any, Any], where: Where, allowed: frozenset[str]) -> None:
        for key in entry:
            if key not in allowed:
                self.fail(
                    (*where, str(key)), f"unknown key {key!r}", f"use only {', '.join(sorted(allowed))}"
                )

    def mapping(self, value: object, where: Where, what: str, allowed: frozenset[str]) -> dict[Any, Any]:
        if not isinstance(value, dict):
            self.fail(
                where, f"{what} must be a mapping of keys", f"write its keys: {', '.join(sorted(allowed))}"
            )
        self.keys(value, where, allowed)
        return value

    def text(self, entry: Mapping[Any, Any], where: Where, key: str) -> str:
        value = entry.get(key)
        if not isinstance(value, str) or not value.strip():
            label = entry.get("name") if key != "name" and isinstance(entry.get("name"), str) else None
            owner = f"{label}: " if label else ""
            self.fail(
                (*where, key) if key in entry else where,
                f"{owner}'{key}' is missing or not text",
                f"add {key}: <text> (quote it if it looks like a number)",
            )
        return value.strip()


_FENCE = re.compile(r"(?:---|\.\.\.)[^\S\n]*")


def frontmatter_lines(text: str, path: Path) -> Callable[[Where], int | None]:
    """The file line of a part of a markdown file's `---` frontmatter (already loaded and checked by
    markdown.py, so it composes), by its path of keys and indexes; None when there is none."""
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != "---":
        return lambda where: None
    end = next((i for i in range(1, len(lines)) if _FENCE.fullmatch(lines[i])), None)
    if end is None:
        return lambda where: None
    reader = YamlReader(path, "\n".join(lines[1:end]))

    def line_of(where: Where) -> int | None:
        line = reader.line(where)
        return line + 1 if line else None  # the frontmatter starts on the file's second line

    return line_of
