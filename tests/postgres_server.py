"""A throwaway PostgreSQL server for the test session: Debian's server binaries, a temp folder, a free port.

Real PostgreSQL, not an imitation: the storage tests that run against it prove what a team's shared
database will do. The server runs as the `postgres` user when the tests run as root (PostgreSQL refuses
to run as root), listens on 127.0.0.1 only, trusts local connections and is stopped at session end.
Each test gets a database of its own (`PostgresServer.new_database`).
"""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

INSTALL_HINT = (
    "the PostgreSQL server binaries (initdb, pg_ctl) are needed for the storage tests against PostgreSQL: "
    "install them with `apt-get update && apt-get install -y postgresql` (python3 dev.py test does this), "
    "or point $HELMBENCH_PG_BINDIR at their folder"
)


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server binaries on this machine, or the server would not start."""


def find_bindir() -> Path:
    """$HELMBENCH_PG_BINDIR, then `pg_config --bindir`, then Debian's /usr/lib/postgresql/<version>/bin."""
    candidates = [os.environ.get("HELMBENCH_PG_BINDIR", "")]
    if shutil.which("pg_config"):
        done = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=False)
        candidates.append(done.stdout.strip())
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for folder in candidates:
        if folder and (Path(folder) / "initdb").is_file() and (Path(folder) / "pg_ctl").is_file():
            return Path(folder)
    raise PostgresUnavailable(INSTALL_HINT)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class PostgresServer:
    """One running server; `url(db)` is a SQLAlchemy URL for psycopg 3."""

    folder: Path
    port: int = field(default_factory=free_port)
    bindir: Path = field(default_factory=find_bindir)
    _names: itertools.count = field(default_factory=lambda: itertools.count(1))
    durable: bool = False  # the tests turn fsync off; bench/fleet.py keeps PostgreSQL's default (on)

    @property
    def _as_root(self) -> bool:
        return os.geteuid() == 0

    def _run(self, *command: str) -> subprocess.CompletedProcess[str]:
        argv = [str(self.bindir / command[0]), *command[1:]]
        if self._as_root:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)
        if done.returncode != 0:
            raise PostgresUnavailable(f"{command[0]} failed ({done.returncode}): {done.stderr.strip()}")
        return done

    def start(self) -> PostgresServer:
        self.folder.mkdir(parents=True, exist_ok=True)
        if self._as_root:
            shutil.chown(self.folder, "postgres", "postgres")
        data = self.folder / "data"
        self._run("initdb", "-D", str(data), "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8")
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1"
        if not self.durable:
            options += " -c fsync=off"
        self._run(
            "pg_ctl", "-D", str(data), "-o", options, "-l", str(self.folder / "server.log"), "-w", "start"
        )
        return self

    def stop(self) -> None:
        if (self.folder / "data" / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.folder / "data"), "-m", "immediate", "-w", "stop")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def new_database(self, prefix: str = "helmbench") -> str:
        """Create an empty database and return its URL."""
        import psycopg

        name = f"{prefix}_{os.getpid()}_{next(self._names)}"
        deadline = time.monotonic() + 30
        while True:
            try:
                with psycopg.connect(
                    f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"
                ) as conn:
                    conn.autocommit = True
                    conn.execute(f'CREATE DATABASE "{name}"')
                return self.url(name)
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
