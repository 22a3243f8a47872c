"""The three wire dialects the proxy speaks: how to read a request, write an answer, stream, and fail.

A ``Dialect`` bundles the converter pair of ``ares.llm`` (wire request -> ``LLMRequest``,
``LLMResponse`` -> wire answer), the stream encoder that turns that same answer into SSE events,
and the dialect's error shape, so the HTTP layer handles every dialect with one code path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ares.llm import anthropic_messages, openai_chat, openai_responses
from ares.llm.types import LLMRequest, LLMResponse
from ares.proxy import stream_anthropic, stream_chat, stream_responses
from ares.proxy.errors import ApiError

Json = dict[str, Any]

#: Anthropic's error ``type`` for each status it documents; other statuses map to ``api_error``.
_ANTHROPIC_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
    404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 504: "timeout_error",
}  # fmt: skip
_OPENAI_TYPES = {404: "not_found_error", 504: "timeout_error"}


def _openai_error(error: ApiError) -> Json:
    kind = _OPENAI_TYPES.get(error.status, "invalid_request_error" if error.status < 500 else "server_error")
    return {"error": {"message": error.message, "type": kind, "param": None, "code": error.code}}


def _anthropic_error(error: ApiError) -> Json:
    kind = _ANTHROPIC_TYPES.get(error.status, "invalid_request_error" if error.status < 500 else "api_error")
    return {"type": "error", "error": {"type": kind, "message": error.message}}


@dataclass(frozen=True, slots=True)
class Dialect:
    """One wire format; ``name`` is what the proxy records in ``LLMRequest.metadata``."""

    name: str
    parse: Callable[[Mapping[str, Any]], LLMRequest]
    render: Callable[[LLMResponse], Json]
    stream: Callable[[Mapping[str, Any], Mapping[str, Any]], Iterator[bytes]]
    error_body: Callable[[ApiError], Json]
    #: Prefix of the ids the proxy makes up for answers whose policy gave none.
    id_prefix: str


CHAT = Dialect(
    "openai_chat",
    openai_chat.request_from_openai,
    openai_chat.response_to_openai,
    stream_chat.encode,
    _openai_error,
    "chatcmpl-",
)
RESPONSES = Dialect(
    "openai_responses",
    openai_responses.request_from_responses,
    openai_responses.response_to_responses,
    stream_responses.encode,
    _openai_error,
    "resp_",
)
ANTHROPIC = Dialect(
    "anthropic_messages",
    anthropic_messages.request_from_anthropic,
    anthropic_messages.response_to_anthropic,
    stream_anthropic.encode,
    _anthropic_error,
    "msg_",
)

#: Route suffix (after ``/v1``) -> dialect.
BY_ROUTE: Mapping[str, Dialect] = {
    "chat/completions": CHAT,
    "responses": RESPONSES,
    "messages": ANTHROPIC,
}


def guess(path: str, headers: Mapping[str, str]) -> Dialect:
    """The dialect whose error shape suits a request that has no dialect route (a 404, ``/v1/models``)."""
    return ANTHROPIC if "/messages" in path or "anthropic-version" in headers else CHAT
