"""Conversations rendered for people and for models: the ``ansi`` text of the gym envs, ChatML, and
the chat-format messages a tokenizer's own chat template reads."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ares.llm.tokens.chat_format import template_messages
from ares.llm.types import LLMRequest, Message


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
