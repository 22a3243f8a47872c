"""Policies: the other side of the loop (oracle, null, scripted, OpenAI-compatible and vendor API models)."""

from __future__ import annotations

from typing import Any

from ares.errors import UnknownPresetError
from ares.policies.base import Policy, PolicyFactory
from ares.policies.scripted import ReplayPolicy, null_policy, oracle_policy, scripted_policy_factory

#: Policies that call a hosted model: they take --model, --base-url, --api-key-env, --max-tokens, ...
API_POLICIES = ("openai", "openai-sdk", "openai-responses", "anthropic")
POLICY_NAMES = ("oracle", "null", "scripted", *API_POLICIES)


def make_policy(name: str, **options: Any) -> PolicyFactory:
    """A policy factory by name; options are the policy's settings (e.g. script=..., model=...)."""
    if name == "oracle":
        return oracle_policy
    if name == "null":
        return null_policy
    if name == "scripted":
        if "script" not in options:
            raise UnknownPresetError(
                "the scripted policy needs a script: --script FILE.jsonl (script= in Python)"
            )
        return scripted_policy_factory(options["script"])
    if name == "openai":
        from ares.policies.openai import openai_policy_factory

        return openai_policy_factory(**options)
    if name in API_POLICIES:
        from ares.policies.sdk import sdk_policy_factory

        return sdk_policy_factory(name, **options)
    raise UnknownPresetError(f"unknown policy {name!r}; choose one of: {', '.join(POLICY_NAMES)}")


__all__ = [
    "API_POLICIES",
    "POLICY_NAMES",
    "Policy",
    "PolicyFactory",
    "ReplayPolicy",
    "make_policy",
    "null_policy",
    "oracle_policy",
    "scripted_policy_factory",
]
