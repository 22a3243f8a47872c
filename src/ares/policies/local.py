"""A policy backed by a local GGUF model (extra ``local``): answers carry token ids and logprobs."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ares import tracing
from ares.agents.base import ActionFormat
from ares.llm.local.client import LocalChatClient
from ares.llm.local.renderer import LocalModelRenderer
from ares.llm.types import LLMRequest, LLMResponse
from ares.policies.base import Policy
from ares.policies.versions import VersionSource, read_version
from ares.tasks.model import Task


@dataclass(frozen=True, slots=True)
class LocalPolicy:
    """Answers each observation with the local model; stateless, so episodes may share it.

    Each answer is stamped with ``policy_version``'s value as it arrives (e.g. the trainer's step
    counter after it exported new weights to the GGUF file this client serves)."""

    client: LocalChatClient
    policy_version: VersionSource = None

    async def act(self, observation: LLMRequest) -> LLMResponse:
        with tracing.span("policy.local", cat="policy", level="full", model=self.client.settings.path):
            response = await self.client(observation)
        if response.policy_version is not None or self.policy_version is None:
            return response
        return replace(response, policy_version=read_version(self.policy_version))

    def current_version(self) -> int | None:
        """The version a call made now would be stamped with (``VersionReporting``)."""
        return read_version(self.policy_version)


@dataclass(frozen=True, slots=True)
class LocalPolicyFactory:
    """A picklable PolicyFactory: each process (e.g. a Ray actor) loads the model on first use."""

    client: LocalChatClient
    #: The version stamped on every answer (see ``LocalPolicy``); must pickle for Ray (a value,
    #: or a module-level callable).
    policy_version: VersionSource = None

    def __call__(self, task: Task, action_format: ActionFormat) -> Policy:
        return LocalPolicy(self.client, self.policy_version)

    def token_renderer(self) -> LocalModelRenderer:
        """The model's own template and tokenizer: give it to ``make(token_renderer=)`` so the agent's
        prompts extend the previous prompt + completion token for token."""
        return LocalModelRenderer(self.client)


def local_policy_factory(
    model_path: str | None = None, *, policy_version: VersionSource = None, **options: Any
) -> LocalPolicyFactory:
    """A factory for ``LocalPolicy``; ``model_path`` is a GGUF file (default: SmolLM2-135M-Instruct).

    ``policy_version`` stamps every answer (``LLMResponse.policy_version``). ``options`` go to
    ``LocalChatClient``: ``temperature``, ``max_tokens`` (both replace the agent's), ``sampling``,
    ``context``, ``parallel``, ``threads``, ``max_concurrency``.
    """
    return LocalPolicyFactory(LocalChatClient(model_path, **options), policy_version)
