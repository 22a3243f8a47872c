"""The saved state of a conversational agent between two LLM calls (``StatefulAgent``).

The bash and the tool-calling agent keep the same things: the pending request (which holds the whole
conversation), two counters and the context manager's compaction state (absent in states saved
before it existed, which load as never compacted). The request is stored in the OpenAI Chat wire
form, which is lossless and plain JSON, so a state can be written anywhere a snapshot goes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ares.errors import AgentError
from ares.llm.openai_chat import request_from_openai, request_to_openai
from ares.llm.types import LLMRequest, Message


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
