"""Long episodes: when a built-in agent's conversation would pass a token budget, it compacts.

The agent asks its own policy to summarize (that request is an ordinary step of the episode, marked
``metadata[CONTEXT_KEY] == "summary"``) and continues from the system prompt, the task and the
summary alone; the first request after it is marked ``"compacted"``. The summary request extends the
conversation it summarizes, so it stays in that conversation's training sequence; the request after
it starts a new one (``ares.training.sequences`` splits there and the turn view marks it).

Tokens are counted with the policy's own tokenizer when the agent's client can count them (a
``PromptCounter``: the environment's ``TokenExactClient`` when it has a ``TokenRenderer``), else
estimated at ~4 characters per token (``ares.llm.tokens.estimate``). The budget is the point at
which to compact, not a hard window: the summary request is the over-budget conversation plus the
summary instruction, so keep the budget below the policy's real context by that and a summary's length.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ares.agents.rendering import compile_template, default_template, render
from ares.llm.context_marks import COMPACTION_KEY, CONTEXT_KEY
from ares.llm.interceptor import LLMClient
from ares.llm.tokens.estimate import estimated_prompt_tokens
from ares.llm.types import LLMRequest, LLMResponse, Message, user


@runtime_checkable
class PromptCounter(Protocol):
    """A client that knows how many prompt tokens its policy would be fed for a request."""

    async def count_prompt_tokens(self, request: LLMRequest) -> int: ...


@dataclass(frozen=True, slots=True)
class ContextConfig:
    """Compact when the next request would exceed ``budget`` prompt tokens.

    Template variables: summary (none); resume ``summary``, ``compaction``.
    """

    budget: int
    summary_template: str = field(default_factory=lambda: default_template("context_summary.j2"))
    resume_template: str = field(default_factory=lambda: default_template("context_resume.j2"))

    def __post_init__(self) -> None:
        if self.budget < 1:
            raise ValueError(f"context budget must be at least 1 token, got {self.budget}")
        compile_template(self.summary_template)
        compile_template(self.resume_template)


async def prompt_tokens(llm: LLMClient, request: LLMRequest) -> int:
    """The request's prompt tokens: the policy's own count when the client has one, else the estimate."""
    if isinstance(llm, PromptCounter):
        return await llm.count_prompt_tokens(request)
    return estimated_prompt_tokens(request)


def over_budget(tokens: int, budget: int, *, fresh: bool) -> bool:
    """Whether to compact before a request of ``tokens``: never on a fresh context (the first request
    or the one right after a compaction), since dropping nothing cannot make it shorter."""
    return not fresh and tokens > budget


def with_instruction(messages: list[Message], instruction: str) -> list[Message]:
    """``messages`` plus ``instruction`` as the user's; joined to a last user message, so turns still
    alternate for APIs that require it."""
    last = messages[-1] if messages else None
    if last is not None and last.role == "user" and not last.tool_calls and isinstance(last.content, str):
        return [*messages[:-1], user(f"{last.content}\n\n{instruction}")]
    return [*messages, user(instruction)]


class ContextManager:
    """One agent's compaction state; ``config`` None means never compact (today's behaviour).

    ``summarizing``: the pending request asks for a summary. ``fresh``: no reply since the episode
    started or the last compaction. Both and the count survive ``state()``/``load()`` (snapshots).
    """

    def __init__(self, config: ContextConfig | None, llm: LLMClient) -> None:
        self.config = config
        self.llm = llm
        self.compactions = 0
        self.summarizing = False
        self.fresh = True

    def metadata(self, base: Mapping[str, Any]) -> dict[str, Any]:
        """``base`` plus this request's mark, if it is a summary request or the first after one."""
        if self.summarizing:
            return {**base, CONTEXT_KEY: "summary", COMPACTION_KEY: self.compactions + 1}
        if self.fresh and self.compactions:
            return {**base, CONTEXT_KEY: "compacted", COMPACTION_KEY: self.compactions}
        return dict(base)

    async def should_compact(self, request: LLMRequest) -> bool:
        """Whether ``request`` would pass the budget (so ask for a summary instead of sending it)."""
        if self.config is None or self.summarizing or self.fresh:
            return False
        tokens = await prompt_tokens(self.llm, request)
        return over_budget(tokens, self.config.budget, fresh=self.fresh)

    def start_summary(self, messages: list[Message]) -> list[Message]:
        """The conversation with the summary instruction appended; the next request asks for it."""
        assert self.config is not None
        self.summarizing = True
        return with_instruction(messages, render(self.config.summary_template))

    def compacted(self, instance: str, response: LLMResponse) -> list[Message]:
        """The conversation after a summary: the task's first message with the summary under it."""
        assert self.config is not None
        self.compactions += 1
        self.summarizing = False
        self.fresh = True
        summary = (response.content or "").strip() or "(the summary was empty)"
        resume = render(self.config.resume_template, summary=summary, compaction=self.compactions)
        return [user(f"{instance}\n\n{resume}")]

    def replied(self) -> None:
        """An ordinary reply came back: the context is no longer fresh."""
        self.fresh = False

    async def exchange(
        self,
        request: LLMRequest,
        messages: list[Message],
        instance: str,
        send: Callable[[LLMRequest], Awaitable[LLMResponse]],
    ) -> LLMResponse | None:
        """One turn of an agent's loop: ``send(request)`` and return the reply to act on, or None when
        the turn went to compaction (``messages`` then holds the summary request, or the fresh
        conversation after the summary came back) and the agent should build its next request."""
        if await self.should_compact(request):
            messages[:] = self.start_summary(messages)
            return None
        response = await send(request)
        if self.summarizing:  # the reply is the summary, whatever it holds (its tool calls are not run)
            messages[:] = self.compacted(instance, response)
            return None
        self.replied()
        return response

    def state(self) -> dict[str, Any]:
        return {"compactions": self.compactions, "summarizing": self.summarizing, "fresh": self.fresh}

    def load(self, state: Mapping[str, Any] | None, *, turn: int) -> None:
        """Restore ``state()``; None (a state saved before compaction existed) is a context that has
        not compacted, fresh only before its first reply (``turn`` 0)."""
        if state is None:
            self.fresh = turn == 0
            return
        self.compactions = int(state["compactions"])
        self.summarizing = bool(state["summarizing"])
        self.fresh = bool(state["fresh"])
