"""Coding CLIs (Codex CLI, Claude Code, OpenCode) as ARES agents: installed from npm into a cached
add-on layer, run headless in the sandbox, every LLM call stepped through the interception proxy."""

from __future__ import annotations

import importlib
import os

from ares.agents.coding_clis.agent import CliAgent, CliAgentFactory
from ares.agents.coding_clis.definition import CliDefinition, CliInvocation, CliPaths
from ares.errors import UnknownPresetError

#: The CLIs ARES knows: preset name -> module under ``ares.agents.coding_clis``.
CLI_MODULES = {"codex": "codex", "claude-code": "claude_code", "opencode": "opencode"}


def cli_definition(cli: str, version: str | None = None) -> CliDefinition:
    """``cli`` at ``version`` (default: ``$ARES_<CLI>_VERSION``, else the version ARES pins)."""
    if cli not in CLI_MODULES:
        raise UnknownPresetError(f"unknown CLI agent {cli!r}; known: {', '.join(CLI_MODULES)}")
    module = importlib.import_module(f"ares.agents.coding_clis.{CLI_MODULES[cli]}")
    version = version or os.environ.get(version_variable(cli)) or None
    return module.definition(version)


def version_variable(cli: str) -> str:
    """The environment variable that overrides ``cli``'s pinned version (``ARES_CLAUDE_CODE_VERSION``)."""
    return f"ARES_{cli.upper().replace('-', '_')}_VERSION"


def cli_agent(cli: str, version: str | None = None) -> CliAgentFactory:
    """The agent factory of ``cli`` (see ``cli_definition``)."""
    return CliAgentFactory(cli_definition(cli, version))


__all__ = [
    "CLI_MODULES", "CliAgent", "CliAgentFactory", "CliDefinition", "CliInvocation", "CliPaths",
    "cli_agent", "cli_definition", "version_variable",
]  # fmt: skip
