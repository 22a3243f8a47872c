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

from ares.llm.tokens.estimate import CHARS_PER_TOKEN as CHARS_PER_TOKEN
from ares.llm.tokens.estimate import estimated_prompt_tokens
from ares.llm.types import LLMRequest


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
