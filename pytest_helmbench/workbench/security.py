"""Who is asking, and the headers every answer carries.

- Every request needs a token: the owner's (made at start-up, printed once, kept in memory as its
  sha256) or a rater's or adjudicator's (their link's, stored as its sha256). A link's `?token=` is
  moved into an HttpOnly, SameSite=Strict cookie and the browser is sent to the same page without it,
  so the token leaves the address bar and the history. Without a valid token: 401; with a token whose
  role may not see the page: 403.
- Every form carries a CSRF token, an HMAC of the bearer's token hash under a secret made at start-up;
  a POST without it (or with another's, or from another origin) is refused with 403.
- Every answer carries a strict Content-Security-Policy (no inline script or style, nothing from
  elsewhere, no framing), a same-origin referrer policy, nosniff and no-store; the Host header must
  be the address the server was started on (no DNS rebinding).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session

from .store import new_token, reviewer_for, token_hash

COOKIE = "helmbench_token"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; connect-src 'none'"
)
HEADERS = (
    (b"content-security-policy", CSP.encode()),
    (b"referrer-policy", b"same-origin"),  # no-referrer would make Chromium send `Origin: null`
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
)


@dataclass(frozen=True)
class Access:
    """The bearer of a valid token."""

    role: str  # owner | rater | adjudicator
    token_hash: str
    reviewer_id: int | None = None
    study_id: int | None = None
    name: str = "owner"


class Gate:
    """The tokens this server accepts and the CSRF secret of this start."""

    def __init__(self, engine: Engine, owner_token: str | None = None) -> None:
        self.engine = engine
        self.owner_token = owner_token or new_token()
        self._owner_hash = token_hash(self.owner_token)
        self._secret = secrets.token_bytes(32)

    def identify(self, token: str | None) -> Access | None:
        if not token or len(token) > 200:
            return None
        hashed = token_hash(token)
        if hmac.compare_digest(hashed, self._owner_hash):
            return Access("owner", hashed)
        with Session(self.engine) as session:
            reviewer = reviewer_for(session, token)
            if reviewer is None:
                return None
            return Access(reviewer.role, hashed, reviewer.id, reviewer.study_id, reviewer.name)

    def csrf(self, access: Access) -> str:
        return hmac.new(self._secret, access.token_hash.encode(), hashlib.sha256).hexdigest()

    def csrf_ok(self, access: Access, given: str | None) -> bool:
        return bool(given) and hmac.compare_digest(self.csrf(access), str(given))


class SecurityHeaders:
    """ASGI middleware: the headers above on every answer, and only the expected Host header."""

    def __init__(self, app: Any, hosts: set[str]) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = dict(scope.get("headers") or ()).get(b"host", b"").decode("latin-1").lower()
        if self.hosts and host not in self.hosts:
            await _plain(send, 421, b"unexpected Host header")
            return

        async def with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], *HEADERS]
            await send(message)

        await self.app(scope, receive, with_headers)


async def _plain(send: Any, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"text/plain; charset=utf-8"), *HEADERS]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def allowed_hosts(host: str, port: int) -> set[str]:
    """The Host headers a browser sends for this address (localhost too, for a loopback address)."""
    names = {host.lower()}
    if host in ("127.0.0.1", "::1", "localhost"):
        names |= {"127.0.0.1", "localhost", "[::1]"}
    if ":" in host and not host.startswith("["):
        names.add(f"[{host}]")
    return {f"{name}:{port}" for name in names} | ({*names} if port == 80 else set())
