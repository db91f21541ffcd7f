"""Item statistics (`helmbench items`, the report's Items section): how each check behaves as a
measuring item, the way a test author reads a question paper after a sitting.

An *item* is one atomic rubric check (`reply-criteria/asks_safety`) or, for a check without atomic
items (the label check, resource_check), the check as a whole. For each item and model:

- **pass rate**: the share of the model's scored replies on which the item was satisfied (an atomic
  item by the majority of its judges' answers against the item's `pass:`; `not_applicable` counts as
  the rubric says, `not_applicable: pass` or not), over the replies where the item got an answer;
- **not_applicable share**: the share of those replies answered `not_applicable`;
- **ceiling / floor**: every model satisfied it on every reply / on none (an item that separates no
  one; with one model, says only that it did not separate that model's replies);
- **discrimination** (two models or more): the item-rest correlation over every scored reply of every
  model — the Pearson correlation of the item (1 satisfied, 0 not) with the share of the reply's other
  items satisfied. Near 0 or below: the item does not go with the rest of the rubric (a question the
  judge reads oddly, or one that measures something else).

An atomic item's `pass:` and `not_applicable:` are read from the benchmark on disk (the run's stored
answers say only yes, no or not_applicable); an item no longer in its rubric gets no pass rate.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..codes import code_sort_key
from ..status import Status
from ..storage.queries import StoredReply
from ..suite.model import RubricCheck, Scenario

NA = "not_applicable"


@dataclass
class _Counts:
    answered: int = 0
    satisfied: int = 0
    not_applicable: int = 0


@dataclass(frozen=True)
class ItemRow:
    """One item's figures per model, and its discrimination across them."""

    scenario: str
    check: str
    item: str | None  # None: the check as a whole
    pass_rates: dict[str, float | None]
    na_shares: dict[str, float | None]
    answered: dict[str, int]
    discrimination: float | None = None

    @property
    def name(self) -> str:
        return f"{self.scenario}/{self.check}" + (f"/{self.item}" if self.item else "")

    def _rates(self) -> list[float]:
        return [rate for rate in self.pass_rates.values() if rate is not None]

    @property
    def ceiling(self) -> bool:
        rates = self._rates()
        return bool(rates) and all(rate == 1.0 for rate in rates)

    @property
    def floor(self) -> bool:
        rates = self._rates()
        return bool(rates) and all(rate == 0.0 for rate in rates)


@dataclass
class ItemStats:
    """Every item's row (scenario, check and item order) and the models they were read for."""

    models: list[str]
    rows: list[ItemRow] = field(default_factory=list)

    @property
    def ceilings(self) -> list[ItemRow]:
        return [row for row in self.rows if row.ceiling]

    @property
    def floors(self) -> list[ItemRow]:
        return [row for row in self.rows if row.floor]


def _majority(answers: Sequence[str]) -> str | None:
    """The answer most judges gave (a tie: none, the item is left unanswered for that reply)."""
    counts = Counter(answers).most_common()
    if not counts or (len(counts) > 1 and counts[0][1] == counts[1][1]):
        return None
    return counts[0][0]


def reply_items(
    reply: StoredReply, polarity: Mapping[tuple[str, str, str], RubricCheck]
) -> dict[tuple[str, str, str | None], tuple[bool | None, bool]]:
    """Each item of one reply: (satisfied, or None when its polarity is unknown; answered n/a)."""
    found: dict[tuple[str, str, str | None], tuple[bool | None, bool]] = {}
    for check in reply.checks:
        name, status = str(check.get("name")), check.get("status")
        judges = [j for j in check.get("judges") or () if isinstance(j, Mapping) and j.get("error") is None]
        answers = [j["answers"] for j in judges if isinstance(j.get("answers"), Mapping)]
        if not answers:
            if status in (Status.PASSED, Status.FAILED):
                found[(reply.scenario, name, None)] = (status == Status.PASSED, False)
            continue
        for item in sorted({str(k) for a in answers for k in a}):
            answer = _majority([str(a[item]) for a in answers if item in a])
            if answer is None:
                continue
            known = polarity.get((reply.scenario, name, item))
            found[(reply.scenario, name, item)] = (
                None if known is None else known.satisfied(answer),
                answer == NA,
            )
    return found


def item_stats(
    replies: Iterable[StoredReply], polarity: Mapping[tuple[str, str, str], RubricCheck]
) -> ItemStats:
    """The figures of every item over these replies (module docstring)."""
    counts: dict[tuple[str, str, str | None], dict[str, _Counts]] = defaultdict(lambda: defaultdict(_Counts))
    per_reply: list[dict[tuple[str, str, str | None], bool]] = []
    models: set[str] = set()
    for reply in replies:
        models.add(reply.model)
        items = reply_items(reply, polarity)
        for key, (satisfied, not_applicable) in items.items():
            tally = counts[key][reply.model]
            tally.answered += 1
            tally.satisfied += bool(satisfied)
            tally.not_applicable += not_applicable
        per_reply.append({key: value for key, (value, _) in items.items() if value is not None})
    ordered = sorted(models, key=code_sort_key)
    discrimination = _item_rest(per_reply) if len(ordered) >= 2 else {}
    rows = []
    for key in sorted(counts, key=lambda k: (code_sort_key(k[0]), k[1], k[2] or "")):
        by_model = counts[key]
        known = key[2] is None or key in polarity
        rows.append(
            ItemRow(
                *key,
                pass_rates={
                    m: (
                        by_model[m].satisfied / by_model[m].answered
                        if known and by_model[m].answered
                        else None
                    )
                    for m in ordered
                },
                na_shares={
                    m: by_model[m].not_applicable / by_model[m].answered if by_model[m].answered else None
                    for m in ordered
                },
                answered={m: by_model[m].answered for m in ordered},
                discrimination=discrimination.get(key),
            )
        )
    return ItemStats(ordered, rows)


def _item_rest(
    replies: list[dict[tuple[str, str, str | None], bool]],
) -> dict[tuple[str, str, str | None], float]:
    """Each item's correlation with the share of the reply's other items satisfied (None-free)."""
    pairs: dict[tuple[str, str, str | None], list[tuple[float, float]]] = defaultdict(list)
    for items in replies:
        if len(items) < 2:
            continue
        total = sum(items.values())
        for key, satisfied in items.items():
            rest = (total - satisfied) / (len(items) - 1)
            pairs[key].append((float(satisfied), rest))
    found = {}
    for key, values in pairs.items():
        r = _pearson(values)
        if r is not None:
            found[key] = r
    return found


def _pearson(values: Sequence[tuple[float, float]]) -> float | None:
    n = len(values)
    if n < 3:
        return None
    mx = sum(x for x, _ in values) / n
    my = sum(y for _, y in values) / n
    sxy = sum((x - mx) * (y - my) for x, y in values)
    sxx = sum((x - mx) ** 2 for x, _ in values)
    syy = sum((y - my) ** 2 for _, y in values)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.0f}%"


def item_lines(stats: ItemStats) -> list[str]:
    """The text table `helmbench items` prints: one line per item, then the ceiling and floor counts."""
    head = ["item", *(f"{m} pass (n/a)" for m in stats.models)]
    if len(stats.models) >= 2:
        head.append("discrimination")
    lines = ["\t".join(head)]
    for row in stats.rows:
        cells = [row.name]
        cells += [f"{_pct(row.pass_rates[m])} ({_pct(row.na_shares[m])})" for m in stats.models]
        if len(stats.models) >= 2:
            cells.append("–" if row.discrimination is None else f"{row.discrimination:+.2f}")
        flag = " ceiling" if row.ceiling else " floor" if row.floor else ""
        lines.append("\t".join(cells) + flag)
    lines.append(
        f"{len(stats.rows)} items; {len(stats.ceilings)} at the ceiling (every model passed every reply), "
        f"{len(stats.floors)} at the floor (every model failed every reply)"
    )
    return lines


def rubric_items(scenarios: Iterable[Scenario]) -> dict[tuple[str, str, str], RubricCheck]:
    """Each atomic item of these scenarios' checks, by (scenario, check name, item id): how it passes."""
    return {
        (scenario.code, check.name, item.id): item
        for scenario in scenarios
        for check in scenario.checks
        if check.criteria is not None and check.criteria.atomic
        for item in check.criteria.checks
    }


def items_section(stats: ItemStats | None, shown: int = 15) -> str:
    """The report's Items section: the counts, the items at the ceiling and the floor, and the least
    discriminating items (`helmbench items` lists every one)."""
    from html import escape

    if stats is None or not stats.rows:
        body = "<p>No item statistics: no scored result, or the benchmark's rubrics could not be read.</p>"
    else:
        parts = [
            f"<p>{len(stats.rows)} items over {len(stats.models)} model(s): {len(stats.ceilings)} at the "
            f"ceiling (every model passed every reply), {len(stats.floors)} at the floor (every model "
            "failed every reply). <code>helmbench items</code> lists every item with each model's pass "
            "rate and not_applicable share.</p>"
        ]
        for title, rows in (("At the ceiling", stats.ceilings), ("At the floor", stats.floors)):
            if rows:
                names = ", ".join(escape(row.name) for row in rows[:shown])
                more = f" and {len(rows) - shown} more" if len(rows) > shown else ""
                parts.append(
                    f"<details><summary>{title} ({len(rows)})</summary><p>{names}{more}</p></details>"
                )
        weakest = sorted(
            (r for r in stats.rows if r.discrimination is not None), key=lambda r: r.discrimination
        )
        if weakest:
            items = "".join(f"<li>{escape(r.name)}: {r.discrimination:+.2f}</li>" for r in weakest[:shown])
            parts.append(f"<h3>Least discriminating items (item-rest correlation)</h3><ol>{items}</ol>")
        body = "\n".join(parts)
    return (
        '<section id="items">\n<h2>Items</h2>\n<p class="explain">How each check behaves as a measuring '
        "item: an item every model passes or fails separates no one; one whose correlation with the rest "
        "of its reply's items is near zero or below measures something else, or is read oddly by the "
        "judge.</p>\n"
        f"{body}\n</section>"
    )
