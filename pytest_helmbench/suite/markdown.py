"""Markdown handling for benchmark files: normalisation, frontmatter, consolidated files, H2 -> XML.

Composition must be byte-exact and identical for the consolidated and the individual form of a
component, so every rule here is deliberately small and literal (see docs/reference/composition.md).
Frontmatter is split by python-frontmatter's YAML handler, narrowed to the contract (the opening
`---` on the first line, closed by `---` or `...`) and given a loader that refuses YAML aliases and
deep nesting, so a stranger's file can neither expand without bound nor crash libyaml; the body and
its first line are computed here so errors carry the file's own line numbers. Files are read by
`read_text`, which opens regular files only and refuses anything over a size limit.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from frontmatter.default_handlers import YAMLHandler
from yaml.composer import Composer, ComposerError
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

from ..errors import BenchmarkError

#: Default largest benchmark file read (bytes): far above any real component, far below harm.
DEFAULT_MAX_FILE_SIZE = 1024 * 1024
#: Deepest YAML nesting accepted: libyaml's own composer overflows the C stack on deep nesting.
MAX_YAML_DEPTH = 64
#: Pseudo-file systems whose "files" are process state, never benchmark content.
_SPECIAL_ROOTS = ("/proc", "/sys", "/dev")

_FENCE = re.compile(r"^ {0,3}(?P<marker>`{3,}|~{3,})(?P<info>.*)$")
_H1 = re.compile(r"^# (?P<text>.*)$")
_H1_CODE = re.compile(r"^(?P<code>[A-Za-z]+\d+)(?:\s*:\s*(?P<title>.*?))?\s*$")


@dataclass(frozen=True)
class MarkdownDoc:
    """A markdown file split into its YAML metadata and its body."""

    meta: dict[str, Any]
    body: str
    body_line: int  # 1-based line number where the body starts in the file
    key_lines: dict[str, int] = field(default_factory=dict)  # each top-level metadata key's line


@dataclass(frozen=True)
class RawComponent:
    """One `# <code>` entry of a consolidated file, before validation."""

    code: str
    title: str
    meta: dict[str, Any]
    body: str
    line: int  # line of the H1 heading
    body_line: int = 0  # line where the body starts (0: unknown)
    key_lines: dict[str, int] = field(default_factory=dict)  # each metadata key's line in the file


def normalize(text: str) -> str:
    """Drop a BOM and turn CRLF into LF, so files from any editor compose identically."""
    if text.startswith("\ufeff"):
        text = text[1:]
    return text.replace("\r\n", "\n")


def read_text(path: Path, max_size: int = DEFAULT_MAX_FILE_SIZE) -> str:
    """Read a benchmark file as UTF-8, normalised; any problem is a BenchmarkError naming the file.

    Only regular files are opened (a FIFO would block, a device could do anything), never one under
    /proc, /sys or /dev, and never more than `max_size` bytes: the file comes from a stranger."""
    if is_system_path(path):
        raise BenchmarkError(
            path, "is a system file, not benchmark content", fix="replace it with a plain file"
        )
    return read_regular_text(path, max_size)


def is_system_path(path: Path | str) -> bool:
    """Whether `path` resolves under /proc, /sys or /dev, whose "files" are process or device state."""
    real = os.path.realpath(path)
    return any(real == top or real.startswith(top + "/") for top in _SPECIAL_ROOTS)


def read_regular_text(path: Path, max_size: int) -> str:
    """`read_text` for a path already known to resolve outside /proc, /sys and /dev (one realpath less)."""
    try:
        _check_regular(path, os.stat(path))
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as handle:
            _check_regular(path, os.fstat(handle.fileno()))  # the file may have been swapped since
            data = handle.read(max_size + 1)
    except OSError as exc:
        raise BenchmarkError(
            path, f"cannot be read: {exc.strerror}", fix="check that the file exists and is readable"
        ) from None
    if len(data) > max_size:
        raise BenchmarkError(
            path,
            f"is larger than the {max_size}-byte limit",
            fix="shorten it, or raise the limit with --helmbench-max-file-size",
        )
    try:
        return normalize(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BenchmarkError(
            path, f"not valid UTF-8 ({exc.reason} at byte {exc.start})", fix="save the file as UTF-8"
        ) from None


def _check_regular(path: Path, info: os.stat_result) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise BenchmarkError(
            path,
            "is not a regular file (a folder, FIFO, socket or device)",
            fix="replace it with a plain text file",
        )


class YamlRefused(ComposerError):
    """An alias or too deep a nesting: refused, because either can make loading explode."""

    def __init__(self, problem: str, fix: str, mark: Any) -> None:
        super().__init__(None, None, problem, mark)
        self.fix = fix


class _Guard(Composer):
    """Compose nodes in Python, refusing aliases (`*name`, billion laughs) and deep nesting."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise YamlRefused(
                f"the alias *{event.anchor} is not allowed",
                "write the value out in full (aliases are refused: they can expand without bound)",
                event.start_mark,
            )
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise YamlRefused(
                    f"nested deeper than {MAX_YAML_DEPTH} levels",
                    "flatten the metadata",
                    self.peek_event().start_mark,
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class SafeYamlLoader(_Guard, yaml.SafeLoader):
    """PyYAML's safe loader (no Python tags) with aliases and deep nesting refused."""


try:
    from yaml._yaml import CParser
except ImportError:  # PyYAML built without libyaml
    _FastLoader: type = SafeYamlLoader
else:

    class _FastLoader(_Guard, CParser, SafeConstructor, Resolver):  # type: ignore[no-redef]
        """libyaml's scanner and parser (several times faster) under the same guarded composer."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            Composer.__init__(self)


_DEEP_INDENT = re.compile(r"^[ \t]{128}", re.MULTILINE)
#: A block sequence's `-` (followed by a blank), a flow collection's opening or a complex key's `?`.
_NESTING_INDICATOR = re.compile(r"-(?=[ \t\r\n]|$)|[\[{?]")
#: Nesting libyaml's recursive composer is given at most: far below the ~10^5 levels that overflow its
#: main thread's stack, and small enough for a thread's smaller one (libyaml 0.2.5 itself refuses past
#: 1,000 levels; an older one does not). The shipped files count at most some 250.
_LIBYAML_NESTING = 1_000
_PLAIN_LOADER = getattr(yaml, "CSafeLoader", None)


def _libyaml_may_compose(text: str) -> bool:
    """Whether libyaml may compose `text` on its own: no alias without a `*`, and its nesting, bounded by
    the indentation (under 128 columns) plus the nesting indicators, stays far below what overflows
    libyaml's composer. The nodes' depth is checked afterwards (`_depth`)."""
    if "*" in text or _DEEP_INDENT.search(text) is not None:
        return False
    return sum(1 for _ in _NESTING_INDICATOR.finditer(text)) < _LIBYAML_NESTING


def _depth(root: yaml.Node) -> int:
    """How deeply `root` nests (itself 1; keys count as its guarded composer counts them), or the first
    depth past MAX_YAML_DEPTH found."""
    deepest = 0
    pending: list[tuple[yaml.Node, int]] = [(root, 1)]
    while pending:
        node, depth = pending.pop()
        if depth > MAX_YAML_DEPTH:
            return depth
        deepest = max(deepest, depth)
        if isinstance(node, yaml.MappingNode):
            pending += [(part, depth + 1) for pair in node.value for part in pair]
        elif isinstance(node, yaml.SequenceNode):
            pending += [(item, depth + 1) for item in node.value]
    return deepest


def yaml_compose(text: str) -> yaml.Node | None:
    """Compose YAML into nodes, refusing aliases and deep nesting: libyaml's own composer where it
    cannot be overflowed and its nodes nest no deeper than allowed (several times faster), else the
    guarded composer, which refuses them with the line; errors are PyYAML's (see load_yaml)."""
    if _PLAIN_LOADER is not None and _libyaml_may_compose(text):
        try:
            node = yaml.compose(text, Loader=_PLAIN_LOADER)
        except yaml.YAMLError:
            pass  # libyaml words its errors differently: report the pure-Python loader's message
        else:
            if node is None or _depth(node) <= MAX_YAML_DEPTH:
                return node
    try:
        return yaml.compose(text, Loader=_FastLoader)
    except yaml.YAMLError:
        pass
    return yaml.compose(text, Loader=SafeYamlLoader)


def yaml_load(text: str) -> Any:
    """Load YAML safely, refusing aliases and deep nesting; errors are PyYAML's (see load_yaml)."""
    return _load_with_node(text)[0]


def _load_with_node(text: str) -> tuple[Any, yaml.Node | None]:
    node = yaml_compose(text)
    return (None if node is None else SafeConstructor().construct_document(node)), node


def load_yaml(text: str, path: Path, first_line: int = 1) -> Any:
    """Load YAML safely; errors name the file and the line within it."""
    return load_yaml_node(text, path, first_line)[0]


def load_yaml_node(text: str, path: Path, first_line: int = 1) -> tuple[Any, yaml.Node | None]:
    """The loaded data and the node it was built from (where each part starts: lines for errors,
    without composing the text twice); errors as load_yaml's."""
    try:
        return _load_with_node(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = first_line + mark.line if mark is not None else first_line
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        if isinstance(exc, YamlRefused):
            raise BenchmarkError(path, f"YAML refused: {problem}", line=line, fix=exc.fix) from None
        raise BenchmarkError(
            path,
            f"malformed YAML: {problem}",
            line=line,
            fix="correct the YAML syntax (indentation, quotes, colons)",
        ) from None


class _FrontmatterHandler(YAMLHandler):
    """python-frontmatter's YAML handler, narrowed to the contract and loading with SafeYamlLoader."""

    # Opening `---` or closing `---` / `...`, trailing whitespace allowed but never a line break.
    FM_BOUNDARY = re.compile(r"^(?:---|\.\.\.)[^\S\n]*$", re.MULTILINE)

    def detect(self, text: str) -> bool:
        return text.split("\n", 1)[0].rstrip() == "---"

    def load(self, fm: str, **kwargs: object) -> Any:
        return yaml_load(fm)


_HANDLER = _FrontmatterHandler()


def _yaml_mapping(text: str, path: Path, first_line: int) -> dict[str, Any]:
    data = load_yaml(text, path, first_line)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise BenchmarkError(
            path,
            "the metadata block must be a YAML mapping (key: value lines)",
            line=first_line + 1,
            fix="write one 'key: value' per line, e.g. 'severity: 2'",
        )
    return data


def split_frontmatter(text: str, path: Path) -> MarkdownDoc:
    """Split `---` YAML frontmatter from the body; a file without frontmatter has empty metadata."""
    return _split_block(text, path, 1, "frontmatter")


_TOP_LEVEL_KEY = re.compile(r"^([^\s#:'\"-][^:]*?|'[^']*'|\"[^\"]*\")\s*:(?:\s|$)")


def _split_block(text: str, path: Path, first_line: int, what: str) -> MarkdownDoc:
    """Split a `---` block opening `text` (which starts at `first_line` of the file) from what follows."""
    if not _HANDLER.detect(text):
        return MarkdownDoc({}, text, first_line)
    try:
        fm, content = _HANDLER.split(text)
    except ValueError:
        raise BenchmarkError(
            path,
            f"{what} opened with '---' is never closed",
            line=first_line,
            fix="add a closing '---' line after the metadata",
        ) from None
    # `fm` keeps the opening line's line break, so a YAML mark's line counts from the opening line;
    # its last line break is dropped so an error at the end of the YAML names the YAML's last line.
    meta = _yaml_mapping(fm.removesuffix("\n"), path, first_line)
    body_line = first_line + text.count("\n", 0, len(text) - len(content)) + 1
    lines = {}
    for offset, line in enumerate(fm.split("\n")):
        key = _TOP_LEVEL_KEY.match(line)
        if key is not None:
            lines.setdefault(key.group(1).strip("'\""), first_line + offset)
    return MarkdownDoc(meta, content[1:] if content.startswith("\n") else content, body_line, lines)


def _is_fence(line: str, fence: str | None) -> tuple[bool, str | None]:
    """Track fenced code blocks (CommonMark) so headings inside code are left alone.

    A fence opens with 3+ backticks or tildes (a backtick fence's info string has no backtick) and
    closes only with the same character, at least as long, followed by nothing but spaces or tabs."""
    match = _FENCE.match(line)
    if not match:
        return False, fence
    marker, info = match.group("marker"), match.group("info")
    if fence is None:
        if marker[0] == "`" and "`" in info:
            return False, None  # inline code, not a fence
        return True, marker
    if marker[0] == fence[0] and len(marker) >= len(fence) and not info.strip(" \t"):
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
        doc = _metadata_block(lines[start + 1 : end], path, start + 2)
        components.append(
            RawComponent(code, title, doc.meta, doc.body, start + 1, doc.body_line, doc.key_lines)
        )
    return components


def _metadata_block(lines: list[str], path: Path, first_line: int) -> MarkdownDoc:
    """Read an optional `---` YAML block that follows an H1 after blank lines only: its metadata, the
    body and the lines of both in the file."""
    index = 0
    while index < len(lines) and not lines[index].strip():
        index += 1
    if index == len(lines) or lines[index].rstrip() != "---":
        return MarkdownDoc({}, "\n".join(lines), first_line)
    return _split_block("\n".join(lines[index:]), path, first_line + index, "metadata block")


def heading_tag(heading: str) -> str:
    """Turn an H2 heading into an XML tag name: lowercase ASCII, other runs -> '_'."""
    text = heading.strip()
    text = re.sub(r"(^|\s)#+\s*$", "", text).strip()
    ascii_only = "".join(ch.lower() if ch.isascii() else "\0" for ch in text)
    tag = re.sub(r"[^a-z0-9]+", "_", ascii_only).strip("_")
    if not tag or tag[0].isdigit():
        tag = "section_" + tag
    return tag


@dataclass(frozen=True)
class Section:
    """One H2 section of a body: its heading as written, its content (stripped) and its heading's
    line within the body (0-based)."""

    heading: str
    content: str
    offset: int

    @property
    def tag(self) -> str:
        return heading_tag(self.heading)


def sections(body: str) -> tuple[str, list[Section]]:
    """The text before the first H2 (stripped) and every H2 section, in order (headings inside
    fenced code are content)."""
    preface: list[str] = []
    found: list[tuple[str, int, list[str]]] = []
    fence: str | None = None
    for offset, line in enumerate(body.split("\n")):
        toggled, fence = _is_fence(line, fence)
        if not toggled and fence is None and line.startswith("## "):
            found.append((line[3:], offset, []))
            continue
        (found[-1][2] if found else preface).append(line)
    parts = [Section(heading, "\n".join(content).strip(), offset) for heading, offset, content in found]
    return "\n".join(preface).strip(), parts


def xml_section(tag: str, content: str) -> str:
    return f"<{tag}>\n{content}\n</{tag}>"


def to_xml(body: str) -> str:
    """Convert a component body to prompt text: each H2 section becomes `<tag>\\n...\\n</tag>`."""
    lead, found = sections(body)
    parts = [lead] if lead else []
    parts.extend(xml_section(section.tag, section.content) for section in found)
    return "\n\n".join(parts)
