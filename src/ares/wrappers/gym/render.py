"""Conversations as plain text: the ``ansi`` render of the gym envs and the prompt text tokenizers see."""

from __future__ import annotations

import json
from collections.abc import Iterable

from ares.llm.types import LLMRequest, Message


def message_text(m: Message) -> str:
    """The message's text followed by one JSON line per tool call, so nothing the model sees is dropped."""
    calls = [json.dumps({"name": c.name, "arguments": c.arguments}) for c in m.tool_calls]
    return "\n".join([m.text, *calls]) if calls else m.text


def transcript(messages: Iterable[Message]) -> str:
    """``[role]`` headers over each message's text, a blank line between turns."""
    return "\n\n".join(f"[{m.role}]\n{message_text(m)}" for m in messages)


def chatml(request: LLMRequest) -> str:
    """The request as ChatML text ending in an open assistant turn: what a tokenizer encodes when the
    request carries no ``prompt_token_ids`` of its own."""
    turns = "".join(f"<|im_start|>{m.role}\n{message_text(m)}<|im_end|>\n" for m in request.chat())
    return f"{turns}<|im_start|>assistant\n"
