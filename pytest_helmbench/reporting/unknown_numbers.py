"""The report's "Numbers to verify": every phone number a reply gave that resources.yml holds in no
entry (resource_check's *unknown* outcome). Not a failure — the file cannot list every real service —
but each is listed here, with how often and where it was given, for someone to check against the
service's own site and then add to resources.yml (as a listed service, or `defunct: true`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from html import escape

from ..codes import code_sort_key
from ..storage.queries import StoredReply


@dataclass
class UnknownNumber:
    """One number as replies wrote it, and where they did."""

    number: str
    replies: int = 0
    models: set[str] = field(default_factory=set)
    locales: set[str] = field(default_factory=set)
    cases: list[str] = field(default_factory=list)


def unknown_numbers(replies: Iterable[StoredReply]) -> list[UnknownNumber]:
    """Every unknown number of these replies' resource checks, most given first."""
    found: dict[str, UnknownNumber] = {}
    for reply in replies:
        for check in reply.checks:
            for number in check.get("unknown") or () if isinstance(check, dict) else ():
                entry = found.setdefault(str(number), UnknownNumber(str(number)))
                entry.replies += 1
                entry.models.add(reply.model)
                entry.locales.add(str(check.get("locale") or "no locale"))
                if reply.case_code and reply.case_code not in entry.cases:
                    entry.cases.append(reply.case_code)
    return sorted(found.values(), key=lambda n: (-n.replies, n.number))


def unknown_numbers_section(numbers: list[UnknownNumber] | None, shown: int = 50) -> str:
    """The section: one row per number (the `shown` most given), or a line that there are none."""
    if not numbers:
        body = "<p>No reply gave a number that resources.yml does not hold.</p>"
    else:
        rows = []
        for entry in numbers[:shown]:
            cases = sorted(entry.cases, key=code_sort_key)
            examples = ", ".join(cases[:3]) + (f" and {len(cases) - 3} more" if len(cases) > 3 else "")
            rows.append(
                f'<tr><td>{escape(entry.number)}</td><td class="num">{entry.replies}</td>'
                f"<td>{escape(', '.join(sorted(entry.models)))}</td>"
                f"<td>{escape(', '.join(sorted(entry.locales)))}</td><td>{escape(examples)}</td></tr>"
            )
        more = f"<p>and {len(numbers) - shown} more numbers.</p>" if len(numbers) > shown else ""
        body = (
            "<table><thead><tr><th>Number as written</th><th>Replies</th><th>Models</th><th>Locales</th>"
            f"<th>Cases</th></tr></thead><tbody>{''.join(rows)}</tbody></table>{more}"
        )
    return (
        '<section id="numbers-to-verify">\n<h2>Numbers to verify</h2>\n<p class="explain">Phone numbers '
        "the replies gave that resources.yml holds in no entry: not failures, but unchecked. Verify each "
        "against the service's own site, then add it to resources.yml (or mark it defunct).</p>\n"
        f"{body}\n</section>"
    )
