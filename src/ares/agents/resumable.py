"""The saved state of a conversational agent between two LLM calls (``StatefulAgent``).

The bash, tool-calling and terminal agents keep the same things (``ResumableConversation``): the
pending request (which holds the whole conversation), two counters and the context manager's
compaction state (absent in states saved before it existed, which load as never compacted). The
request is stored in the OpenAI Chat wire form, which is lossless and plain JSON, so a state can be
written anywhere a snapshot goes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ares.agents.context import ContextConfig, ContextManager
from ares.errors import AgentError
from ares.llm.interceptor import LLMClient
from ares.llm.openai_chat import request_from_openai, request_to_openai
from ares.llm.types import LLMRequest, LLMResponse, Message


@dataclass(frozen=True, slots=True)
class ConversationState:
    """An agent's conversation and counters as it waits for its LLM."""

    messages: tuple[Message, ...]
    turn: int
    format_errors: int
    context: Mapping[str, Any] | None = None


def save_state(
    agent: str,
    version: int,
    pending: LLMRequest | None,
    turn: int,
    format_errors: int,
    context: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON state of agent kind ``agent`` waiting on ``pending``; there is none between calls."""
    if pending is None:
        raise AgentError(f"the {agent} agent has no pending LLM call: its state exists only between steps")
    return {
        "agent": agent,
        "version": version,
        "turn": turn,
        "format_errors": format_errors,
        "request": request_to_openai(pending),
        **({"context": dict(context)} if context is not None else {}),
    }


def load_state(agent: str, version: int, state: Mapping[str, Any]) -> ConversationState:
    """What ``save_state`` saved, checked to be a state of this agent kind and version."""
    if state.get("agent") != agent or state.get("version") != version:
        raise AgentError(
            f"not a {agent} agent state of version {version}: "
            f"agent={state.get('agent')!r} version={state.get('version')!r}"
        )
    request = request_from_openai(state["request"])
    context = state.get("context")
    if context is not None and not isinstance(context, Mapping):
        raise AgentError(f"a {agent} agent state's context must be an object, got {type(context).__name__}")
    return ConversationState(request.messages, int(state["turn"]), int(state["format_errors"]), context)


class ResumableConversation:
    """The conversation an agent keeps between steps, and its ``state()`` / ``load_state()``: an agent
    loaded with a state re-issues the same pending request first, then goes on as the original would
    have. Subclasses name themselves (``AGENT``, ``STATE_VERSION``) and send through ``_ask``."""

    AGENT: ClassVar[str]
    STATE_VERSION: ClassVar[int] = 1

    def _init_conversation(self, llm: LLMClient, context: ContextConfig | None) -> None:
        self.llm = llm
        self._messages: list[Message] | None = None
        self._turn = 0
        self._format_errors = 0
        self._pending: LLMRequest | None = None
        self._context = ContextManager(context, llm)

    def state(self) -> dict[str, Any]:
        """The agent as it waits for its LLM: the pending request (its whole conversation), counters
        and, with a context budget, its compaction state (JSON)."""
        context = self._context.state() if self._context.config is not None else None
        return save_state(
            self.AGENT, self.STATE_VERSION, self._pending, self._turn, self._format_errors, context
        )

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Resume from ``state()`` on the next ``run()`` (before it starts)."""
        saved = load_state(self.AGENT, self.STATE_VERSION, state)
        self._messages = list(saved.messages)
        self._turn = saved.turn
        self._format_errors = saved.format_errors
        self._context.load(saved.context, turn=saved.turn)

    async def _ask(self, request: LLMRequest) -> LLMResponse:
        """The LLM's reply to ``request``, kept pending meanwhile (a snapshot re-issues it)."""
        self._pending = request
        response = await self.llm(request)
        self._pending = None
        self._turn += 1
        return response
