"""ARES messages in the shape Jinja chat templates read (Hugging Face ``apply_chat_template``, GGUF).

Templates expect OpenAI-style dicts: text content (never None: templates ``trim`` it), assistant tool
calls whose arguments are parsed objects (templates print them with ``tojson``), tool results with
the id of the call they answer.
"""

from __future__ import annotations

import json
from typing import Any

from ares.llm.types import LLMRequest, Message, ToolCall


def template_message(m: Message) -> dict[str, Any]:
    """One message as chat templates read it."""
    out: dict[str, Any] = {"role": m.role, "content": m.text}
    if m.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "type": c.type, "function": {"name": c.name, "arguments": _arguments(c)}}
            for c in m.tool_calls
        ]
    if m.tool_call_id is not None:
        out["tool_call_id"] = m.tool_call_id
    if m.name is not None:
        out["name"] = m.name
    return out


def template_messages(request: LLMRequest) -> list[dict[str, Any]]:
    """The system prompt and the messages, in the chat format templates expect."""
    return [template_message(m) for m in request.chat()]


def _arguments(call: ToolCall) -> Any:
    # Text that is not a JSON object (a model's malformed call) stays as the model wrote it.
    try:
        parsed = json.loads(call.arguments)
    except ValueError:
        return call.arguments
    return parsed if isinstance(parsed, dict) else call.arguments
