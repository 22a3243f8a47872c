"""A policy that forwards each observation to an LLM client: the shape of every API-model policy.

``openai`` (httpx, any OpenAI-compatible server) and the vendor SDK policies (``openai-sdk``,
``openai-responses``, ``anthropic``) differ only in their client; this module is what they share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ares import tracing
from ares.agents.base import ActionFormat
from ares.llm.types import LLMRequest, LLMResponse
from ares.policies.base import Policy
from ares.tasks.model import Task


class ClosableLLMClient(Protocol):
    """An LLM client a policy factory owns: it answers requests and is closed once at the end."""

    @property
    def model(self) -> str | None: ...

    async def __call__(self, request: LLMRequest) -> LLMResponse: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True, slots=True)
class ClientPolicy:
    """Answers each observation by asking the client's model; stateless, so episodes may share it."""

    client: ClosableLLMClient

    async def act(self, observation: LLMRequest) -> LLMResponse:
        model = self.client.model or observation.model or ""
        with tracing.span("policy.http", cat="policy", level="full", model=model):
            return await self.client(observation)


@dataclass(frozen=True, slots=True)
class ClientPolicyFactory:
    """A PolicyFactory whose episodes share one client (one connection pool, one model)."""

    client: ClosableLLMClient

    def __call__(self, task: Task, action_format: ActionFormat) -> Policy:
        return ClientPolicy(self.client)

    async def aclose(self) -> None:
        """Close the shared client once no episode needs it any more (the runner calls this)."""
        await self.client.aclose()
