"""`helmbench serve`: the workbench on uvicorn, bound before the owner's link is printed.

The socket is bound here (port 0 picks a free one), so the link printed names the port really listened
on, and the server starts on that socket: nothing can take the port in between. On SQLite its
connections read the database through a memory map (map_sqlite_pages).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

from .security import Gate, allowed_hosts

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


def link(host: str, port: int, token: str, path: str = "/") -> str:
    """`http://HOST:PORT/?token=…` (an IPv6 address in brackets)."""
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{shown}:{port}{path}?token={token}"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


#: How much of a SQLite database the workbench's connections read through a memory map (address space,
#: not memory: pages are loaded as they are read, by the operating system's page cache).
MMAP_BYTES = 1 << 30


def map_sqlite_pages(engine: Engine) -> None:
    """On SQLite, let every connection of the server read pages through a memory map instead of a
    read call and a copy per page: a search over the replies walks each Result's overflow pages, and
    over 20,000 Results it took 0.22 s of reads against 0.09 s mapped. Pooled connections are closed
    so that the next ones are made with it. Nothing changes on another database."""
    if engine.dialect.name != "sqlite":
        return

    def mapped(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
        cursor.close()

    event.listen(engine, "connect", mapped)
    engine.dispose()


@dataclass(frozen=True)
class Started:
    host: str
    port: int
    owner_link: str


def serve(engine: Engine, host: str, port: int, source: str, say: Callable[[Started], None]) -> None:
    """Bind, tell `say` where (with the owner's link), and serve until interrupted."""
    import uvicorn

    from .app import build_app

    sock = bind(host, port)
    port = sock.getsockname()[1]
    map_sqlite_pages(engine)
    gate = Gate(engine)
    wildcard = host in ("0.0.0.0", "::")
    app = build_app(engine, gate, None if wildcard else allowed_hosts(host, port), source)
    say(Started(host, port, link(host, port, gate.owner_token)))
    config = uvicorn.Config(app, log_level="warning", access_log=False, server_header=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])
