"""Code agents: the CodeAgent seam, the built-in bash agent and the built-in tool-calling agent."""

from ares.agents.base import ActionFormat, AgentFactory, CodeAgent, StatefulAgent
from ares.agents.bash import (
    SUBMIT_COMMAND,
    BashActionFormat,
    BashAgent,
    BashAgentConfig,
    BashAgentFactory,
    ExitStatus,
)
from ares.agents.bash_parser import FormatError, parse_action
from ares.agents.tool_agent import (
    TOOLS,
    ToolActionFormat,
    ToolAgent,
    ToolAgentConfig,
    ToolAgentFactory,
)

__all__ = [
    "SUBMIT_COMMAND",
    "TOOLS",
    "ActionFormat",
    "AgentFactory",
    "BashActionFormat",
    "BashAgent",
    "BashAgentConfig",
    "BashAgentFactory",
    "CodeAgent",
    "ExitStatus",
    "FormatError",
    "StatefulAgent",
    "ToolActionFormat",
    "ToolAgent",
    "ToolAgentConfig",
    "ToolAgentFactory",
    "parse_action",
]
