"""mini-swe-agent (``pip install 'ares[mswea]'``) as an ARES code agent: mini's own loop, prompts and
parser, with ARES at its model and environment seams.

``MiniSweConfig`` and ``MiniSweActionFormat`` import without mini-swe-agent; ``MiniSweAgentFactory`` and
``MiniSweAgent`` need it (importing them without it raises ImportError naming the extra).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ares.agents.mini_swe.action_format import SUBMIT_COMMAND, MiniSweActionFormat
from ares.agents.mini_swe.config import Actions, MiniSweConfig, Transport

if TYPE_CHECKING:
    from ares.agents.mini_swe.agent import MiniSweAgent, MiniSweAgentFactory

__all__ = [
    "SUBMIT_COMMAND",
    "Actions",
    "MiniSweActionFormat",
    "MiniSweAgent",
    "MiniSweAgentFactory",
    "MiniSweConfig",
    "Transport",
]

_NEEDS_MINI = frozenset({"MiniSweAgent", "MiniSweAgentFactory"})


def __getattr__(name: str) -> Any:
    if name in _NEEDS_MINI:
        from ares.agents.mini_swe import agent

        return getattr(agent, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
