"""A complete Anthropic ``message`` object as the Messages API's SSE event stream.

Derived from the object a non-streaming call gets, so both carry the same content:
``message_start`` (the message with no content, no stop reason, no output tokens yet), each
content block opened, filled and closed (``text_delta``, ``input_json_delta`` for tool inputs,
``thinking_delta`` + ``signature_delta``; other blocks arrive whole in ``content_block_start``),
then ``message_delta`` with the stop reason and the cumulative usage, and ``message_stop``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import orjson

from ares.proxy import sse

#: Block types whose ``input`` the SDKs rebuild from ``input_json_delta`` fragments.
_TOOL_INPUT_BLOCKS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})
#: Top-level keys that only ``message_delta`` reports (at the end of a real stream).
_DELTA_KEYS = ("stop_reason", "stop_sequence", "stop_details", "container")


def encode(message: Mapping[str, Any], request: Mapping[str, Any]) -> Iterator[bytes]:
    """The SSE frames of ``message``; ``request`` (the caller's body) is not needed by this dialect."""

    def event(kind: str, **fields: Any) -> bytes:
        return sse.frame({"type": kind, **fields}, kind)

    usage = message.get("usage")
    started = {k: v for k, v in message.items() if k not in _DELTA_KEYS}
    started.update(content=[], stop_reason=None, stop_sequence=None)
    if isinstance(usage, Mapping):
        started["usage"] = {**usage, "output_tokens": 0}
    yield event("message_start", message=started)
    for index, block in enumerate(message.get("content") or ()):
        opened, deltas = _split(block)
        yield event("content_block_start", index=index, content_block=opened)
        for delta in deltas:
            yield event("content_block_delta", index=index, delta=delta)
        yield event("content_block_stop", index=index)
    delta = {"stop_reason": message.get("stop_reason"), "stop_sequence": message.get("stop_sequence")}
    delta.update((k, message[k]) for k in _DELTA_KEYS[2:] if k in message)
    yield event(
        "message_delta", delta=delta, usage=usage if isinstance(usage, Mapping) else {"output_tokens": 0}
    )
    yield event("message_stop")


def _split(block: Mapping[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A content block as its opening value and the deltas that complete it."""
    kind = block.get("type")
    if kind == "text":
        deltas = [{"type": "text_delta", "text": block.get("text", "")}]
        deltas += [{"type": "citations_delta", "citation": c} for c in block.get("citations") or ()]
        return {**block, "text": "", **({"citations": None} if block.get("citations") else {})}, deltas
    if kind == "thinking":
        deltas = [{"type": "thinking_delta", "thinking": block.get("thinking", "")}]
        if block.get("signature"):
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        return {**block, "thinking": "", "signature": ""}, deltas
    if kind in _TOOL_INPUT_BLOCKS:
        fragment = orjson.dumps(block.get("input", {})).decode()
        return {**block, "input": {}}, [{"type": "input_json_delta", "partial_json": fragment}]
    return dict(block), []
