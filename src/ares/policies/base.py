"""The Policy seam: the other side of the loop, answering each LLMRequest with an LLMResponse."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from ares.agents.base import ActionFormat
from ares.llm.tokens import TokenRenderer
from ares.llm.types import LLMRequest, LLMResponse
from ares.tasks.model import Task


class Policy(Protocol):
    """One episode's policy. Stateful policies (oracle, scripted) get a fresh instance per episode."""

    async def act(self, observation: LLMRequest) -> LLMResponse: ...


#: Builds the policy for one episode from its task and the agent's action format.
PolicyFactory = Callable[[Task, ActionFormat], Policy]


@runtime_checkable
class TokenExactPolicyFactory(Protocol):
    """A policy factory that knows its model's chat template and tokenizer (a local model's): the
    environments it plays are given its renderer, so their prompts are token exact by default."""

    def token_renderer(self) -> TokenRenderer: ...
