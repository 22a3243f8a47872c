"""An external agent's own compactions, found in its requests and marked like the built-in agents'."""

from __future__ import annotations

import json

import pytest

import ares
from ares.agents.context import COMPACTION_KEY, CONTEXT_KEY
from ares.agents.external import ExternalAgentConfig, ExternalAgentFactory
from ares.llm.types import LLMRequest, LLMResponse, Message, ToolCall
from ares.proxy.compaction import CompactionDetector
from ares.records.exports.turns import context_mark

pytest.importorskip("aiohttp")

TOOLS = ({"type": "function", "function": {"name": "Bash", "parameters": {"type": "object"}}},)


def req(*messages: Message, system: str = "You are a coding CLI.", **kw: object) -> LLMRequest:
    return LLMRequest(messages=messages, system_prompt=system, tools=TOOLS, **kw)  # type: ignore[arg-type]


TASK = Message("user", "fix the bug")
R1 = Message("assistant", None, tool_calls=(ToolCall("c1", "Bash", '{"command": "ls"}'),))
OUT1 = Message("tool", "a.py", tool_call_id="c1")
R2 = Message("assistant", "looking")
MORE = Message("user", "go on")


def marks(detector: CompactionDetector, *requests: LLMRequest) -> list[object]:
    return [
        (m.metadata.get(CONTEXT_KEY), m.metadata.get(COMPACTION_KEY))
        for m in (detector.mark(r) for r in requests)
    ]  # fmt: skip


def test_a_growing_conversation_and_side_calls_are_not_compactions() -> None:
    detector = CompactionDetector()
    seen = marks(
        detector, req(TASK), req(TASK, R1, OUT1),
        req(Message("user", "Write a title for: fix the bug"), system="You write titles."),  # a side call
        req(TASK, R1, OUT1, R2, MORE),
    )  # fmt: skip
    assert seen == [(None, None)] * 4 and detector.compactions == 0


def test_a_restarted_history_is_marked_compacted_and_numbered() -> None:
    summary = Message("user", "Summary of the work so far: listed files, found a.py.")
    detector = CompactionDetector()
    seen = marks(
        detector, req(TASK), req(TASK, R1, OUT1, R2, MORE),
        req(TASK, R1, OUT1, R2, MORE, Message("user", "Summarize the conversation."), system="Summarize."),
        req(summary), req(summary, R2, MORE), req(Message("user", "Summary 2")),
    )  # fmt: skip
    assert seen == [
        (None, None), (None, None), (None, None), ("compacted", 1), (None, None), ("compacted", 2)
    ]  # fmt: skip


def test_moved_cache_markers_are_not_a_rewrite() -> None:
    first = Message(
        "user", ({"type": "text", "text": "fix the bug", "cache_control": {"type": "ephemeral"}},)
    )
    again = Message("user", ({"type": "text", "text": "fix the bug"},))
    detector = CompactionDetector()
    assert marks(detector, req(first), req(again, R1, OUT1)) == [(None, None), (None, None)]


def test_requests_an_agent_marked_itself_or_holding_only_new_items_pass_unchanged() -> None:
    detector = CompactionDetector()
    detector.mark(req(TASK, R1, OUT1))
    own = req(Message("user", "s"), metadata={CONTEXT_KEY: "compacted", COMPACTION_KEY: 7})
    chained = req(MORE, extra={"previous_response_id": "resp_1"})
    assert detector.mark(own) is own and detector.mark(chained) is chained and detector.compactions == 0


#: A black-box "CLI" in the sandbox: three calls of its main thread, a side call, then it starts
#: over from a summary (as Claude Code does when its context fills), over the Anthropic API.
COMPACTING_CLI = r"""
import json, os, urllib.request
url = os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages"
tools = [{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}]
def call(system, messages, tools=tools):
    body = {"model": "m", "max_tokens": 64, "system": system, "messages": messages, "tools": tools}
    req = urllib.request.Request(url, json.dumps(body).encode(), {"content-type": "application/json"})
    return json.load(urllib.request.urlopen(req))["content"][0]["text"]
history = [{"role": "user", "content": "fix the bug"}]
for i in range(2):
    reply = call("main", history)
    history += [{"role": "assistant", "content": reply}, {"role": "user", "content": f"more {i}"}]
summary = call("Summarize.", history + [{"role": "user", "content": "Summarize."}], tools=[])
history = [{"role": "user", "content": "Summary: " + summary}]
call("main", history)
"""


async def test_an_external_agents_compaction_is_marked_in_the_episode() -> None:
    config = ExternalAgentConfig(command="python3 $ARES_AGENT_DIR/cli.py", files={"cli.py": COMPACTING_CLI})
    env = ares.make("humaneval", tasks="0", agent=ExternalAgentFactory(config))
    try:
        ts = await env.reset()
        observations = []
        while not ts.last():
            observations.append(ts.observation)
            ts = await env.step(LLMResponse(content="ok", finish_reason="stop"))
        assert env.episode is not None and env.episode.status.value == "finished"
    finally:
        await env.close()
    assert [context_mark(o) for o in observations] == [None, None, None, "compacted"]
    assert json.loads(json.dumps(observations[3].metadata[COMPACTION_KEY])) == 1
