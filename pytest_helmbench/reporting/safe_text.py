"""Text from outside made safe for where it is shown.

Replies, rationales, refusals, simulated users' turns and `models.yml` model ids are untrusted. A
terminal runs the escape sequences they may hold (OSC 52 writes the clipboard, CSI erases a line
or paints a fake green PASSED, a carriage return overwrites what was printed), and a spreadsheet
runs a CSV cell that starts with `=`, `+`, `-` or `@` as a formula (`=HYPERLINK(…)`). Line breaks
and tabs are kept; every other control character, and the bidirectional overrides that reorder
what a reader sees, become visible escapes (`\\x1b`, `\\u202e`).
"""

from __future__ import annotations

import re
from typing import Any

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def for_terminal(text: str) -> str:
    """`text` with its control characters (but line breaks and tabs) shown as escapes."""
    return _UNSAFE.sub(_escape, text)


def for_spreadsheet(value: Any) -> Any:
    """A CSV cell: text escaped as for the terminal and, when it would start a formula, prefixed
    with an apostrophe (the spreadsheet convention for "this is text"); numbers stay numbers."""
    if not isinstance(value, str):
        return value
    text = for_terminal(value)
    return f"'{text}" if text.startswith(_FORMULA_START) else text
