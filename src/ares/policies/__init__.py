"""Policies: the other side of the loop (oracle, null, scripted, local, OpenAI-compatible and API models)."""

from __future__ import annotations

from typing import Any

from ares.errors import UnknownPresetError
from ares.policies.base import Policy, PolicyFactory
from ares.policies.scripted import ReplayPolicy, null_policy, oracle_policy, scripted_policy_factory

#: Policies that call a hosted model: they take --model, --base-url, --api-key-env, --max-tokens, ...
API_POLICIES = ("openai", "openai-sdk", "openai-responses", "anthropic")
#: The local GGUF policy (extra ``local``); ``local:/path/model.gguf`` names another model file.
LOCAL_POLICY = "local"
#: Options of the local policy besides its model: --temperature and --max-tokens.
LOCAL_OPTIONS = ("max_tokens", "temperature")
POLICY_NAMES = ("oracle", "null", "scripted", *API_POLICIES, LOCAL_POLICY)


def split_policy(spec: str) -> tuple[str, dict[str, Any]]:
    """A policy spec's name and options: ``local:/m.gguf`` -> ``("local", {"model_path": "/m.gguf"})``."""
    name, sep, arg = spec.partition(":")
    if name == LOCAL_POLICY and sep:
        if not arg:
            raise UnknownPresetError("local:PATH needs a GGUF file path, e.g. local:/models/model.gguf")
        return name, {"model_path": arg}
    return spec, {}


def make_policy(name: str, **options: Any) -> PolicyFactory:
    """A policy factory by name; options are the policy's settings (e.g. script=..., model=...)."""
    name, spec_options = split_policy(name)
    options = {**spec_options, **options}
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
    if name == LOCAL_POLICY:
        from ares.policies.local import local_policy_factory

        return local_policy_factory(**options)
    if name == "openai":
        from ares.policies.openai import openai_policy_factory

        return openai_policy_factory(**options)
    if name in API_POLICIES:
        from ares.policies.sdk import sdk_policy_factory

        return sdk_policy_factory(name, **options)
    raise UnknownPresetError(f"unknown policy {name!r}; choose one of: {', '.join(POLICY_NAMES)}")


__all__ = [
    "API_POLICIES",
    "LOCAL_OPTIONS",
    "LOCAL_POLICY",
    "POLICY_NAMES",
    "Policy",
    "PolicyFactory",
    "ReplayPolicy",
    "make_policy",
    "null_policy",
    "oracle_policy",
    "scripted_policy_factory",
    "split_policy",
]
