"""Token and cost totals of one episode's policy answers, as the runner counts them."""

from __future__ import annotations

from typing import Any

from ares.llm.types import LLMResponse


class TokenCounts:
    """Token and cost totals of one episode's policy answers (None until one reports them)."""

    __slots__ = ("completion", "cost", "prompt")

    def __init__(self) -> None:
        self.prompt: int | None = None
        self.completion: int | None = None
        self.cost: float | None = None

    def add(self, action: Any) -> None:
        """Count an answer's usage and cost: actions are LLMResponses (the one action type that
        reports them); any other action counts nothing."""
        if not isinstance(action, LLMResponse):
            return
        usage, cost = action.usage, action.cost
        if usage is not None:
            self.prompt = (self.prompt or 0) + usage.prompt_tokens
            self.completion = (self.completion or 0) + usage.completion_tokens
        if cost is not None:
            self.cost = (self.cost or 0.0) + cost
