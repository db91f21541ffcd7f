"""The content rows a case was run with (benchmark, pillar, behaviour, scenario, condition, user context,
perturbation), upserted by code and content hash (outcome -> storage).

Each row is written with one atomic statement, INSERT … ON CONFLICT DO NOTHING, then read back if it
was there already: two sessions writing into one database at once (SQLite or PostgreSQL) never fail
on each other's rows and never add a duplicate. Ids are remembered, so a row is upserted once per
recorder.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import insert
from sqlalchemy import select as core_select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection
from sqlmodel import Session, SQLModel

from ..suite.model import content_hash
from .tables import (
    Behaviour,
    Benchmark,
    Condition,
    Perturbation,
    Pillar,
    Scenario,
    ScenarioConditionLink,
    ScenarioUserContextLink,
    UserContext,
)

# The dialects with INSERT … ON CONFLICT; another database gets a select, then an insert (one writer).
_INSERT_ON_CONFLICT = {"sqlite": sqlite_insert, "postgresql": postgresql_insert}

# Rows per multi-row statement: well under SQLite's 32,766 and PostgreSQL's 65,535 parameters.
_ROWS_PER_STATEMENT = 500

ContentIds = dict[str, int | None]  # benchmark, scenario, condition, user_context, perturbation
# Where the statements go: a Connection (cheaper per statement) or an ORM Session's transaction.
Database = Session | Connection


class ContentRows:
    """Upserts content rows and remembers their ids (the key includes the content hash)."""

    def __init__(self, dialect: str) -> None:
        self._insert = _INSERT_ON_CONFLICT.get(dialect)
        self._ids: dict[tuple[Any, ...], int] = {}
        self._scenarios: dict[tuple[Any, ...], tuple[int, int]] = {}  # (benchmark id, scenario id)
        self._components: dict[tuple[Any, ...], int] = {}  # (kind, scenario id, code, hash) -> row id

    def forget(self) -> None:
        """After a failed transaction: the ids remembered may name rows rolled back."""
        self._ids.clear()
        self._scenarios.clear()
        self._components.clear()

    def upsert(
        self, db: Database, table: type[SQLModel], match: dict[str, Any], values: dict[str, Any]
    ) -> int:
        """The id of the row matching `match` (a unique key of `table`), inserted with `values` if new."""
        key = (table.__name__, tuple(sorted(match.items())))
        if key not in self._ids:
            self._ids[key] = self._insert_or_read(db, table, match, values)
        return self._ids[key]

    def _insert_or_read(
        self, db: Database, table: type[SQLModel], match: dict[str, Any], values: dict[str, Any]
    ) -> int:
        # Core statements: loading and flushing ORM objects cost ~1 ms per content row, paid for
        # every component of the benchmark on a run's first cases.
        columns = table.__table__.c  # type: ignore[attr-defined]
        find = core_select(columns.id).where(*(columns[c] == v for c, v in match.items()))
        data = _row_data(table, match, values)
        if self._insert is not None:
            statement = self._insert(table.__table__).values(**data).on_conflict_do_nothing()
            row_id = db.execute(statement.returning(columns.id)).scalar()
            return row_id if row_id is not None else db.execute(find).scalar_one()
        row_id = db.execute(find).scalar()
        if row_id is None:
            row_id = db.execute(insert(table.__table__).values(**data)).inserted_primary_key[0]  # type: ignore[attr-defined]
        return row_id

    def _link(self, db: Database, table: type[SQLModel], **ids: int) -> None:
        key = (table.__name__, tuple(sorted(ids.items())))
        if key in self._ids:
            return
        if self._insert is not None:
            db.execute(self._insert(table.__table__).values(**ids).on_conflict_do_nothing())
        else:
            columns = table.__table__.c  # type: ignore[attr-defined]
            found = core_select(columns[next(iter(ids))]).where(*(columns[c] == v for c, v in ids.items()))
            if db.execute(found).first() is None:
                db.execute(insert(table.__table__).values(**ids))  # type: ignore[attr-defined]
        self._ids[key] = 1

    def prepare(self, db: Connection, provenances: Iterable[dict[str, Any]]) -> int | None:
        """The rows of many cases at once, before the first Result: perturbations and links by a
        few multi-row INSERT … ON CONFLICT DO NOTHING and one read back, where one statement per row
        (hundreds, on pytest's own thread during the run) cost more than the Results' own writes.
        Returns the benchmark's row id (None: no case, or a database without upserts)."""
        if self._insert is None:  # no upsert statement: resolved case by case (one writer)
            return None
        benchmark_id = None
        perturbations: dict[tuple[Any, ...], dict[str, Any]] = {}
        links: dict[type[SQLModel], set[tuple[tuple[str, int], ...]]] = {}
        for prov in provenances:
            key = _scenario_key(prov)
            if key not in self._scenarios:
                self._scenarios[key] = self._scenario_ids(db, prov)
            benchmark_id, scenario_id = self._scenarios[key]
            for kind, table, link, column in _LINKED:
                c = prov[kind]
                if c is None or (kind, scenario_id, c["code"], c["hash"]) in self._components:
                    continue
                match = {"code": c["code"], "content_hash": c["hash"]}
                row_id = self.upsert(db, table, match, _component_values(c))
                self._components[(kind, scenario_id, c["code"], c["hash"])] = row_id
                pair = tuple(sorted({"scenario_id": scenario_id, column: row_id}.items()))
                links.setdefault(link, set()).add(pair)
            c = prov["perturbation"]
            found = ("perturbation", scenario_id, c["code"], c["hash"])
            if found not in self._components and found not in perturbations:
                match = {"scenario_id": scenario_id, "code": c["code"], "content_hash": c["hash"]}
                values = {**_component_values(c), "full_code": f"{prov['scenario']['code']}-{c['code']}"}
                perturbations[found] = _row_data(Perturbation, match, {**values, "style": c["style"]})
        for link, pairs in links.items():
            self._insert_many(db, link, [dict(pair) for pair in sorted(pairs)])
            self._ids.update(((link.__name__, pair), 1) for pair in pairs)
        # In key order: shards preparing at once take the unique index's locks in one order.
        self._insert_many(db, Perturbation, [perturbations[key] for key in sorted(perturbations)])
        self._read_perturbations(db, set(perturbations))
        return benchmark_id

    def _insert_many(self, db: Connection, table: type[SQLModel], rows: list[dict[str, Any]]) -> None:
        assert self._insert is not None
        for start in range(0, len(rows), _ROWS_PER_STATEMENT):
            chunk = rows[start : start + _ROWS_PER_STATEMENT]
            db.execute(self._insert(table.__table__).values(chunk).on_conflict_do_nothing())  # type: ignore[attr-defined]

    def _read_perturbations(self, db: Connection, wanted: set[tuple[Any, ...]]) -> None:
        columns = Perturbation.__table__.c  # type: ignore[attr-defined]
        scenario_ids = sorted({key[1] for key in wanted})
        for start in range(0, len(scenario_ids), _ROWS_PER_STATEMENT):
            rows = db.execute(
                core_select(columns.id, columns.scenario_id, columns.code, columns.content_hash).where(
                    columns.scenario_id.in_(scenario_ids[start : start + _ROWS_PER_STATEMENT])
                )
            )
            for row_id, scenario_id, code, digest in rows:
                key = ("perturbation", scenario_id, code, digest)
                if key in wanted:
                    self._components[key] = row_id
                    match = {"scenario_id": scenario_id, "code": code, "content_hash": digest}
                    self._ids[("Perturbation", tuple(sorted(match.items())))] = row_id

    def known(self, prov: dict[str, Any]) -> ContentIds | None:
        """The ids of a case's rows if this recorder knows them all (no statement); else None."""
        return self._resolve(None, prov)

    def ids(self, db: Database, prov: dict[str, Any]) -> ContentIds:
        """The ids of a case's rows, upserting those new to this recorder."""
        found = self._resolve(db, prov)
        assert found is not None
        return found

    def _resolve(self, db: Database | None, prov: dict[str, Any]) -> ContentIds | None:
        key = _scenario_key(prov)
        if key not in self._scenarios:
            if db is None:
                return None
            self._scenarios[key] = self._scenario_ids(db, prov)
        benchmark_id, scenario_id = self._scenarios[key]
        ids: ContentIds = {"benchmark": benchmark_id, "scenario": scenario_id, "user_context": None}
        for kind in ("condition", "user_context", "perturbation"):
            c = prov[kind]
            if c is not None:
                key = (kind, scenario_id, c["code"], c["hash"])
                if key not in self._components:
                    if db is None:
                        return None
                    self._components[key] = self._component_id(
                        db, kind, c, scenario_id, prov["scenario"]["code"]
                    )
                ids[kind] = self._components[key]
        return ids

    def _component_id(
        self, db: Database, kind: str, c: dict[str, Any], scenario_id: int, scenario_code: str
    ) -> int:
        if kind == "perturbation":
            return self.upsert(
                db,
                Perturbation,
                {"scenario_id": scenario_id, "code": c["code"], "content_hash": c["hash"]},
                {**_component_values(c), "full_code": f"{scenario_code}-{c['code']}", "style": c["style"]},
            )
        table, link, column = (
            (Condition, ScenarioConditionLink, "condition_id")
            if kind == "condition"
            else (UserContext, ScenarioUserContextLink, "user_context_id")
        )
        row_id = self.upsert(db, table, {"code": c["code"], "content_hash": c["hash"]}, _component_values(c))
        self._link(db, link, scenario_id=scenario_id, **{column: row_id})
        return row_id

    def _scenario_ids(self, db: Database, prov: dict[str, Any]) -> tuple[int, int]:
        """Benchmark, pillar, behaviour and scenario rows of a case: (benchmark id, scenario id)."""
        b = prov["benchmark"]
        benchmark_id = self.upsert(
            db,
            Benchmark,
            {"version": b["version"], "content_hash": b["hash"]},
            {"description": b["description"]},
        )
        p = prov["pillar"]
        pillar_id = self.upsert(
            db,
            Pillar,
            {"benchmark_id": benchmark_id, "code": p["code"], "content_hash": content_hash(p)},
            {"name": p["name"], "description": p["description"]},
        )
        h = prov["behaviour"]
        behaviour_id = self.upsert(
            db,
            Behaviour,
            {"pillar_id": pillar_id, "full_code": h["code"], "content_hash": content_hash(h)},
            {
                "code": h["code"].split("-")[-1],
                "title": h["title"],
                "description": h["description"],
                "compliance_criteria": h["compliance"],
            },
        )
        s = prov["scenario"]
        scenario_id = self.upsert(
            db,
            Scenario,
            {"behaviour_id": behaviour_id, "full_code": s["code"], "content_hash": s["hash"]},
            {
                "code": s["code"].split("-")[-1],
                "title": s["title"],
                "content": s["content"],
                "category": s["category"],
                "response_schema": s["response_format"],
                "evaluation_config": s["evaluation"],
                "criteria": s["criteria"],
                "risk": s["risk"],
                "critical": s["critical"],
                "meta": s["meta"],
            },
        )
        return benchmark_id, scenario_id


# The components a scenario links to: (kind, table, link table, the link's column).
_LINKED = (
    ("condition", Condition, ScenarioConditionLink, "condition_id"),
    ("user_context", UserContext, ScenarioUserContextLink, "user_context_id"),
)


def _scenario_key(prov: dict[str, Any]) -> tuple[Any, ...]:
    """Identifies the benchmark, pillar, behaviour and scenario rows of a case (codes, hashes, texts)."""
    b, p, h, s = prov["benchmark"], prov["pillar"], prov["behaviour"], prov["scenario"]
    return (
        b["version"],
        b["hash"],
        p["code"],
        p["name"],
        p["description"],
        h["code"],
        h["title"],
        h["description"],
        h["compliance"],
        s["code"],
        s["hash"],
    )


def _row_data(table: type[SQLModel], match: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """A new row's columns but its id (the model applies its defaults and types)."""
    row = table(**match, **values)
    return {c.name: getattr(row, c.name) for c in table.__table__.columns if c.name != "id"}  # type: ignore[attr-defined]


def _component_values(c: dict[str, Any]) -> dict[str, Any]:
    return {"title": c["title"], "content": c["content"], "severity": c["severity"], "meta": c["meta"]}
