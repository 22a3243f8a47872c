"""mini's own config file, loaded once per factory and checked before any episode starts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from ares.agents.mini_swe import _mini
from ares.agents.mini_swe.config import TEXT_ACTION_REGEX, MiniSweConfig


@dataclass(frozen=True, slots=True)
class MiniSettings:
    """The sections of a mini config that the ARES adapters read."""

    #: Keyword arguments of mini's ``DefaultAgent`` (its ``AgentConfig`` fields).
    agent: Mapping[str, Any]
    #: mini's ``model`` section: templates, ``model_kwargs`` (sampling), ``action_regex``...
    model: Mapping[str, Any]
    #: Environment variables every command runs with (the ``environment.env`` section).
    env_vars: Mapping[str, str]

    @property
    def action_regex(self) -> str:
        return str(self.model.get("action_regex", TEXT_ACTION_REGEX))

    @property
    def observation_template(self) -> str:
        return str(self.model["observation_template"])

    @property
    def format_error_template(self) -> str:
        return str(self.model.get("format_error_template", "{{ error }}"))

    @property
    def multimodal_regex(self) -> str:
        return str(self.model.get("multimodal_regex", ""))


def load_settings(config: MiniSweConfig) -> MiniSettings:
    """Read ``config.config_spec`` with mini's loader, merge the overrides and validate the result."""
    try:
        raw = _mini.get_config_from_spec(config.config_spec)
    except FileNotFoundError as exc:
        raise ValueError(f"mini-swe-agent config not found: {exc}") from None
    merged = _mini.recursive_merge(raw, dict(config.overrides))
    agent = dict(merged.get("agent") or {})
    model = dict(merged.get("model") or {})
    environment = dict(merged.get("environment") or {})
    where = f"mini-swe-agent config {config.config_spec!r}"
    try:
        _mini.AgentConfig(**agent)
    except ValidationError as exc:
        raise ValueError(f"{where}: invalid agent section: {exc}") from None
    if "observation_template" not in model:
        raise ValueError(f"{where} has no model.observation_template; mini cannot show command output")
    env_vars = environment.get("env") or {}
    if not isinstance(env_vars, Mapping):
        raise ValueError(f"{where}: environment.env must be a mapping, got {type(env_vars).__name__}")
    return MiniSettings(agent=agent, model=model, env_vars={str(k): str(v) for k, v in env_vars.items()})
