"""A policy that forwards each observation to an LLM client: the shape of every API-model policy.

``openai`` (httpx, any OpenAI-compatible server) and the vendor SDK policies (``openai-sdk``,
``openai-responses``, ``anthropic``) differ only in their client; this module is what they share.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

from ares import tracing
from ares.agents.base import ActionFormat
from ares.llm.types import LLMRequest, LLMResponse
from ares.policies.base import Policy
from ares.policies.versions import VersionSource, read_version
from ares.tasks.model import Task

__all__ = ["ClientPolicy", "ClientPolicyFactory", "ClosableLLMClient", "VersionSource", "current_version"]


class ClosableLLMClient(Protocol):
    """An LLM client a policy factory owns: it answers requests and is closed once at the end."""

    @property
    def model(self) -> str | None: ...

    async def __call__(self, request: LLMRequest) -> LLMResponse: ...

    async def aclose(self) -> None: ...


#: The older name of ``ares.policies.versions.read_version``.
current_version = read_version


@dataclass(frozen=True, slots=True)
class ClientPolicy:
    """Answers each observation by asking the client's model; stateless, so episodes may share it.

    An answer that does not carry its ``policy_version`` (a server may send ``ares_policy_version``)
    is stamped with ``policy_version``'s current value."""

    client: ClosableLLMClient
    policy_version: VersionSource = None

    async def act(self, observation: LLMRequest) -> LLMResponse:
        model = self.client.model or observation.model or ""
        with tracing.span("policy.http", cat="policy", level="full", model=model):
            response = await self.client(observation)
        if response.policy_version is None and self.policy_version is not None:
            response = replace(response, policy_version=read_version(self.policy_version))
        return response

    def current_version(self) -> int | None:
        """The version a call made now would be stamped with (``VersionReporting``)."""
        return read_version(self.policy_version)


@dataclass(frozen=True, slots=True)
class ClientPolicyFactory:
    """A PolicyFactory whose episodes share one client (one connection pool, one model)."""

    client: ClosableLLMClient
    #: The version stamped on answers that carry none (see ``ClientPolicy``).
    policy_version: VersionSource = None

    def __call__(self, task: Task, action_format: ActionFormat) -> Policy:
        return ClientPolicy(self.client, self.policy_version)

    async def aclose(self) -> None:
        """Close the shared client once no episode needs it any more (the runner calls this)."""
        await self.client.aclose()
