"""A policy backed by an OpenAI-compatible endpoint: the agent's request is forwarded as is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ares import tracing
from ares.agents.base import ActionFormat
from ares.llm.openai_client import OpenAIChatClient
from ares.llm.types import LLMRequest, LLMResponse
from ares.policies.base import Policy
from ares.tasks.model import Task


@dataclass(frozen=True, slots=True)
class OpenAIPolicy:
    """Answers each observation by asking the client's model; stateless, so episodes may share it."""

    client: OpenAIChatClient

    async def act(self, observation: LLMRequest) -> LLMResponse:
        model = self.client.model or observation.model or ""
        with tracing.span("policy.http", cat="policy", level="full", model=model):
            return await self.client(observation)


@dataclass(frozen=True, slots=True)
class OpenAIPolicyFactory:
    """A PolicyFactory whose episodes share one client (one connection pool, one model)."""

    client: OpenAIChatClient

    def __call__(self, task: Task, action_format: ActionFormat) -> Policy:
        return OpenAIPolicy(self.client)

    async def aclose(self) -> None:
        """Close the shared client once no episode needs it any more."""
        await self.client.aclose()


def openai_policy_factory(*, client: OpenAIChatClient | None = None, **options: Any) -> OpenAIPolicyFactory:
    """A factory for ``OpenAIPolicy``; ``options`` go to ``OpenAIChatClient.from_env``.

    Options: ``base_url``, ``api_key``, ``api_key_env`` (the variable to read the key from),
    ``model``, ``timeout_s``, ``max_tokens``, ``temperature``, ``max_retries``, ``backoff_s``,
    ``max_connections``; unset ones come from ``OPENAI_*`` environment variables. ``max_tokens`` and
    ``temperature`` replace what the agent asks for. Pass ``client`` instead to share an existing
    client.
    """
    if client is not None and options:
        raise TypeError("pass either client= or client options, not both")
    return OpenAIPolicyFactory(client if client is not None else OpenAIChatClient.from_env(**options))
