"""The HTTP connections of one chat endpoint (model call): a transport per calling thread.

Chat calls go straight to httpx's transports: httpx.Client's per-request layers (cookie jar, auth
and redirect flows, URL merging) cost as much CPU as the HTTP exchange itself, and an API call needs
none of them. Each calling thread has its own keep-alive connection: httpcore's shared pool scans
every connection under one lock for each request, which with 50 call threads cost more CPU (under
the GIL) than the exchange. The environment's proxy (HTTPS_PROXY, NO_PROXY …) is kept, except for
a free (local) endpoint.
"""

from __future__ import annotations

import threading

import httpx


class Transports:
    """One shared transport (the endpoint's other requests) and one per calling thread."""

    def __init__(self, proxy: str | None, *, trust_env: bool) -> None:
        self._proxy = proxy
        self._trust_env = trust_env
        # One TLS context for every transport (building one reads the CA bundle: ~40 ms of CPU).
        self._tls = httpx.create_ssl_context(trust_env=trust_env)
        self.shared = self._new(200)
        self._local = threading.local()
        self._per_thread: list[httpx.HTTPTransport] = []
        self._lock = threading.Lock()

    def _new(self, connections: int) -> httpx.HTTPTransport:
        return httpx.HTTPTransport(
            verify=self._tls,
            limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
            proxy=self._proxy,
            trust_env=self._trust_env,
        )

    def for_this_thread(self) -> httpx.HTTPTransport:
        """This thread's transport (a thread makes one call at a time: one connection kept alive)."""
        transport: httpx.HTTPTransport | None = getattr(self._local, "transport", None)
        if transport is None:
            transport = self._new(1)
            with self._lock:
                self._per_thread.append(transport)
            self._local.transport = transport
        return transport

    def close(self) -> None:
        """Close every thread's transport (the shared one is closed by the client that holds it)."""
        with self._lock:
            transports, self._per_thread = self._per_thread, []
        for transport in transports:
            transport.close()
