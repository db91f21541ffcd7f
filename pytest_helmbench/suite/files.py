"""Reading a benchmark tree written by a stranger: nothing outside its root, regular files only.

Every path the loader touches goes through BenchmarkFiles. A symbolic link that resolves outside the
root is a BenchmarkError naming the link, raised before anything it points to is opened or listed,
so no outside content can be read, sent to a model or stored; reading itself is
`markdown.read_text` (regular files only, never /proc, /sys or /dev, under a size limit).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import BenchmarkError, ConfigError
from .markdown import DEFAULT_MAX_FILE_SIZE, is_system_path, read_regular_text

__all__ = ["DEFAULT_MAX_FILE_SIZE", "BenchmarkFiles", "parse_file_size"]


def parse_file_size(value: object) -> int:
    """The --helmbench-max-file-size value (bytes; None or empty = the default)."""
    if value is None or str(value).strip() == "":
        return DEFAULT_MAX_FILE_SIZE
    try:
        size = int(str(value).strip())
    except ValueError:
        size = 0
    if size < 1:
        raise ConfigError(
            f"--helmbench-max-file-size: {value!r} must be a whole number of bytes, at least 1 "
            f"(default {DEFAULT_MAX_FILE_SIZE})"
        )
    return size


class BenchmarkFiles:
    """The files of one benchmark root, confined to it."""

    def __init__(self, root: Path, max_file_size: int = DEFAULT_MAX_FILE_SIZE) -> None:
        self.root = root
        self.max_file_size = max_file_size
        self._real_root = os.path.realpath(root)
        self._prefix = self._real_root.rstrip("/") + "/"
        self._system = is_system_path(self._real_root)  # a root under /proc: nothing in it is read
        self._safe_dirs: set[str] = set()  # folders known to resolve inside the root

    def _inside(self, path: Path | str) -> bool:
        real = os.path.realpath(path)
        return real == self._real_root or real.startswith(self._prefix)

    def _inside_fast(self, path: Path) -> bool:
        """`_inside` with the parent folder's answer cached: one lstat per path instead of one per
        component (collection checks every file of every scenario)."""
        parent = str(path.parent)
        if parent not in self._safe_dirs:
            if not self._inside(parent):
                return False
            self._safe_dirs.add(parent)
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            return True  # absent: nothing there to read
        return not stat.S_ISLNK(mode) or self._inside(path)

    def check(self, path: Path) -> None:
        """Raise, naming the link, if `path` or a folder on its way from the root leads outside the root."""
        if path == self.root or self._inside_fast(path):
            return
        try:
            parts = path.relative_to(self.root).parts
        except ValueError:
            raise BenchmarkError(
                path, "is outside the benchmark root", fix="keep every benchmark file inside the root"
            ) from None
        current = self.root
        for part in parts:
            current = current / part
            if not self._inside(current):
                break
        raise _escaping_link(current)

    def kind(self, path: Path) -> str | None:
        """'file', 'dir' or None (absent); a FIFO, socket or device is an error, never opened."""
        self.check(path)
        try:
            mode = os.stat(path).st_mode
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise BenchmarkError(
                path, f"cannot be read: {exc.strerror}", fix="check that it exists and is readable"
            ) from None
        if stat.S_ISREG(mode):
            return "file"
        if stat.S_ISDIR(mode):
            return "dir"
        raise BenchmarkError(
            path, "is not a regular file (a FIFO, socket or device)", fix="replace it with a plain text file"
        )

    def is_file(self, path: Path) -> bool:
        return self.kind(path) == "file"

    def is_dir(self, path: Path) -> bool:
        return self.kind(path) == "dir"

    def read_text(self, path: Path) -> str:
        """The file's normalised text, once it is known to lie inside the root."""
        self.check(path)
        if self._system:
            raise BenchmarkError(path, "is a system file, not benchmark content", fix="use a real folder")
        return read_regular_text(path, self.max_file_size)

    def markdown_files(self, folder: Path) -> list[Path]:
        """The `*.md` entries of a folder inside the root (each is checked again when read)."""
        self.check(folder)
        with os.scandir(folder) as entries:
            return sorted(folder / entry.name for entry in entries if entry.name.endswith(".md"))

    def check_tree(self, folder: Path, skip: frozenset[str] = frozenset()) -> None:
        """Raise for the first link under `folder` (itself included) that leads outside the root.

        Links are never followed; hidden folders and top-level entries named in `skip` are not
        entered (the caller checks those on its own)."""
        self.check(folder)
        if not os.path.isdir(folder) or os.path.islink(folder):
            return
        pending = [(folder, skip)]
        while pending:
            current, skipped = pending.pop()
            with os.scandir(current) as scan:
                entries = sorted(scan, key=lambda entry: entry.name)
            for entry in entries:
                if entry.name in skipped:
                    continue
                path = current / entry.name
                if entry.is_symlink():
                    if not self._inside(path):
                        raise _escaping_link(path)
                elif entry.is_dir(follow_symlinks=False) and not entry.name.startswith("."):
                    pending.append((path, frozenset()))


def _escaping_link(path: Path) -> BenchmarkError:
    return BenchmarkError(
        path,
        "is a symbolic link that leads outside the benchmark root; nothing it points to is read",
        fix="replace the link with a copy of its content inside the benchmark folder, or remove it",
    )


def leads_outside(root: Path, path: Path) -> bool:
    """`path` is a link under `root` that resolves outside it: pytest must not walk it (a folder link
    to /proc reaches the whole disk), it is a collection error instead."""
    if not path.is_symlink() or not path.is_relative_to(root):
        return False
    real, top = os.path.realpath(path), os.path.realpath(root)
    return real != top and not real.startswith(top.rstrip("/") + "/")
