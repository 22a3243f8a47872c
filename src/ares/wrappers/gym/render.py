"""Conversations rendered for people and for models: the ``ansi`` text of the gym envs, ChatML, and
the chat-format messages a tokenizer's own chat template reads."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ares.llm.types import LLMRequest, Message, ToolCall


def message_text(m: Message) -> str:
    """The message's text followed by one JSON line per tool call, so nothing the model sees is dropped."""
    calls = [json.dumps({"name": c.name, "arguments": c.arguments}) for c in m.tool_calls]
    return "\n".join([m.text, *calls]) if calls else m.text


def transcript(messages: Iterable[Message]) -> str:
    """``[role]`` headers over each message's text, a blank line between turns."""
    return "\n\n".join(f"[{m.role}]\n{message_text(m)}" for m in messages)


def chatml(request: LLMRequest) -> str:
    """The request as ChatML text ending in an open assistant turn. Only right for ChatML models, so the
    codec uses it only when asked by name (``render="chatml"``)."""
    turns = "".join(f"<|im_start|>{m.role}\n{message_text(m)}<|im_end|>\n" for m in request.chat())
    return f"{turns}<|im_start|>assistant\n"


@runtime_checkable
class ChatTemplated(Protocol):
    """A tokenizer that renders conversations itself, as Hugging Face tokenizers do. One whose
    ``chat_template`` attribute is None has no template (Hugging Face's convention)."""

    def apply_chat_template(self, conversation: list[dict[str, Any]], **kwargs: Any) -> Any: ...


def has_chat_template(tokenizer: object) -> bool:
    """Whether ``tokenizer`` can render a conversation with its own template."""
    return isinstance(tokenizer, ChatTemplated) and getattr(tokenizer, "chat_template", "") is not None


def _arguments(call: ToolCall) -> Any:
    # Templates print arguments with ``tojson``, so they expect the parsed object; text that is not a
    # JSON object (a model's malformed call) stays as the model wrote it.
    try:
        parsed = json.loads(call.arguments)
    except ValueError:
        return call.arguments
    return parsed if isinstance(parsed, dict) else call.arguments


def template_message(m: Message) -> dict[str, Any]:
    """One message as chat templates read it: text content (never None, templates ``trim`` it), assistant
    tool calls in the OpenAI shape, tool results with the id of the call they answer."""
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


def template_ids(tokenizer: ChatTemplated, request: LLMRequest) -> list[int]:
    """The prompt ids the tokenizer's own template gives ``request``, generation prompt included."""
    out = tokenizer.apply_chat_template(
        template_messages(request),
        tools=[dict(t) for t in request.tools] or None,
        add_generation_prompt=True,
        tokenize=True,
    )
    ids = np.asarray(out["input_ids"] if isinstance(out, Mapping) else out)  # a BatchEncoding or ids
    if ids.ndim != 1 or (ids.size and not np.issubdtype(ids.dtype, np.integer)):
        raise TypeError(f"apply_chat_template(..., tokenize=True) must return token ids, got {out!r:.200}")
    return [int(t) for t in ids]
