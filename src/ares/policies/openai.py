"""A policy backed by an OpenAI-compatible endpoint: the agent's request is forwarded as is."""

from __future__ import annotations

from typing import Any

from ares.llm.openai_client import OpenAIChatClient
from ares.policies.client import ClientPolicy, ClientPolicyFactory, VersionSource

#: The OpenAI-compatible policy is the generic client policy with an ``OpenAIChatClient``.
OpenAIPolicy = ClientPolicy
OpenAIPolicyFactory = ClientPolicyFactory


def openai_policy_factory(
    *, client: OpenAIChatClient | None = None, policy_version: VersionSource = None, **options: Any
) -> ClientPolicyFactory:
    """A factory for ``OpenAIPolicy``; ``options`` go to ``OpenAIChatClient.from_env``.

    Options: ``base_url``, ``api_key``, ``api_key_env`` (the variable to read the key from),
    ``model``, ``timeout_s``, ``max_tokens``, ``temperature``, ``max_retries``, ``backoff_s``,
    ``max_connections``; unset ones come from ``OPENAI_*`` environment variables. ``max_tokens`` and
    ``temperature`` replace what the agent asks for. Pass ``client`` instead to share an existing
    client. ``policy_version`` (a value, or a callable such as the trainer's step counter) stamps
    answers that do not carry the version that made them.
    """
    if client is not None and options:
        raise TypeError("pass either client= or client options, not both")
    chosen = client if client is not None else OpenAIChatClient.from_env(**options)
    return ClientPolicyFactory(chosen, policy_version)
