"""A complete ``chat.completion`` object as a Chat Completions SSE stream of ``chat.completion.chunk``.

The policy answers whole, so the stream is derived from the very object a non-streaming call gets:
each choice opens with its role and text (and logprobs), then one delta per tool call (with its
``index``), then a chunk with the finish reason; the usage chunk (empty ``choices``) follows only
when the caller asked for it with ``stream_options.include_usage``, then ``data: [DONE]``.
Reassembling the chunks the way the OpenAI SDK does gives back the non-streaming object.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ares.proxy import sse

_MESSAGE_STREAMED = frozenset({"content", "tool_calls"})
_CHOICE_STREAMED = frozenset({"index", "message", "logprobs", "finish_reason"})


def encode(completion: Mapping[str, Any], request: Mapping[str, Any]) -> Iterator[bytes]:
    """The SSE frames of ``completion``; ``request`` is the caller's body (for ``stream_options``)."""
    head = {k: v for k, v in completion.items() if k not in ("choices", "usage")}
    head["object"] = "chat.completion.chunk"

    def chunk(choice: Mapping[str, Any]) -> bytes:
        return sse.frame({**head, "choices": [choice]})

    for choice in completion.get("choices") or ():
        index = choice.get("index", 0)
        message = choice.get("message") or {}
        opening = {k: v for k, v in message.items() if k not in _MESSAGE_STREAMED}
        opening["content"] = message.get("content")
        first: dict[str, Any] = {"index": index, "delta": opening, "finish_reason": None}
        if choice.get("logprobs") is not None:
            first["logprobs"] = choice["logprobs"]
        yield chunk(first)
        for position, call in enumerate(message.get("tool_calls") or ()):
            delta = {"tool_calls": [{"index": position, **call}]}
            yield chunk({"index": index, "delta": delta, "finish_reason": None})
        closing = {k: v for k, v in choice.items() if k not in _CHOICE_STREAMED}
        yield chunk({"index": index, "delta": {}, **closing, "finish_reason": choice.get("finish_reason")})
    options = request.get("stream_options")
    if isinstance(options, Mapping) and options.get("include_usage") and "usage" in completion:
        yield sse.frame({**head, "choices": [], "usage": completion["usage"]})
    yield sse.DONE
