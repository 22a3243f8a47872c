"""The one place mini-swe-agent is imported: a missing package fails here, with the install hint.

mini prints a banner when imported unless ``MSWEA_SILENT_STARTUP`` is set; a library must not write to
the user's terminal, so it is set (only if the user has not chosen otherwise) before the import.
"""

from __future__ import annotations

import os

os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")

try:
    from minisweagent import __version__
    from minisweagent.agents.default import AgentConfig, DefaultAgent
    from minisweagent.config import get_config_from_spec
    from minisweagent.exceptions import FormatError, Submitted
    from minisweagent.models.utils.actions_text import format_observation_messages, parse_regex_actions
    from minisweagent.models.utils.actions_toolcall import (
        BASH_TOOL,
        format_toolcall_observation_messages,
        parse_toolcall_actions,
    )
    from minisweagent.models.utils.openai_multimodal import expand_multimodal_content
    from minisweagent.utils.serialize import recursive_merge
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        f"the mini-swe-agent code agent needs the mini-swe-agent package ({exc}): pip install 'ares[mswea]'"
    ) from exc

__all__ = [
    "BASH_TOOL",
    "AgentConfig",
    "DefaultAgent",
    "FormatError",
    "Submitted",
    "__version__",
    "expand_multimodal_content",
    "format_observation_messages",
    "format_toolcall_observation_messages",
    "get_config_from_spec",
    "parse_regex_actions",
    "parse_toolcall_actions",
    "recursive_merge",
]
