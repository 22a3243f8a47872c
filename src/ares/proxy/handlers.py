"""The HTTP layer: aiohttp routes that turn one wire call into one ``await session.call(request)``.

The same handlers serve the proxy's main site (the session comes from the ``/s/{session}`` prefix)
and a socket dedicated to one session (no prefix, the session is fixed): ``build_app`` takes the
route prefix and a function that finds the session of a request.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

import orjson
from aiohttp import web

from ares.errors import LLMError
from ares.llm.types import LLMRequest, LLMResponse
from ares.proxy import dialects
from ares.proxy.dialects import Dialect
from ares.proxy.errors import ApiError
from ares.proxy.session import ProxySession

#: ``LLMRequest.metadata`` key under which the proxy records where a call came from:
#: ``{"dialect": "openai_chat" | "openai_responses" | "anthropic_messages", "session": <id>}``.
METADATA_KEY = "ares_proxy"
#: Tells the OpenAI and Anthropic SDKs not to retry: a retry would only replay the same failure
#: (or, worse, put the same call before the policy twice).
_NO_RETRY = {"x-should-retry": "false"}
_DEFAULT_MODEL = "ares"

log = logging.getLogger(__name__)

SessionLookup = Callable[[web.Request], ProxySession]


def build_app(
    lookup: SessionLookup, *, prefix: str, max_body_bytes: int, health: Callable[[], Mapping[str, Any]]
) -> web.Application:
    """The routes of one site; ``prefix`` is ``/s/{session}`` on the main site, empty on a session's own."""
    app = web.Application(client_max_size=max_body_bytes, middlewares=[_json_errors])
    for suffix, dialect in dialects.BY_ROUTE.items():
        app.router.add_post(f"{prefix}/v1/{suffix}", _CallRoute(dialect, lookup, max_body_bytes).handle)
    app.router.add_get(f"{prefix}/v1/models", _ModelsRoute(lookup).handle)

    async def handle_health(_request: web.Request) -> web.Response:
        return _json(health())

    app.router.add_get("/health", handle_health)
    return app


def _json(
    body: Mapping[str, Any], status: int = 200, headers: Mapping[str, str] | None = None
) -> web.Response:
    return web.Response(
        body=orjson.dumps(body), status=status, content_type="application/json", headers=headers
    )


def _error(dialect: Dialect, error: ApiError) -> web.Response:
    (log.warning if error.status >= 500 else log.debug)("proxy call failed: %s", error)
    return _json(dialect.error_body(error), error.status, _NO_RETRY)


@web.middleware
async def _json_errors(request: web.Request, handler: Callable[[web.Request], Any]) -> web.StreamResponse:
    """Unknown routes, wrong methods and bugs answer in a dialect's JSON error shape, not HTML."""
    try:
        response: web.StreamResponse = await handler(request)
    except web.HTTPException as e:
        if e.status < 400:
            raise
        message = f"no route {request.method} {request.path} on the ARES proxy ({e.reason})"
        return _error(dialects.guess(request.path, request.headers), ApiError(e.status, message, "no_route"))
    except Exception as e:
        log.exception("ARES proxy handler crashed on %s %s", request.method, request.path)
        message = f"the ARES proxy failed: {type(e).__name__}: {e}"
        return _error(dialects.guess(request.path, request.headers), ApiError(500, message, "proxy_error"))
    return response


class _CallRoute:
    """``POST .../v1/{chat/completions,responses,messages}`` for one dialect."""

    __slots__ = ("_dialect", "_lookup", "_max_body_bytes")

    def __init__(self, dialect: Dialect, lookup: SessionLookup, max_body_bytes: int) -> None:
        self._dialect = dialect
        self._lookup = lookup
        self._max_body_bytes = max_body_bytes

    async def handle(self, http: web.Request) -> web.StreamResponse:
        dialect = self._dialect
        try:
            session = self._lookup(http)
            session.check_open()
            body = await self._body(http)
            stream = body.get("stream")
            if stream is not None and not isinstance(stream, bool):
                raise ApiError(
                    400, f"stream must be a boolean, got {type(stream).__name__}", "invalid_request"
                )
            request = self._parse(body, session)
            response = _completed(await session.call(request), request, dialect)
            try:
                answer = dialect.render(response)
            except LLMError as e:
                message = f"the policy's response cannot be rendered as {dialect.name}: {e}"
                raise ApiError(500, message, "unrenderable_response") from None
        except ApiError as e:
            return _error(dialect, e)
        if stream:
            return _stream(dialect.stream(answer, body))
        return _json(answer)

    async def _body(self, http: web.Request) -> dict[str, Any]:
        try:
            raw = await http.read()
        except web.HTTPRequestEntityTooLarge:
            message = f"the request body is larger than the proxy's max_body_bytes={self._max_body_bytes}"
            raise ApiError(413, message, "body_too_large") from None
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            raise ApiError(400, f"the request body is not valid JSON: {e}", "malformed_json") from None
        if not isinstance(body, dict):
            raise ApiError(
                400, f"the request body must be a JSON object, got {type(body).__name__}", "invalid_request"
            )
        return body

    def _parse(self, body: Mapping[str, Any], session: ProxySession) -> LLMRequest:
        try:
            request = self._dialect.parse(body)
        except LLMError as e:
            raise ApiError(400, str(e), "invalid_request") from None
        source = {"dialect": self._dialect.name, "session": session.id}
        return replace(request, metadata={**request.metadata, METADATA_KEY: source})


def _completed(response: LLMResponse, request: LLMRequest, dialect: Dialect) -> LLMResponse:
    """``response`` with the id and model an SDK expects, made up when the policy gave none."""
    model = response.model if response.model is not None else request.model
    response_id = response.id if response.id is not None else dialect.id_prefix + secrets.token_hex(12)
    if model == response.model and response_id == response.id:
        return response
    return replace(response, model=model, id=response_id)


def _stream(frames: Iterable[bytes]) -> web.Response:
    """The whole event stream in one body: the answer is complete before its first event is sent."""
    headers = {"Cache-Control": "no-cache"}
    return web.Response(body=b"".join(frames), content_type="text/event-stream", headers=headers)


class _ModelsRoute:
    """``GET .../v1/models``: agents probe it; one entry, readable by the OpenAI and Anthropic SDKs."""

    __slots__ = ("_lookup",)

    def __init__(self, lookup: SessionLookup) -> None:
        self._lookup = lookup

    async def handle(self, http: web.Request) -> web.Response:
        try:
            session = self._lookup(http)
            session.check_open()
        except ApiError as e:
            return _error(dialects.guess(http.path, http.headers), e)
        model = session.model or _DEFAULT_MODEL
        entry = {"id": model, "object": "model", "created": 0, "owned_by": "ares"}
        entry.update(type="model", display_name=model, created_at="1970-01-01T00:00:00Z")
        return _json(
            {"object": "list", "data": [entry], "has_more": False, "first_id": model, "last_id": model}
        )
