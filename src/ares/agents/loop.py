"""One conversation loop for the built-in agents: ask the model, read its reply, act, observe.

The bash, tool-calling and terminal agents differ in how they prompt, what a reply means and how an
action runs. Everything else is the same and is written here once: building each request, the
exchange through the context manager (which may compact the conversation), counting malformed
replies in a row, the step limit, and why the loop stopped (``exit_status``). An agent is a
``ConversationLoop`` with its hooks filled in:

- ``system_prompt()`` and ``instance()``: the prompts, rendered once per ``run``;
- ``opening(instance)``: the first messages of a fresh conversation (the terminal agent adds a screen);
- ``reply_message(response)``: how the reply is kept in the conversation;
- ``act(response)``: parse the reply and run what it asks for, as a ``Turn``;
- ``on_stop()``: clean-up when the loop ends by itself (an error propagates without it).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol

from ares.agents import resumable
from ares.agents.context import ContextConfig
from ares.agents.rendering import compile_template
from ares.llm.interceptor import LLMClient
from ares.llm.types import LLMRequest, LLMResponse, Message, SamplingParams, assistant, user
from ares.sandbox.base import Sandbox
from ares.tasks.model import Task

logger = logging.getLogger(__name__)

#: Why ``run`` returned: the model submitted, kept replying malformed, or hit the step limit.
ExitStatus = Literal["submitted", "format_errors", "step_limit"]


@dataclass(frozen=True, slots=True)
class LoopSettings:
    """The loop's own settings, which every built-in agent's config extends with its templates."""

    #: Malformed replies in a row after which the agent gives up (and the episode is verified).
    max_format_errors: int = 3
    #: LLM calls after which the agent stops by itself; None leaves limits to the environment.
    step_limit: int | None = None
    sampling: SamplingParams = field(default_factory=SamplingParams)
    model: str | None = None
    #: Compact the conversation when it would pass this budget; None never compacts.
    context: ContextConfig | None = None


class LoopConfig(Protocol):
    """What the loop reads from an agent's config (a ``LoopSettings``, or any object like one)."""

    @property
    def max_format_errors(self) -> int: ...
    @property
    def step_limit(self) -> int | None: ...
    @property
    def sampling(self) -> SamplingParams: ...
    @property
    def model(self) -> str | None: ...
    @property
    def context(self) -> ContextConfig | None: ...


@dataclass(frozen=True, slots=True)
class Turn:
    """What one reply did.

    ``messages`` join the conversation whatever the kind (a tool agent answers each call, even a bad
    one). After a ``malformed`` reply the loop counts it, and unless that was one too many it appends
    ``correction`` (the format-error message); ``error`` says what was wrong, for the log.
    """

    kind: Literal["acted", "submitted", "malformed"]
    messages: tuple[Message, ...] = ()
    correction: Message | None = None
    error: str = ""


def check_config(config: Any, positive: tuple[str, ...], templates: tuple[str, ...]) -> None:
    """Fail at construction, not mid-episode: the named fields must be at least 1, the step limit
    None or at least 1, and every template must compile."""
    for name in positive:
        if getattr(config, name) < 1:
            raise ValueError(f"{name} must be at least 1, got {getattr(config, name)}")
    if config.step_limit is not None and config.step_limit < 1:
        raise ValueError(f"step_limit must be None or at least 1, got {config.step_limit}")
    for source in templates:
        compile_template(source)


class ConversationLoop(resumable.ResumableConversation):
    """Drives one sandbox for one task by conversation. ``exit_status`` says why ``run`` returned.

    ``state()`` / ``load_state()`` (from ``ResumableConversation``) capture the agent between two LLM
    calls; a loaded agent re-issues the same pending request first, then goes on as the original.
    """

    #: The tools sent with every request (OpenAI function-tool form); none for a text-only agent.
    TOOLS: ClassVar[tuple[Mapping[str, Any], ...]] = ()

    def __init__(self, sandbox: Sandbox, llm: LLMClient, task: Task, config: LoopConfig) -> None:
        self.sandbox = sandbox
        self.llm = llm
        self.task = task
        self.config = config
        self.exit_status: ExitStatus | None = None
        self._init_conversation(llm, config.context)

    def system_prompt(self) -> str:
        raise NotImplementedError

    def instance(self) -> str:
        raise NotImplementedError

    async def opening(self, instance: str) -> list[Message]:
        """The first messages of a conversation that is not resumed from a state."""
        return [user(instance)]

    def reply_message(self, response: LLMResponse) -> Message:
        """The reply as it joins the conversation: its text only, so it stays valid to resend."""
        return assistant(response.content or "")

    async def act(self, response: LLMResponse) -> Turn:
        raise NotImplementedError

    async def on_stop(self) -> None:
        """Called once when the loop ends by itself (submit, format errors, step limit)."""

    async def run(self) -> None:
        """Loop until submit, too many malformed replies, or the step limit. LLM and sandbox errors
        propagate."""
        config = self.config
        system_prompt, instance = self.system_prompt(), self.instance()
        if self._messages is None:
            self._messages = await self.opening(instance)
        messages, context = self._messages, self._context
        while config.step_limit is None or self._turn < config.step_limit:
            request = LLMRequest(
                messages=tuple(messages),
                system_prompt=system_prompt,
                tools=self.TOOLS,
                sampling=config.sampling,
                model=config.model,
                metadata=context.metadata({"agent": self.AGENT, "turn": self._turn}),
            )
            response = await context.exchange(request, messages, instance, self._ask)
            if response is None:
                continue
            messages.append(self.reply_message(response))
            turn = await self.act(response)
            messages.extend(turn.messages)
            if turn.kind == "submitted":
                return await self._stop("submitted")
            if turn.kind == "acted":
                self._format_errors = 0
                continue
            self._format_errors += 1
            if self._format_errors >= config.max_format_errors:
                gave_up = "%s agent gave up after %d malformed replies in a row: %s"
                logger.warning(gave_up, self.AGENT, self._format_errors, turn.error)
                return await self._stop("format_errors")
            if turn.correction is not None:
                messages.append(turn.correction)
        await self._stop("step_limit")

    async def _stop(self, status: ExitStatus) -> None:
        self.exit_status = status
        await self.on_stop()
