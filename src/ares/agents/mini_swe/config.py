"""How ARES runs mini-swe-agent: which transport, which action language, which mini config."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

#: ``in_process``: mini's model calls go straight to the ARES LLM client. ``http``: mini's own
#: LiteLLM model sends them as real HTTP requests to the ARES interception proxy.
Transport = Literal["in_process", "http"]
#: ``toolcall``: mini v2's default, a ``bash`` tool call per command. ``text``: mini's text-based
#: mode, one ```mswea_bash_command block per reply.
Actions = Literal["toolcall", "text"]

#: The mini config each action language uses unless ``config_file`` names another.
DEFAULT_CONFIG_FILES: Mapping[Actions, str] = {"toolcall": "mini.yaml", "text": "mini_textbased.yaml"}
#: The action regex of mini's text-based model when its config names none (that class's default).
TEXT_ACTION_REGEX = r"```mswea_bash_command\s*\n(.*?)\n```"


@dataclass(frozen=True, slots=True)
class MiniSweConfig:
    """Options of the mini-swe-agent code agent.

    ``config_file`` is a mini config spec: a builtin name (``"mini.yaml"``, ``"swebench.yaml"``...) or a
    path; its ``agent``, ``model`` and ``environment`` sections are used as mini uses them.
    ``overrides`` is merged over it, section by section (e.g. ``{"agent": {"step_limit": 30}}``).
    ``model`` is the model name the policy sees on each request.
    """

    transport: Transport = "in_process"
    actions: Actions = "toolcall"
    config_file: str | None = None
    overrides: Mapping[str, Any] = field(default_factory=dict)
    model: str = "mini-swe-agent"

    def __post_init__(self) -> None:
        if self.transport not in ("in_process", "http"):
            raise ValueError(f"transport must be 'in_process' or 'http', got {self.transport!r}")
        if self.actions not in ("toolcall", "text"):
            raise ValueError(f"actions must be 'toolcall' or 'text', got {self.actions!r}")
        if not self.model:
            raise ValueError("model must be a non-empty model name")

    @property
    def config_spec(self) -> str:
        return self.config_file if self.config_file is not None else DEFAULT_CONFIG_FILES[self.actions]
