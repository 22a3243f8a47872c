"""The seam between token-exact prompts and a model's tokenizer: its own chat template and vocabulary."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ares.llm.types import LLMRequest


@runtime_checkable
class TokenRenderer(Protocol):
    """A model's own chat template and tokenizer, as text in and token ids out.

    ``render`` always ends with the generation prompt (the open assistant turn): that is the only
    render token-exact prompts need, and some servers (llama.cpp) treat a conversation ending in an
    assistant message as a prefill, which would not close that turn.
    """

    async def render(self, request: LLMRequest) -> str:
        """The prompt text the model's chat template makes of ``request`` (tools included)."""
        ...

    async def tokenize(self, text: str, *, start: bool) -> list[int]:
        """Token ids of ``text`` with special tokens parsed. ``start``: the text begins a prompt, so
        add what the model's tokenizer prepends there (a BOS), exactly as its server would when fed
        the text; False for a continuation, which gets nothing added."""
        ...

    async def detokenize(self, ids: Sequence[int]) -> str:
        """The text of ``ids``, special tokens written out (the inverse the prefix check needs)."""
        ...
