"""Provider-neutral LLM request/response values: the observation and action of ARES.

Values are frozen slotted dataclasses: cheap to create on the hot path and safe to share between
the environment, wrappers and recorders. Fields a provider sends that we do not model are kept in
``extra`` so conversions stay lossless.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "developer", "user", "assistant", "tool"]
FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "function_call"]

_EMPTY: Mapping[str, Any] = {}


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A function call requested by the model; ``arguments`` is the raw JSON text it produced."""

    id: str
    name: str
    arguments: str
    type: str = "function"


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message. ``content`` is text, a tuple of provider content parts, or None."""

    role: Role
    content: str | tuple[Mapping[str, Any], ...] | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    extra: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    @property
    def text(self) -> str:
        """The message's text, joining text parts of structured content."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(str(p.get("text", "")) for p in self.content if p.get("type") == "text")


def system(text: str) -> Message:
    return Message("system", text)


def user(text: str) -> Message:
    return Message("user", text)


def assistant(text: str | None, tool_calls: tuple[ToolCall, ...] = ()) -> Message:
    return Message("assistant", text, tool_calls)


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """Sampling parameters the code agent asked for; None means "provider default"."""

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] | None = None
    seed: int | None = None
    extra: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True, slots=True)
class LLMRequest:
    """The observation: what the code agent asked its LLM.

    ``system_prompt`` is kept apart from ``messages`` (providers disagree on where it goes).
    ``prompt_token_ids`` is filled by token-aware agents/proxies so trainers can be token exact.
    """

    messages: tuple[Message, ...]
    system_prompt: str | None = None
    tools: tuple[Mapping[str, Any], ...] = ()
    sampling: SamplingParams = field(default_factory=SamplingParams)
    model: str | None = None
    prompt_token_ids: tuple[int, ...] | None = None
    metadata: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    extra: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    def chat(self) -> list[Message]:
        """System prompt (if any) followed by the messages: the full conversation."""
        head = [Message("system", self.system_prompt)] if self.system_prompt is not None else []
        return [*head, *self.messages]


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    extra: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True)
class LLMResponse:
    """The action: the policy's answer to an LLMRequest.

    ``token_ids`` and ``logprobs`` (one per generated token) make token-exact RL possible;
    ``policy_version`` is the version of the weights that answered (a trainer's step counter), as
    the policy reports it (None: not known), so a trainer can tell on-policy from stale tokens.
    """

    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = "stop"
    usage: Usage | None = None
    cost: float | None = None
    model: str | None = None
    id: str | None = None
    token_ids: tuple[int, ...] | None = None
    logprobs: tuple[float, ...] | None = None
    extra: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    policy_version: int | None = None

    def message(self) -> Message:
        """The response as an assistant message, ready to append to a conversation."""
        return Message("assistant", self.content, self.tool_calls)


def text_response(text: str) -> LLMResponse:
    """The simplest action: a plain text answer."""
    return LLMResponse(content=text)
