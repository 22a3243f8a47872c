"""Helpers of the proxy tests: a scripted policy client and canned policy answers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from ares.llm.types import LLMRequest, LLMResponse, ToolCall, Usage

TOOLS_CHAT = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the repository",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a shell command",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
            },
        },
    },
]

TWO_CALLS = LLMResponse(
    content="Let me look at both.",
    tool_calls=(
        ToolCall("call_read", "read_file", '{"path": "app.py"}'),
        ToolCall("call_bash", "bash", '{"command": "pytest -q"}'),
    ),
    finish_reason="tool_calls",
    usage=Usage(prompt_tokens=120, completion_tokens=31),
)
DONE = LLMResponse(content="The test passes now.", finish_reason="stop", usage=Usage(200, 7))


class ScriptedPolicy:
    """An ``LLMClient`` that records each request and answers with ``answers`` in turn (or ``reply``)."""

    def __init__(
        self, *answers: LLMResponse, reply: Callable[[LLMRequest], LLMResponse] | None = None
    ) -> None:
        self.seen: list[LLMRequest] = []
        self._script = list(answers)
        self._reply = reply

    async def __call__(self, request: LLMRequest) -> LLMResponse:
        self.seen.append(request)
        await asyncio.sleep(0)
        return self._reply(request) if self._reply is not None else self._script.pop(0)


class Stuck:
    """An ``LLMClient`` that never answers (until cancelled), counting how often it was called."""

    def __init__(self) -> None:
        self.calls = 0
        self.cancelled = 0

    async def __call__(self, request: LLMRequest) -> LLMResponse:
        self.calls += 1
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        raise AssertionError("unreachable")


def without_parsed(value: Any) -> Any:
    """``value`` (a dumped SDK object) without the ``parsed*`` fields only the SDKs' stream helpers add."""
    if isinstance(value, dict):
        return {k: without_parsed(v) for k, v in value.items() if k not in ("parsed", "parsed_arguments")}
    if isinstance(value, list):
        return [without_parsed(v) for v in value]
    return value


async def eventually(condition: Callable[[], bool], what: str) -> None:
    """Wait (a bounded while) until ``condition()`` holds: for state other tasks reach on their own."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never happened: {what}")
