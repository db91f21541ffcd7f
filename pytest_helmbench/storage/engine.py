"""Open a results database and keep its schema at this version's revision (SQLite or PostgreSQL).

Several processes may open one database at once (two `pytest -n 2` sessions, a `helmbench` command):
creating or migrating the schema is serialised by a lock (a lock file beside a SQLite database,
`pg_advisory_lock` on PostgreSQL), and a database this version cannot use is a one-line StorageError
naming the fix, never a traceback.
"""

from __future__ import annotations

import hashlib
import logging
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Column, MetaData, PrimaryKeyConstraint, String, Table, event, insert, inspect, text
from sqlalchemy import select as core_select
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import NoSuchModuleError, SQLAlchemyError
from sqlmodel import SQLModel, create_engine

from ..errors import HelmbenchError
from ..redaction import redact
from . import pgtext, tables  # noqa: F401  (tables registers the tables on SQLModel.metadata)

if TYPE_CHECKING:
    from alembic.config import Config

log = logging.getLogger(__name__)

# Every migration in migrations/versions, oldest first (a test keeps the two equal). A database stamped
# with the last one needs no migration, so a run opens it without importing Alembic; one stamped with
# a revision not listed here was made by a newer HELMBench.
REVISIONS = ("0001", "0002", "0003", "0004", "0005", "0006", "0007", "0008", "0009", "0010", "0011")
SCHEMA_HEAD = REVISIONS[-1]
# How long to wait for another process creating or migrating the same database.
SCHEMA_LOCK_SECONDS = 300.0
# pg_advisory_lock's key for "the HELMBench schema of this database" (any constant bigint).
_PG_LOCK_KEY = 0x48454C4D  # "HELM"


class StorageError(HelmbenchError):
    """The database cannot be opened, migrated or written."""


class SchemaState(Enum):
    """Where a database stands against this version's schema."""

    CURRENT = "current"  # stamped with SCHEMA_HEAD
    EMPTY = "empty"  # no HELMBench table
    BEHIND = "behind"  # stamped with an older revision: migrate it
    NEWER = "newer"  # stamped with a revision this version does not know
    UNSTAMPED = "unstamped"  # HELMBench tables without a revision row


@dataclass(frozen=True)
class Schema:
    state: SchemaState
    revision: str | None  # the stamped revision, if any


# Alembic's own version table, as `alembic stamp` creates it.
_ALEMBIC_VERSION = Table(
    "alembic_version",
    MetaData(),
    Column("version_num", String(32), nullable=False),
    PrimaryKeyConstraint("version_num", name="alembic_version_pkc"),
)


def safe_url(db_url: str) -> str:
    """The URL with its password (and any secret-looking query parameter) hidden, for messages."""
    try:
        return redact(make_url(db_url).render_as_string(hide_password=True))
    except Exception:
        return "<invalid URL>"


def describe_error(exc: BaseException) -> str:
    """One line for a driver or Alembic exception (their messages may run over several lines)."""
    first = str(exc.args[0]) if exc.args else str(exc)
    return f"{exc.__class__.__name__}: {first.strip().splitlines()[0] if first.strip() else ''}"


def sqlite_file(url: URL) -> Path | None:
    """The file of a SQLite URL (None for another database)."""
    if url.get_backend_name() != "sqlite" or not url.database:
        return None
    return Path(url.database).expanduser()


def parse_url(db_url: str) -> URL:
    """The URL, refusing what cannot keep results: an invalid URL, an in-memory SQLite database."""
    try:
        url = make_url(db_url)
    except Exception as exc:  # sqlalchemy raises ArgumentError and friends
        raise StorageError(f"--helmbench-db: {db_url!r} is not a valid SQLAlchemy URL ({exc})") from None
    in_memory = url.database in (None, "", ":memory:") or url.query.get("mode") == "memory"
    if url.get_backend_name() == "sqlite" and in_memory:
        raise StorageError(
            f"--helmbench-db: {db_url!r} is an in-memory SQLite database, which keeps nothing once the "
            "session ends: give a file, e.g. sqlite:///helmbench.db"
        )
    return url


def _sqlite_pragmas(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        # WAL + NORMAL: a commit survives a killed process (only an OS crash may lose the last ones)
        # and costs no fsync per Result, which was most of the per-case overhead.
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()


def make_engine(db_url: str) -> Engine:
    """An engine for the URL; a SQLite file's folder is created, WAL and a busy timeout set."""
    url = parse_url(db_url)
    path = sqlite_file(url)
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(
                f"cannot create the folder {path.parent} for the database {safe_url(db_url)}: {exc.strerror}"
            ) from None
    postgresql = url.get_backend_name() == "postgresql"
    options: dict[str, Any] = {"json_serializer": pgtext.dumps} if postgresql else {}
    try:
        engine = create_engine(url, connect_args={"timeout": 30} if path is not None else {}, **options)
    except NoSuchModuleError:
        raise StorageError(
            f"--helmbench-db: {safe_url(db_url)} names no database SQLAlchemy knows "
            f"({url.drivername}): use sqlite:///path/to/file.db or postgresql+psycopg://user@host/db"
        ) from None
    except ImportError as exc:
        raise StorageError(
            f"cannot open {safe_url(db_url)}: its database driver is not installed ({exc.name or exc}); "
            "pip install it"
        ) from None
    if path is not None:
        _sqlite_pragmas(engine)
    if postgresql:
        pgtext.store_nul_as_replacement(engine)
    return engine


def migrations_dir() -> Path:
    """The Alembic scripts: inside the installed package, or the checkout's top-level migrations/."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "migrations", package.parent / "migrations"):
        if (candidate / "env.py").is_file():
            return candidate
    raise StorageError(
        "the Alembic migrations are missing from this installation (reinstall pytest-helmbench)"
    )


def alembic_config(db_url: str) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.set_main_option("sqlalchemy.url", db_url.replace("%", "%%"))
    return config


def schema_state(connection: Connection) -> Schema:
    """Where the database stands; tables of other applications in it are ignored."""
    found = set(inspect(connection).get_table_names())
    revisions: list[str] = []
    if _ALEMBIC_VERSION.name in found:
        revisions = list(connection.execute(core_select(_ALEMBIC_VERSION.c.version_num)).scalars())
    if not revisions:
        ours = found & set(SQLModel.metadata.tables)
        return Schema(SchemaState.UNSTAMPED if ours else SchemaState.EMPTY, None)
    if revisions == [SCHEMA_HEAD]:
        return Schema(SchemaState.CURRENT, SCHEMA_HEAD)
    unknown = [r for r in revisions if r not in REVISIONS]
    if unknown:
        return Schema(SchemaState.NEWER, ", ".join(unknown))
    return Schema(SchemaState.BEHIND, ", ".join(revisions))


def has_counter_triggers(engine: Engine) -> bool:
    """True when the database keeps the run counters itself (SQLite, built or migrated here)."""
    if engine.dialect.name != "sqlite":
        return False
    with engine.connect() as connection:
        names = set(
            connection.exec_driver_sql("select name from sqlite_master where type = 'trigger'").scalars()
        )
    return set(tables.RUN_COUNTER_TRIGGERS) <= names


def check_usable(schema: Schema, db_url: str) -> None:
    """A one-line error naming the fix for a database this version cannot use as it is."""
    if schema.state is SchemaState.NEWER:
        raise StorageError(
            f"the database {safe_url(db_url)} is at schema revision {schema.revision}, newer than this "
            f"HELMBench knows (its newest is {SCHEMA_HEAD}): upgrade HELMBench "
            "(pip install -U pytest-helmbench), or use another database"
        )
    if schema.state is SchemaState.UNSTAMPED:
        raise StorageError(
            f"the database {safe_url(db_url)} has HELMBench tables but no schema revision: if this HELMBench "
            f"made them, run `helmbench db stamp --db {safe_url(db_url)}`; else use another database"
        )


def read_schema(engine: Engine) -> Schema:
    with engine.connect() as connection:
        return schema_state(connection)


def schema_lock_file(database: Path) -> Path:
    """The lock file of a SQLite database's schema: in the temporary folder, named by a hash of the
    database's resolved path (every process on the machine finds the same one), so that no
    `helmbench.db.lock` is left in the project."""
    digest = hashlib.sha256(str(database.resolve()).encode("utf-8")).hexdigest()[:20]
    return Path(tempfile.gettempdir()) / f"helmbench-schema-{digest}.lock"


@contextmanager
def schema_lock(engine: Engine) -> Iterator[None]:
    """Held while the schema is created or migrated: one process at a time per database."""
    path = sqlite_file(engine.url)
    if path is not None:
        from filelock import FileLock, Timeout

        lock = schema_lock_file(path)
        try:
            with FileLock(str(lock), timeout=SCHEMA_LOCK_SECONDS):
                yield
        except Timeout:
            raise StorageError(
                f"another process has held {lock} for {SCHEMA_LOCK_SECONDS:.0f} s while creating or "
                f"migrating {path}: wait for it, or remove the lock file if no HELMBench process is running"
            ) from None
    elif engine.dialect.name == "postgresql":
        with engine.connect() as connection:
            connection.execute(text("select pg_advisory_lock(:key)"), {"key": _PG_LOCK_KEY})
            connection.commit()
            try:
                yield
            finally:
                connection.execute(text("select pg_advisory_unlock(:key)"), {"key": _PG_LOCK_KEY})
                connection.commit()
    else:
        yield


def _begin_writing(connection: Connection) -> None:
    """SQLite: start the transaction now, holding the write lock. pysqlite would let each CREATE TABLE
    commit on its own, and a process stopped midway would leave half a schema behind."""
    if connection.dialect.name == "sqlite":
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def _create(connection: Connection) -> None:
    """A new database's tables, from the models, stamped with the head revision."""
    SQLModel.metadata.create_all(connection)
    _ALEMBIC_VERSION.create(connection, checkfirst=True)
    connection.execute(insert(_ALEMBIC_VERSION).values(version_num=SCHEMA_HEAD))


def _migrate(db_url: str) -> None:
    from alembic import command

    try:
        command.upgrade(alembic_config(db_url), "head")
    except (SQLAlchemyError, ImportError):
        raise
    except Exception as exc:  # Alembic's CommandError and what a migration script raises
        raise StorageError(f"cannot migrate the database {safe_url(db_url)}: {describe_error(exc)}") from None


def upgrade(db_url: str) -> None:
    """Bring the database to SCHEMA_HEAD (idempotent; safe with other processes doing the same).

    One already there needs nothing (no lock, no Alembic). A new, empty one gets its tables from the
    models and is stamped with the head revision, as Alembic recommends for a new database (a test
    proves the result equals the migrated schema); an older one is migrated. Both under the schema
    lock, looking again once it is held: another process may have done it meanwhile."""
    engine = make_engine(db_url)
    try:
        if read_schema(engine).state is SchemaState.CURRENT:
            return
        with schema_lock(engine):
            with engine.begin() as connection:
                _begin_writing(connection)
                schema = schema_state(connection)
                check_usable(schema, db_url)
                if schema.state is SchemaState.EMPTY:
                    _create(connection)
            if schema.state is SchemaState.BEHIND:
                log.info(
                    "migrating %s from revision %s to %s", safe_url(db_url), schema.revision, SCHEMA_HEAD
                )
                _migrate(db_url)
    except (SQLAlchemyError, ImportError) as exc:  # ImportError: the URL's database driver is not installed
        raise StorageError(f"cannot migrate the database {safe_url(db_url)}: {describe_error(exc)}") from None
    finally:
        engine.dispose()


def open_existing(db_url: str) -> Engine:
    """An engine on a database that already holds HELMBench results (migrated if it is behind).

    Never creates one: a missing SQLite file or a database without HELMBench tables is an error,
    so a typo in a URL leaves nothing behind."""
    path = sqlite_file(parse_url(db_url))
    if path is not None and not path.is_file():
        raise StorageError(f"no database at {path} (run the benchmark first, or give its URL)")
    engine = make_engine(db_url)
    try:
        schema = read_schema(engine)
        if schema.state is SchemaState.EMPTY:
            raise StorageError(f"the database {safe_url(db_url)} holds no HELMBench results (no tables)")
        if schema.state is not SchemaState.CURRENT:
            check_usable(schema, db_url)
            upgrade(db_url)
    except (SQLAlchemyError, ImportError) as exc:
        engine.dispose()
        raise StorageError(f"cannot open the database {safe_url(db_url)}: {describe_error(exc)}") from None
    except StorageError:
        engine.dispose()
        raise
    return engine


def schema_differences(connection: Connection) -> list[str]:
    """How the database's HELMBench tables differ from this version's models (other tables ignored)."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    found: list[str] = []
    for diff in compare_metadata(MigrationContext.configure(connection), SQLModel.metadata):
        for op in diff if isinstance(diff, list) else [diff]:
            kind = op[0]
            if kind == "remove_table":  # another application's table
                continue
            if kind.startswith("modify_"):
                found.append(f"{kind} {op[2]}.{op[3]}")
            elif kind in ("add_column", "remove_column"):
                found.append(f"{kind} {op[2]}.{op[3].name}")
            else:
                found.append(f"{kind} {getattr(op[1], 'name', op[1])}")
    return found


def stamp(db_url: str) -> str:
    """Record the head revision in a database whose HELMBench tables have none, once its tables are
    checked to be exactly this version's; returns what was done, for the command to print."""
    path = sqlite_file(parse_url(db_url))
    if path is not None and not path.is_file():
        raise StorageError(f"no database at {path}: nothing to stamp")
    engine = make_engine(db_url)
    where = safe_url(db_url)
    try:
        with schema_lock(engine), engine.begin() as connection:
            _begin_writing(connection)
            schema = schema_state(connection)
            if schema.state is SchemaState.CURRENT:
                return f"database {where} is already stamped with revision {SCHEMA_HEAD}"
            if schema.state is SchemaState.EMPTY:
                raise StorageError(
                    f"the database {where} has no HELMBench tables: nothing to stamp "
                    "(`helmbench db upgrade` creates them)"
                )
            if schema.state is SchemaState.BEHIND:
                raise StorageError(
                    f"the database {where} is already stamped with revision {schema.revision}: "
                    "`helmbench db upgrade` migrates it"
                )
            if schema.state is SchemaState.NEWER:
                check_usable(schema, db_url)
            differences = schema_differences(connection)
            if differences:
                shown = "; ".join(differences[:5]) + ("; …" if len(differences) > 5 else "")
                raise StorageError(
                    f"the tables of {where} are not those of revision {SCHEMA_HEAD} ({shown}): stamping "
                    "would hide that; use a new database, or the HELMBench version that made them"
                )
            _ALEMBIC_VERSION.create(connection, checkfirst=True)
            connection.execute(insert(_ALEMBIC_VERSION).values(version_num=SCHEMA_HEAD))
    except (SQLAlchemyError, ImportError) as exc:
        raise StorageError(f"cannot stamp the database {where}: {describe_error(exc)}") from None
    finally:
        engine.dispose()
    return f"database {where} stamped with revision {SCHEMA_HEAD}"
