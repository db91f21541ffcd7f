"""Benchmark codes (`P1-B1-S1-C2-U1-PT3`): their shapes and their one numeric order.

Every stage names things by code, from the loader to the report, so the parsing and ordering of
codes live here, before the first stage, and every module sorts and splits codes the same way.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

#: How a case is sent (suite/prompt.py): the instructed JSON prompt, or deployed behind a system prompt.
#: Part of a case's identity in a run, with its code and repeat.
SEED, DEPLOYED = "seed", "deployed"
LAYOUTS = (SEED, DEPLOYED)
MIXED = "mixed"  # figures over Results of both layouts
#: How every figure names the layout it was measured in (a reader must never mistake one for the other).
LAYOUT_LABELS = {
    SEED: "instructed (the model is shown the categories)",
    DEPLOYED: "deployed",
    MIXED: "mixed: instructed and deployed",
}


def layout_label(layout: str) -> str:
    """`instructed (the model is shown the categories)`, `deployed`, or `mixed: …`."""
    return LAYOUT_LABELS.get(layout, layout)


def layouts_differ_line(layouts: dict[str, str]) -> str | None:
    """One line when the compared models' figures were measured in different layouts (model ->
    layout), else None: their figures answer different questions."""
    if len(set(layouts.values())) < 2:
        return None
    shown = "; ".join(f"{model}: {layout_label(layout)}" for model, layout in sorted(layouts.items()))
    return f"the models were measured in different layouts ({shown}): their figures are not comparable"


#: A scenario folder: `P<n>-B<n>-S<n>` (groups: pillar, behaviour and scenario numbers).
SCENARIO_DIR = re.compile(r"^P([1-9]\d*)-B([1-9]\d*)-S([1-9]\d*)$")
#: A scenario file inside its folder: `S<n>.md`.
SCENARIO_FILE = re.compile(r"^S([1-9]\d*)\.md$")
#: A behaviour's full code: `P<n>-B<n>`.
BEHAVIOUR_CODE = re.compile(r"^P[1-9]\d*-B[1-9]\d*$")

_NUMBER_OR_TEXT = re.compile(r"\d+|\D+")


@lru_cache(maxsize=65536)
def code_sort_key(code: str) -> tuple[Any, ...]:
    """Order codes numerically everywhere: C2 before C10, P1-B1-S2 before P1-B1-S10.

    The raw text is the last tie-break, so distinct strings never compare equal. Cached: collection
    and reports sort the same few thousand codes many times."""
    parts = tuple(
        (0, int(part), "") if part.isdigit() else (1, 0, part) for part in _NUMBER_OR_TEXT.findall(code)
    )
    return (parts, code)


def pillar_of(code: str) -> str:
    """`P1` of any code that starts with its pillar (`P1-B1`, `P1-B1-S1-C1-PT1`)."""
    return code.split("-", 1)[0]


def behaviour_of(code: str) -> str:
    """`P1-B1` of any code that starts with pillar and behaviour (`P1-B1-S1`, a case code)."""
    return "-".join(code.split("-", 2)[:2])


def last_segment(code: str) -> str:
    """The code's own segment without its parents: `S1` of `P1-B1-S1`, `B2` of `P1-B2`."""
    return code.rsplit("-", 1)[-1]


def code_list(codes: tuple[str, ...] | list[str], shown: int = 5, width: int | None = None) -> str:
    """`A, B, C, D, E and 67 more`: at most `shown` codes, and with a `width` only as many (one at
    least) as fit in that many characters with the count of the rest, so a list never runs past the
    terminal's edge (the report and the export list them all)."""
    count = min(shown, len(codes))
    while width is not None and count > 1 and len(_listed(codes, count)) > width:
        count -= 1
    return _listed(codes, count)


def _listed(codes: tuple[str, ...] | list[str], count: int) -> str:
    head = ", ".join(codes[:count])
    return head + (f" and {len(codes) - count} more" if len(codes) > count else "")
