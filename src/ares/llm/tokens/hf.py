"""A ``TokenRenderer`` on a Hugging Face tokenizer that carries its model's chat template."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Protocol

from ares.errors import LLMError
from ares.llm.tokens.chat_format import template_messages
from ares.llm.types import LLMRequest


class ChatTokenizer(Protocol):
    """The part of a Hugging Face (fast) tokenizer used here."""

    chat_template: Any

    def apply_chat_template(self, conversation: list[dict[str, Any]], **kwargs: Any) -> Any: ...

    def encode(self, text: str, **kwargs: Any) -> list[int]: ...

    def decode(self, ids: Sequence[int], **kwargs: Any) -> str: ...


class HFTokenizerRenderer:
    """Renders with ``tokenizer.apply_chat_template`` and tokenizes with the same tokenizer.

    Nothing is added when tokenizing, also at a prompt's start: Hugging Face chat templates write
    their BOS themselves (as ``apply_chat_template(tokenize=True)`` assumes). Work runs in a thread,
    since templating and tokenizing a long conversation is CPU work.
    """

    def __init__(self, tokenizer: ChatTokenizer) -> None:
        if getattr(tokenizer, "chat_template", None) is None:
            raise LLMError(
                f"{type(tokenizer).__name__} has no chat template; token-exact prompts need the model's "
                "own template (set tokenizer.chat_template)"
            )
        self.tokenizer = tokenizer

    async def render(self, request: LLMRequest) -> str:
        chat = template_messages(request)
        tools = list(request.tools) or None
        text = await asyncio.to_thread(
            self.tokenizer.apply_chat_template, chat, tools=tools, add_generation_prompt=True, tokenize=False
        )
        return str(text)

    async def tokenize(self, text: str, *, start: bool) -> list[int]:
        return list(await asyncio.to_thread(self.tokenizer.encode, text, add_special_tokens=False))

    async def detokenize(self, ids: Sequence[int]) -> str:
        return await asyncio.to_thread(
            self.tokenizer.decode, list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False
        )
