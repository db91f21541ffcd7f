"""Human names for the codes stored runs used (pillar names, behaviour, condition and user-context
titles): the labels of a report, read from the latest stored content row of each code."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy.orm import aliased
from sqlmodel import Session, select

from ..codes import code_sort_key
from .tables import Behaviour, Condition, Pillar, Result, Scenario, UserContext


@dataclass(frozen=True)
class Labels:
    """Human names for codes (the latest stored content of each code), for report labels."""

    pillar_names: dict[str, str] = field(default_factory=dict)  # "P1" -> name
    behaviour_titles: dict[str, str] = field(default_factory=dict)  # "P1-B1" -> title
    condition_titles: dict[str, str] = field(default_factory=dict)  # "C1" -> title
    user_context_titles: dict[str, str] = field(default_factory=dict)  # "U1" -> title


def labels_for(session: Session, ids: Sequence[int]) -> Labels:
    """Names and titles of the codes these runs used (the latest content row of each code)."""
    if not ids:
        return Labels()
    uc = aliased(UserContext)
    used = (
        select(Result.scenario_id, Result.condition_id, Result.user_context_id)
        .where(Result.run_id.in_(list(ids)))
        .distinct()
        .subquery()
    )
    query = (
        select(
            Pillar.id,
            Pillar.code,
            Pillar.name,
            Behaviour.id,
            Behaviour.full_code,
            Behaviour.title,
            Condition.id,
            Condition.code,
            Condition.title,
            uc.id,
            uc.code,
            uc.title,
        )
        .select_from(used)
        .join(Scenario, Scenario.id == used.c.scenario_id)
        .join(Behaviour, Behaviour.id == Scenario.behaviour_id)
        .join(Pillar, Pillar.id == Behaviour.pillar_id)
        .join(Condition, Condition.id == used.c.condition_id)
        .outerjoin(uc, uc.id == used.c.user_context_id)
    )
    found: dict[str, dict[str, tuple[int, str]]] = {
        "pillar": {},
        "behaviour": {},
        "condition": {},
        "user_context": {},
    }

    def keep(kind: str, row_id: int | None, code: str | None, text: str | None) -> None:
        if row_id is None or code is None:
            return
        seen = found[kind].get(code)
        if seen is None or row_id > seen[0]:
            found[kind][code] = (row_id, text or "")

    for (
        p_id,
        p_code,
        p_name,
        b_id,
        b_code,
        b_title,
        c_id,
        c_code,
        c_title,
        u_id,
        u_code,
        u_title,
    ) in session.connection().execute(query):
        keep("pillar", p_id, p_code, p_name)
        keep("behaviour", b_id, b_code, b_title)
        keep("condition", c_id, c_code, c_title)
        keep("user_context", u_id, u_code, u_title)

    def ordered(kind: str) -> dict[str, str]:
        return {code: found[kind][code][1] for code in sorted(found[kind], key=code_sort_key)}

    return Labels(ordered("pillar"), ordered("behaviour"), ordered("condition"), ordered("user_context"))
