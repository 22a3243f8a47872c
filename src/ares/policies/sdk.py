"""Policies backed by hosted models through the vendors' official SDKs.

``openai-sdk`` (Chat Completions), ``openai-responses`` (Responses API) and ``anthropic`` (Messages)
forward the agent's request as is; the clients live in ``ares.llm.sdk`` behind the ``openai`` and
``anthropic`` extras.
"""

from __future__ import annotations

import importlib
from typing import Any

from ares.errors import UnknownPresetError
from ares.policies.client import ClientPolicy, ClientPolicyFactory, ClosableLLMClient, VersionSource

#: Policy name -> (module, client class) in ``ares.llm.sdk``; imported only when asked for.
SDK_POLICIES = {
    "openai-sdk": ("ares.llm.sdk.openai_sdk", "OpenAIChatSDKClient"),
    "openai-responses": ("ares.llm.sdk.openai_sdk", "OpenAIResponsesSDKClient"),
    "anthropic": ("ares.llm.sdk.anthropic_sdk", "AnthropicSDKClient"),
}
__all__ = ["SDK_POLICIES", "ClientPolicy", "ClientPolicyFactory", "ClosableLLMClient", "sdk_policy_factory"]


def sdk_policy_factory(
    name: str,
    *,
    client: ClosableLLMClient | None = None,
    policy_version: VersionSource = None,
    **options: Any,
) -> ClientPolicyFactory:
    """A factory for the ``name`` SDK policy; ``options`` go to the client's ``from_env``.

    Options: ``model``, ``base_url``, ``api_key``, ``api_key_env`` (the variable to read the key
    from; default ``OPENAI_API_KEY`` or ``ANTHROPIC_API_KEY``), ``timeout_s``, ``max_retries``,
    ``max_tokens``, ``temperature``, ``prices`` (``ares.llm.sdk.pricing.Price``, or a table of them
    by model name). Pass ``client`` instead to share an existing client. ``policy_version`` stamps
    answers with the version that made them (a value or a callable).
    """
    if name not in SDK_POLICIES:
        raise UnknownPresetError(f"unknown SDK policy {name!r}; choose one of: {', '.join(SDK_POLICIES)}")
    if client is not None:
        if options:
            raise TypeError("pass either client= or client options, not both")
        return ClientPolicyFactory(client, policy_version)
    module_name, class_name = SDK_POLICIES[name]
    client_class = getattr(importlib.import_module(module_name), class_name)
    return ClientPolicyFactory(client_class.from_env(**options), policy_version)
