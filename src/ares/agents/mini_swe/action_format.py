"""How scripted policies (oracle, null) speak mini-swe-agent's action language.

With tool calls (mini v2's default) a command is a ``bash`` tool call whose JSON arguments hold it
verbatim, so any command survives. In text mode it is a ```mswea_bash_command block that mini finds
with a non-greedy regex: the block ends at the first line starting with three backticks, so a command
holding such a line cannot be expressed and is refused (``PolicyError``) rather than sent cut short.
"""

from __future__ import annotations

import hashlib
import json
import re

from ares.agents.mini_swe.config import TEXT_ACTION_REGEX, Actions
from ares.errors import PolicyError
from ares.llm.types import LLMResponse, ToolCall

#: The command mini's prompts tell the model to run to finish (its output starts with the marker).
SUBMIT_COMMAND = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
_TEXT_FENCE = "mswea_bash_command"


class MiniSweActionFormat:
    """Replies mini parses as running one command; ``action_regex`` is the text mode's parser."""

    def __init__(self, actions: Actions = "toolcall", action_regex: str | None = None) -> None:
        self.actions = actions
        self._regex = re.compile(action_regex or TEXT_ACTION_REGEX, re.DOTALL)

    def command(self, command: str) -> LLMResponse:
        if self.actions == "text":
            return self._text(command)
        # A stable id (replays and snapshots stay byte-identical); it only pairs the call with its result.
        call_id = "call_" + hashlib.sha256(command.encode()).hexdigest()[:16]
        call = ToolCall(id=call_id, name="bash", arguments=json.dumps({"command": command}))
        return LLMResponse(
            content="Running the next command.", tool_calls=(call,), finish_reason="tool_calls"
        )

    def submit(self) -> LLMResponse:
        return self.command(SUBMIT_COMMAND)

    def _text(self, command: str) -> LLMResponse:
        text = f"THOUGHT: Running the next command.\n\n```{_TEXT_FENCE}\n{command}\n```"
        found = [a.strip() for a in self._regex.findall(text)]
        if found != [command.strip()]:
            raise PolicyError(
                "this command cannot be sent as one mini-swe-agent text action (mini's action regex would "
                "read it differently, e.g. it has a line starting with ```); use actions='toolcall'"
            )
        return LLMResponse(content=text)
