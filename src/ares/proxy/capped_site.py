"""A socket site that holds at most N connections open at once.

A session served on a sandbox's loopback (``InterceptionProxy.serve_socket``) is reachable by any
program in that sandbox. Each accepted connection is a file descriptor in the *host* process, so
without a cap a sandboxed program can make ARES hold thousands of them (measured: ~13,000 from one
sandbox, against a host limit of 20,000) and break every other episode in the process. An agent needs
a handful of connections; beyond the cap, new ones are accepted and closed at once, so they cost
nothing past the moment of their accept.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from aiohttp import web

#: Connections one served socket keeps open at once (an agent opens one or a few).
DEFAULT_MAX_CONNECTIONS = 64
#: The listen backlog, which is also how many connections asyncio accepts per wake-up: refused ones
#: hold their fd until the loop's next turn, so the host's peak is about the cap plus this.
BACKLOG = 16


class _Counted(asyncio.Protocol):
    """aiohttp's request handler, counted among the live connections while its transport is open."""

    __slots__ = ("_inner", "_live")

    def __init__(self, inner: asyncio.Protocol, live: set[asyncio.Protocol]) -> None:
        self._inner = inner
        self._live = live

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._live.add(self)
        self._inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self._live.discard(self)
        self._inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()


class _Refused(asyncio.Protocol):
    """A connection over the cap: closed (RST) as soon as it is accepted."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.abort()  # type: ignore[attr-defined]


class CappedSockSite(web.SockSite):
    """``web.SockSite`` with at most ``max_connections`` connections open at a time."""

    def __init__(
        self, runner: web.BaseRunner, sock: socket.socket, *, max_connections: int, **kw: Any
    ) -> None:
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, got {max_connections}")
        super().__init__(runner, sock, backlog=BACKLOG, **kw)
        self._max_connections = max_connections
        self.live: set[asyncio.Protocol] = set()

    async def start(self) -> None:
        await web.BaseSite.start(self)  # registers the site; SockSite.start would serve uncapped
        server = self._runner.server
        assert server is not None

        def protocol() -> asyncio.Protocol:
            if len(self.live) >= self._max_connections:
                return _Refused()
            return _Counted(server(), self.live)

        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(protocol, sock=self._sock, backlog=self._backlog)
