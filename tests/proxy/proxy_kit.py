"""Helpers of the proxy tests: a scripted policy client, canned policy answers and the SDK tests' exchange.

Each vendor SDK test plays the same two-turn exchange (a task, two tool calls, their results, a final
answer) in its own dialect; the script and what the policy must see of it live here once.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import anthropic
import openai

from ares.llm.types import LLMRequest, LLMResponse, ToolCall, Usage
from ares.proxy import METADATA_KEY, ProxySession

SYSTEM = "You are a careful software engineer."
TASK = "Make the failing test pass."

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
TWO_CALLS_DECODED = [(c.id, c.name, json.loads(c.arguments)) for c in TWO_CALLS.tool_calls]
"""``TWO_CALLS``' tool calls as (id, name, decoded arguments): how every SDK shows them to the agent."""
RESULTS = [("call_read", "def f(): return 1"), ("call_bash", "1 failed")]
"""The agent's (tool call id, output) for ``TWO_CALLS``, sent back on the second turn."""
DONE = LLMResponse(content="The test passes now.", finish_reason="stop", usage=Usage(200, 7))
STREAMED = LLMResponse(
    content="Two calls.",
    tool_calls=(ToolCall("c1", "bash", '{"command": "ls", "n": [1, 2]}'), ToolCall("c2", "bash", "{}")),
    finish_reason="tool_calls",
    usage=Usage(10, 5),
    model="policy-1",
)
"""An answer whose stream and whole forms the SDK tests compare (each sets a dialect-like ``id``)."""


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


def openai_sdk(session: ProxySession) -> openai.AsyncOpenAI:
    """The official OpenAI client, pointed at ``session``; no retries: each call reaches the policy once."""
    return openai.AsyncOpenAI(base_url=session.openai_base_url, api_key="unused", max_retries=0)


def anthropic_sdk(session: ProxySession) -> anthropic.AsyncAnthropic:
    """The official Anthropic client, pointed at ``session``; no retries, as for ``openai_sdk``."""
    return anthropic.AsyncAnthropic(base_url=session.anthropic_base_url, api_key="unused", max_retries=0)


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


def assert_policy_saw_both_turns(seen: list[LLMRequest], session: ProxySession, dialect: str) -> None:
    """The policy saw the exchange: system prompt, tools, task, ``TWO_CALLS``, ``RESULTS``, session tag."""
    assert [r.system_prompt for r in seen] == [SYSTEM, SYSTEM]
    assert [(t["function"]["name"], t["function"]["parameters"]) for t in seen[0].tools] == [
        (t["function"]["name"], t["function"]["parameters"]) for t in TOOLS_CHAT
    ]
    assert seen[0].messages[0].text == TASK
    # compared as JSON values: a dialect that carries tool inputs as objects re-serializes them
    calls = [(c.id, c.name, json.loads(c.arguments)) for m in seen[1].messages for c in m.tool_calls]
    assert calls == TWO_CALLS_DECODED
    assert [(m.tool_call_id, m.text) for m in seen[1].messages if m.role == "tool"] == RESULTS
    assert seen[0].metadata[METADATA_KEY] == {"dialect": dialect, "session": session.id}
