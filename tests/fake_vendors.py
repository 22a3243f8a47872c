"""A fake vendor API on loopback (aiohttp, in the test's own event loop) for the official SDKs.

One server answers the OpenAI Chat Completions (``/v1/chat/completions``), OpenAI Responses
(``/v1/responses``) and Anthropic Messages (``/v1/messages``) routes. Replies are served in script
order, then the route's canned body; every request is kept as the SDK sent it, headers included.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from aiohttp import web

CHAT_PATH = "/v1/chat/completions"
RESPONSES_PATH = "/v1/responses"
MESSAGES_PATH = "/v1/messages"
ROUTES = (CHAT_PATH, RESPONSES_PATH, MESSAGES_PATH)


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted answer; ``body=None`` serves the route's canned body, ``hang`` never answers."""

    status: int = 200
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    hang: bool = False


@dataclass(frozen=True, slots=True)
class Received:
    path: str
    headers: Mapping[str, str]
    body: Any


def error_body(path: str, status: int, message: str) -> dict[str, Any]:
    """An error body in the vendor's own shape."""
    if path == MESSAGES_PATH:
        kind = {400: "invalid_request_error", 429: "rate_limit_error"}.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": "server_error", "param": None, "code": None}}


class FakeVendors:
    """``async with FakeVendors(canned) as fake``: ``canned`` maps a route to its default 200 body."""

    def __init__(self, canned: Mapping[str, Any] | None = None) -> None:
        self.canned = dict(canned or {})
        self.script: deque[Reply] = deque()
        self.received: list[Received] = []
        self._closing = asyncio.Event()
        app = web.Application()
        for path in ROUTES:
            app.router.add_post(path, self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        self._port = 0

    @property
    def openai_url(self) -> str:
        """The base URL as the OpenAI SDK takes it (with ``/v1``)."""
        return f"http://127.0.0.1:{self._port}/v1"

    @property
    def anthropic_url(self) -> str:
        """The base URL as the Anthropic SDK takes it (it adds ``/v1/messages`` itself)."""
        return f"http://127.0.0.1:{self._port}"

    def then(self, *replies: Reply) -> None:
        self.script.extend(replies)

    async def __aenter__(self) -> Self:
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = self._runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._closing.set()  # hanging handlers return, so shutdown does not wait for them
        await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.Response:
        body = json.loads(await request.read())
        self.received.append(Received(request.path, {k.lower(): v for k, v in request.headers.items()}, body))
        reply = self.script.popleft() if self.script else Reply()
        if reply.hang:
            await self._closing.wait()
            return web.Response(status=499)
        payload = self.canned.get(request.path) if reply.body is None else reply.body
        if payload is None:
            reply, payload = Reply(404), error_body(request.path, 404, f"no canned body for {request.path}")
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        headers = {"Content-Type": "application/json", **reply.headers}
        return web.Response(status=reply.status, body=data, headers=headers)
