"""The terminal agent: keystrokes into a tmux session in the sandbox, screen captures back."""

from ares.agents.terminal.action_format import TerminalActionFormat, script_command
from ares.agents.terminal.agent import TerminalAgent, TerminalAgentConfig, TerminalAgentFactory
from ares.agents.terminal.keys import Command, Key, Reply, keys_of, parse_reply
from ares.agents.terminal.tmux import TmuxMissingError, TmuxSession

__all__ = [
    "Command",
    "Key",
    "Reply",
    "TerminalActionFormat",
    "TerminalAgent",
    "TerminalAgentConfig",
    "TerminalAgentFactory",
    "TmuxMissingError",
    "TmuxSession",
    "keys_of",
    "parse_reply",
    "script_command",
]
