"""Agents ARES did not write, run in the sandbox and stepped through the LLM interception proxy."""

from ares.agents.external.agent import (
    ExternalAgent,
    ExternalAgentConfig,
    ExternalAgentFactory,
    tool_loop_cli,
)

__all__ = ["ExternalAgent", "ExternalAgentConfig", "ExternalAgentFactory", "tool_loop_cli"]
