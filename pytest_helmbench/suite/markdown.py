"""Markdown handling for benchmark files: normalisation, frontmatter, consolidated files, H2 -> XML.

Composition must be byte-exact and identical for the consolidated and the individual form of a
component, so every rule here is deliberately small and literal (see README, "Composition").
The frontmatter split is hand-written rather than python-frontmatter's because errors must carry
the file's own line numbers, and a metadata block may follow an H1 in the middle of a file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..errors import BenchmarkError

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_H1 = re.compile(r"^# (?P<text>.*)$")
_H1_CODE = re.compile(r"^(?P<code>[A-Za-z]+\d+)(?:\s*:\s*(?P<title>.*?))?\s*$")


@dataclass(frozen=True)
class MarkdownDoc:
    """A markdown file split into its YAML metadata and its body."""

    meta: dict[str, Any]
    body: str
    body_line: int  # 1-based line number where the body starts in the file


@dataclass(frozen=True)
class RawComponent:
    """One `# <code>` entry of a consolidated file, before validation."""

    code: str
    title: str
    meta: dict[str, Any]
    body: str
    line: int  # line of the H1 heading


def normalize(text: str) -> str:
    """Drop a BOM and turn CRLF into LF, so files from any editor compose identically."""
    if text.startswith("\ufeff"):
        text = text[1:]
    return text.replace("\r\n", "\n")


def read_text(path: Path) -> str:
    """Read a benchmark file as UTF-8, normalised; a decoding problem is a BenchmarkError."""
    try:
        return normalize(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BenchmarkError(
            path, f"not valid UTF-8 ({exc.reason} at byte {exc.start})", fix="save the file as UTF-8"
        ) from None
    except OSError as exc:
        raise BenchmarkError(
            path, f"cannot be read: {exc.strerror}", fix="check that the file exists and is readable"
        ) from None


# libyaml's safe loader builds the same values about ten times faster (collection reads a few YAML
# blocks per scenario); the pure-Python one is the fallback and the source of error messages.
_FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(text: str, path: Path, first_line: int = 1) -> Any:
    """Load YAML safely; errors name the file and the line within it."""
    try:
        return yaml.load(text, Loader=_FAST_LOADER)
    except yaml.YAMLError:
        pass  # libyaml words its errors differently: report the pure-Python loader's message
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = first_line + mark.line if mark is not None else first_line
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise BenchmarkError(
            path,
            f"malformed YAML: {problem}",
            line=line,
            fix="correct the YAML syntax (indentation, quotes, colons)",
        ) from None


def _yaml_mapping(lines: list[str], path: Path, first_line: int) -> dict[str, Any]:
    data = load_yaml("\n".join(lines), path, first_line)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise BenchmarkError(
            path,
            "the metadata block must be a YAML mapping (key: value lines)",
            line=first_line,
            fix="write one 'key: value' per line, e.g. 'severity: 2'",
        )
    return data


def split_frontmatter(text: str, path: Path) -> MarkdownDoc:
    """Split `---` YAML frontmatter from the body; a file without frontmatter has empty metadata."""
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != "---":
        return MarkdownDoc({}, text, 1)
    for index in range(1, len(lines)):
        if lines[index].rstrip() in ("---", "..."):
            meta = _yaml_mapping(lines[1:index], path, 2)
            return MarkdownDoc(meta, "\n".join(lines[index + 1 :]), index + 2)
    raise BenchmarkError(
        path,
        "frontmatter opened with '---' is never closed",
        line=1,
        fix="add a closing '---' line after the metadata",
    )


def _is_fence(line: str, fence: str | None) -> tuple[bool, str | None]:
    """Track fenced code blocks so headings inside code are left alone."""
    match = _FENCE.match(line)
    if not match:
        return False, fence
    marker = match.group(1)
    if fence is None:
        return True, marker
    if marker[0] == fence[0] and len(marker) >= len(fence):
        return True, None
    return False, fence


def split_consolidated(text: str, path: Path, prefix: str) -> list[RawComponent]:
    """Split a consolidated file into its `# <code>[: title]` components (codes `<prefix><n>`)."""
    lines = text.split("\n")
    starts: list[tuple[int, str, str]] = []
    fence: str | None = None
    for index, line in enumerate(lines):
        toggled, fence = _is_fence(line, fence)
        if toggled or fence is not None:
            continue
        match = _H1.match(line)
        if not match:
            continue
        head = _H1_CODE.match(match.group("text").strip())
        code = head.group("code") if head else ""
        if not head or not re.fullmatch(rf"{prefix}[1-9]\d*", code):
            raise BenchmarkError(
                path,
                f"heading {line.strip()!r} does not start with a valid code",
                line=index + 1,
                fix=f"write it as '# {prefix}<n>' or '# {prefix}<n>: <title>' (e.g. '# {prefix}1: ...')",
            )
        starts.append((index, code, (head.group("title") or "").strip()))
    if not starts:
        raise BenchmarkError(
            path, "no component found", fix=f"add at least one '# {prefix}1' heading followed by its content"
        )
    stray = next((index for index in range(starts[0][0]) if lines[index].strip()), None)
    if stray is not None:
        raise BenchmarkError(
            path,
            "text before the first '# <code>' heading",
            line=stray + 1,
            fix="move it under a component heading or delete it",
        )
    components = []
    for number, (start, code, title) in enumerate(starts):
        end = starts[number + 1][0] if number + 1 < len(starts) else len(lines)
        meta, body = _metadata_block(lines[start + 1 : end], path, start + 2)
        components.append(RawComponent(code, title, meta, body, start + 1))
    return components


def _metadata_block(lines: list[str], path: Path, first_line: int) -> tuple[dict[str, Any], str]:
    """Read an optional `---` YAML block that follows an H1 after blank lines only."""
    index = 0
    while index < len(lines) and not lines[index].strip():
        index += 1
    if index == len(lines) or lines[index].rstrip() != "---":
        return {}, "\n".join(lines)
    for close in range(index + 1, len(lines)):
        if lines[close].rstrip() in ("---", "..."):
            meta = _yaml_mapping(lines[index + 1 : close], path, first_line + index + 1)
            return meta, "\n".join(lines[close + 1 :])
    raise BenchmarkError(
        path,
        "metadata block opened with '---' is never closed",
        line=first_line + index,
        fix="add a closing '---' line",
    )


def heading_tag(heading: str) -> str:
    """Turn an H2 heading into an XML tag name: lowercase ASCII, other runs -> '_'."""
    text = heading.strip()
    text = re.sub(r"(^|\s)#+\s*$", "", text).strip()
    ascii_only = "".join(ch.lower() if ch.isascii() else "\0" for ch in text)
    tag = re.sub(r"[^a-z0-9]+", "_", ascii_only).strip("_")
    if not tag or tag[0].isdigit():
        tag = "section_" + tag
    return tag


def to_xml(body: str) -> str:
    """Convert a component body to prompt text: each H2 section becomes `<tag>\\n...\\n</tag>`."""
    lines = body.split("\n")
    preface: list[str] = []
    sections: list[tuple[str, list[str]]] = []
    fence: str | None = None
    for line in lines:
        toggled, fence = _is_fence(line, fence)
        if not toggled and fence is None and line.startswith("## "):
            sections.append((heading_tag(line[3:]), []))
            continue
        (sections[-1][1] if sections else preface).append(line)
    parts = []
    lead = "\n".join(preface).strip()
    if lead:
        parts.append(lead)
    for tag, content in sections:
        parts.append(f"<{tag}>\n" + "\n".join(content).strip() + f"\n</{tag}>")
    return "\n\n".join(parts)
