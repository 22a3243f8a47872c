"""Scripted actions in a CLI's own tool language, checked against the tools the CLI really offers.

``CliActionFormat.command`` is one call of the CLI's shell tool, ``submit`` a plain text answer (a
turn without tool calls ends a headless CLI run). Tool names and argument shapes belong to a CLI
version; ``check`` compares them with the tools in the request the binary actually sent, so a CLI
that renamed its tools fails the oracle with a message naming the version instead of silently
answering a call the CLI cannot run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ares.agents.tool_agent import tool_call, tool_calls_response
from ares.errors import PolicyError
from ares.llm.types import LLMRequest, LLMResponse, ToolCall

#: What a scripted policy says to end a CLI run.
FINAL_ANSWER = "Done."


def offered_tool_names(request: LLMRequest) -> list[str]:
    """The names of the tools a request offers, whatever the dialect's tool shape."""
    names = []
    for tool in request.tools:
        inner = tool.get(str(tool.get("type")))
        name = inner.get("name") if isinstance(inner, Mapping) else tool.get("name")
        if isinstance(name, str):
            names.append(name)
    return names


@dataclass(frozen=True, slots=True)
class CliActionFormat:
    """``cli`` at ``version`` (the binary that runs) runs shell commands with tool ``shell_tool``,
    whose arguments ``shell_arguments(command)`` builds; ``known_version`` is the version these
    names were taken from; ``call_type`` is ``function`` or ``custom``."""

    cli: str
    version: str
    known_version: str
    shell_tool: str
    shell_arguments: Callable[[str], Mapping[str, Any]]
    call_type: str = "function"

    def command(self, command: str) -> LLMResponse:
        call = tool_call(self.shell_tool, self.shell_arguments(command))
        if self.call_type != "function":
            call = ToolCall(id=call.id, name=call.name, arguments=call.arguments, type=self.call_type)
        return tool_calls_response(call)

    def submit(self) -> LLMResponse:
        return LLMResponse(content=FINAL_ANSWER, finish_reason="stop")

    def check(self, request: LLMRequest) -> None:
        """Raise ``PolicyError`` when ``request`` (sent by the CLI) offers tools but not ours."""
        names = offered_tool_names(request)
        if names and self.shell_tool not in names:
            raise PolicyError(
                f"{self.cli} {self.version} offers the tools {', '.join(names)}, not {self.shell_tool!r}: "
                f"ARES's scripted actions for {self.cli} were written for version {self.known_version}, "
                "and this version changed its tools (use that version, or update the CLI's action format)"
            )
