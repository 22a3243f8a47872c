"""The policy's context window: how long a prompt may grow before the episode is cut.

A real policy has a finite context; an agent whose conversation outgrows it cannot go on. The
environment ends such an episode as truncated (reason ``"context_limit"``) at the step whose prompt
overflowed, so trainers see a cut, not a failure, and records keep the step with its trace.
Tokens are counted exactly when the request carries ``prompt_token_ids``, otherwise estimated from
the text (~4 characters per token, the usual English/code average) unless a counter is given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ares.llm.types import LLMRequest

CHARS_PER_TOKEN = 4


def estimated_prompt_tokens(request: LLMRequest) -> int:
    """Prompt length in tokens: exact from ``prompt_token_ids``, else characters / 4, rounded up."""
    if request.prompt_token_ids is not None:
        return len(request.prompt_token_ids)
    chars = len(request.system_prompt or "")
    for message in request.messages:
        chars += len(message.text) + sum(len(call.arguments) + len(call.name) for call in message.tool_calls)
    return -(-chars // CHARS_PER_TOKEN)


@dataclass(frozen=True, slots=True)
class ContextWindow:
    """``limit`` prompt tokens, counted by ``count`` (a tokenizer's length, or the estimate)."""

    limit: int
    count: Callable[[LLMRequest], int] = estimated_prompt_tokens

    def __post_init__(self) -> None:
        if self.limit < 1:
            raise ValueError(f"context limit must be >= 1 token, got {self.limit}")

    def overflows(self, request: LLMRequest) -> bool:
        return self.count(request) > self.limit
