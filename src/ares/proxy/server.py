"""``InterceptionProxy``: an OpenAI/Anthropic-compatible HTTP server whose every LLM call is a step.

A black-box agent (any program that calls an LLM over HTTP) is pointed at a session's base URL;
each call it makes becomes ``await client(request)`` on that session's ``LLMClient`` (in an
environment, the env's ``InterceptedLLMClient``: the call is the observation and the policy's
answer, rendered back in the agent's dialect, is the action). It listens on loopback by default;
``serve_socket`` additionally serves one session on a socket made inside a sandbox's network
namespace, without the session prefix, so a sandboxed agent can reach its own session and no other.
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
import socket
from collections.abc import Callable
from types import TracebackType
from typing import Any, Self

from aiohttp import web

from ares.llm.interceptor import LLMClient
from ares.proxy.capped_site import DEFAULT_MAX_CONNECTIONS, CappedSockSite
from ares.proxy.errors import ApiError, ProxyError
from ares.proxy.handlers import build_app
from ares.proxy.session import ProxySession

MiB = 1 << 20
_SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
_STOPPING = "the ARES proxy is stopping; this call was not answered"

log = logging.getLogger(__name__)


def _runner(app: web.Application, shutdown_timeout_s: float) -> web.AppRunner:
    return web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=shutdown_timeout_s)


class ServedSocket:
    """One session served on its own listening socket; ``close()`` stops serving and closes the socket."""

    def __init__(
        self, runner: web.AppRunner, session: ProxySession, on_close: Callable[[ServedSocket], None]
    ) -> None:
        self._runner = runner
        self._on_close = on_close
        self.session = session

    @property
    def addresses(self) -> list[Any]:
        """The socket's address(es), as ``socket.getsockname()`` gives them."""
        return list(self._runner.addresses)

    async def close(self) -> None:
        """Stop accepting, let answered calls finish, close the socket; idempotent."""
        self._on_close(self)
        await self._runner.cleanup()


class InterceptionProxy:
    """The HTTP server; ``start()`` it (or ``async with``), then ``open_session`` per episode.

    ``call_timeout_s`` bounds how long the policy may take over one call (``None``: no bound); the
    caller then gets HTTP 504. ``max_body_bytes`` bounds a request body (HTTP 413 beyond it).
    ``stop()`` fails pending calls with HTTP 503 and returns once every handler has answered (at
    most ``shutdown_timeout_s`` for callers still sending their request).

    A session id is the only credential (loopback, ``secrets.token_urlsafe``); calls of one session
    are answered one at a time (see ``ProxySession``). Error answers carry ``x-should-retry: false``
    so the OpenAI/Anthropic SDKs do not replay a failed call to the policy.

    Routes on the main site (``{session}`` from ``open_session``)::

        POST /s/{session}/v1/chat/completions    OpenAI Chat Completions (and "stream": true)
        POST /s/{session}/v1/responses           OpenAI Responses
        POST /s/{session}/v1/messages            Anthropic Messages
        GET  /s/{session}/v1/models              the session's model, for agents that probe it
        GET  /health                             {"ok", "sessions", "calls_in_flight"}
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        call_timeout_s: float | None = 600.0,
        max_body_bytes: int = 32 * MiB,
        shutdown_timeout_s: float = 5.0,
    ) -> None:
        if call_timeout_s is not None and not call_timeout_s > 0:
            raise ProxyError(f"call_timeout_s must be > 0 seconds or None (no limit), got {call_timeout_s}")
        if max_body_bytes <= 0 or shutdown_timeout_s < 0:
            raise ProxyError("max_body_bytes must be > 0 and shutdown_timeout_s >= 0")
        self._host = host
        self._port = port
        self._call_timeout_s = call_timeout_s
        self._max_body_bytes = max_body_bytes
        self._shutdown_timeout_s = shutdown_timeout_s
        self._sessions: dict[str, ProxySession] = {}
        self._served: set[ServedSocket] = set()
        self._runner: web.AppRunner | None = None
        self._url: str | None = None
        self._stopped = False

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Start listening; the port (when 0, a free one) is then in ``url``."""
        if self._runner is not None or self._stopped:
            raise ProxyError("this InterceptionProxy was already started; make a new one")
        app = build_app(
            self._lookup, prefix="/s/{session}", max_body_bytes=self._max_body_bytes, health=self.health
        )
        runner = _runner(app, self._shutdown_timeout_s)
        await runner.setup()
        try:
            await web.TCPSite(runner, self._host, self._port).start()
        except OSError as e:
            await runner.cleanup()
            raise ProxyError(f"the ARES proxy cannot listen on {self._host}:{self._port}: {e}") from e
        self._runner = runner
        port = runner.addresses[0][1]
        self._url = f"http://{f'[{self._host}]' if ':' in self._host else self._host}:{port}"

    async def stop(self) -> None:
        """Fail pending calls (HTTP 503), close every session and socket, stop listening; idempotent."""
        self._stopped = True
        for session in list(self._sessions.values()):
            session.close(_STOPPING)
        runners = [s.close() for s in list(self._served)]
        if self._runner is not None:
            runners.append(self._runner.cleanup())
        await asyncio.gather(*runners)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    @property
    def url(self) -> str:
        """``http://host:port`` of the main site, once started."""
        if self._url is None:
            raise ProxyError("the proxy has no URL yet: await proxy.start() first")
        return self._url

    # --- sessions -----------------------------------------------------------------------------

    def open_session(
        self, client: LLMClient, *, session_id: str | None = None, model: str | None = None
    ) -> ProxySession:
        """A new session whose calls go to ``client``; its id is random and unguessable unless given.

        ``model`` is what ``GET /v1/models`` lists (by default, the model the agent last asked for).
        """
        if self._stopped:
            raise ProxyError("the proxy is stopped; sessions cannot be opened on it")
        if session_id is None:
            session_id = secrets.token_urlsafe(16)
        elif not _SESSION_ID.fullmatch(session_id):
            raise ProxyError(f"session_id must be 1-128 characters of A-Z a-z 0-9 _ -, got {session_id!r}")
        if session_id in self._sessions:
            raise ProxyError(f"a session {session_id!r} is already open on this proxy")
        session = ProxySession(
            session_id,
            client,
            base_url=lambda: self.url,
            call_timeout_s=self._call_timeout_s,
            model=model,
            on_close=self._forget,
        )
        self._sessions[session_id] = session
        return session

    def session(self, session_id: str) -> ProxySession | None:
        """The open session with this id, if any."""
        return self._sessions.get(session_id)

    @property
    def sessions(self) -> tuple[ProxySession, ...]:
        """The open sessions."""
        return tuple(self._sessions.values())

    def health(self) -> dict[str, Any]:
        """What ``GET /health`` answers."""
        in_flight = sum(s.calls_in_flight for s in self._sessions.values())
        return {"ok": not self._stopped, "sessions": len(self._sessions), "calls_in_flight": in_flight}

    def _forget(self, session: ProxySession) -> None:
        if self._sessions.get(session.id) is session:
            del self._sessions[session.id]

    def _lookup(self, http: web.Request) -> ProxySession:
        session_id = http.match_info["session"]
        session = self._sessions.get(session_id)
        if session is None:
            message = f"no open session {session_id!r} on this ARES proxy (unknown, or already closed)"
            raise ApiError(400, message, "unknown_session")
        return session

    # --- a session's own socket ---------------------------------------------------------------

    async def serve_socket(
        self, sock: socket.socket, session: ProxySession, *, max_connections: int = DEFAULT_MAX_CONNECTIONS
    ) -> ServedSocket:
        """Serve ``session`` alone on ``sock``, a listening TCP socket the handle then owns.

        Routes there have no session prefix (``/v1/chat/completions``, ``/v1/responses``,
        ``/v1/messages``, ``/v1/models``, ``/health``) and no other session is reachable through it.
        At most ``max_connections`` connections are held open at once (each is a host fd; see
        ``capped_site``); connections beyond that are closed as soon as they are accepted.
        """
        if self._stopped or self._runner is None:
            raise ProxyError("serve_socket needs a started, not stopped, proxy")
        if self._sessions.get(session.id) is not session:
            raise ProxyError(f"session {session.id!r} is not open on this proxy")
        if sock.type != socket.SOCK_STREAM or not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
            raise ProxyError("serve_socket needs a listening TCP socket (socket.listen() was not called?)")

        def health() -> dict[str, Any]:
            return {
                "ok": not session.closed,
                "sessions": int(not session.closed),
                "calls_in_flight": session.calls_in_flight,
            }

        app = build_app(lambda _: session, prefix="", max_body_bytes=self._max_body_bytes, health=health)
        runner = _runner(app, self._shutdown_timeout_s)
        await runner.setup()
        await CappedSockSite(runner, sock, max_connections=max_connections).start()
        served = ServedSocket(runner, session, self._served.discard)
        self._served.add(served)
        return served
