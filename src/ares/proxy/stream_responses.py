"""A complete Responses API ``response`` object as the Responses API's SSE event stream.

Derived from the object a non-streaming call gets, so both carry the same content: the response
is announced (``response.created``, ``response.in_progress``) with no output, each output item is
opened, filled and closed (text through ``response.output_text.delta``/``done`` inside a content
part, function arguments through ``response.function_call_arguments.delta``/``done``, other items
whole), and the final event (``response.completed``, or ``response.incomplete``/``response.failed``
after the response's status) carries the complete object. Every event has a ``sequence_number``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from itertools import count
from typing import Any

from ares.proxy import sse

_FINAL_EVENT = {"incomplete": "response.incomplete", "failed": "response.failed"}


def encode(response: Mapping[str, Any], request: Mapping[str, Any]) -> Iterator[bytes]:
    """The SSE frames of ``response``; ``request`` (the caller's body) is not needed by this dialect."""
    numbers = count()

    def event(kind: str, **fields: Any) -> bytes:
        return sse.frame({"type": kind, "sequence_number": next(numbers), **fields}, kind)

    announced = {**response, "status": "in_progress", "output": [], "usage": None}
    yield event("response.created", response=announced)
    yield event("response.in_progress", response=announced)
    for position, item in enumerate(response.get("output") or ()):
        kind = item.get("type")
        if kind == "message":
            yield from _message(item, position, event)
        elif kind == "function_call":
            opened = {**item, "arguments": "", "status": "in_progress"}
            at = {"item_id": item.get("id", ""), "output_index": position}
            yield event("response.output_item.added", output_index=position, item=opened)
            arguments = item.get("arguments", "")
            yield event("response.function_call_arguments.delta", **at, delta=arguments)
            yield event(
                "response.function_call_arguments.done", **at, name=item.get("name"), arguments=arguments
            )
        else:
            yield event("response.output_item.added", output_index=position, item=item)
        yield event("response.output_item.done", output_index=position, item=item)
    final = _FINAL_EVENT.get(str(response.get("status")), "response.completed")
    yield event(final, response=response)


def _message(item: Mapping[str, Any], position: int, event: Callable[..., bytes]) -> Iterator[bytes]:
    opened = {**item, "status": "in_progress", "content": []}
    yield event("response.output_item.added", output_index=position, item=opened)
    for index, part in enumerate(item.get("content") or ()):
        at = {"item_id": item.get("id", ""), "output_index": position, "content_index": index}
        kind = part.get("type")
        if kind == "output_text":
            text, logprobs = part.get("text", ""), part.get("logprobs") or []
            yield event("response.content_part.added", **at, part={**part, "text": ""})
            yield event("response.output_text.delta", **at, delta=text, logprobs=logprobs)
            yield event("response.output_text.done", **at, text=text, logprobs=logprobs)
        elif kind == "refusal":
            refusal = part.get("refusal", "")
            yield event("response.content_part.added", **at, part={**part, "refusal": ""})
            yield event("response.refusal.delta", **at, delta=refusal)
            yield event("response.refusal.done", **at, refusal=refusal)
        else:
            yield event("response.content_part.added", **at, part=part)
        yield event("response.content_part.done", **at, part=part)
