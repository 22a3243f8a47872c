"""Server-sent events framing, shared by the three dialects' stream encoders."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

#: The frame that ends an OpenAI Chat Completions stream.
DONE = b"data: [DONE]\n\n"


def frame(data: Mapping[str, Any], event: str | None = None) -> bytes:
    """One SSE frame: an optional ``event:`` line and a single-line JSON ``data:`` line."""
    head = b"event: " + event.encode() + b"\n" if event else b""
    return head + b"data: " + orjson.dumps(data) + b"\n\n"
