"""Code agents: the CodeAgent seam, the one conversation loop (``loop``) and the built-in bash,
tool-calling, terminal and single-turn agents."""

from ares.agents.base import ActionFormat, AgentFactory, CodeAgent, SolutionFormat, StatefulAgent
from ares.agents.bash import (
    SUBMIT_COMMAND,
    BashActionFormat,
    BashAgent,
    BashAgentConfig,
    BashAgentFactory,
    ExitStatus,
)
from ares.agents.bash_parser import FormatError, parse_action
from ares.agents.loop import ConversationLoop, Turn
from ares.agents.single_turn import (
    SingleTurnActionFormat,
    SingleTurnAgent,
    SingleTurnAgentConfig,
    SingleTurnAgentFactory,
    SingleTurnExitStatus,
    extract_solution,
)
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
    "ConversationLoop",
    "ExitStatus",
    "FormatError",
    "SingleTurnActionFormat",
    "SingleTurnAgent",
    "SingleTurnAgentConfig",
    "SingleTurnAgentFactory",
    "SingleTurnExitStatus",
    "SolutionFormat",
    "StatefulAgent",
    "ToolActionFormat",
    "ToolAgent",
    "ToolAgentConfig",
    "ToolAgentFactory",
    "Turn",
    "extract_solution",
    "parse_action",
]
