"""The official OpenAI SDK's Responses client, pointed at a proxy session, over loopback."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from ares.llm.openai_responses import request_from_responses, request_to_responses
from openai.types.responses import Response
from proxy_kit import DONE, TOOLS_CHAT, TWO_CALLS, ScriptedPolicy, without_parsed

from ares.llm.types import LLMResponse, ToolCall, Usage
from ares.proxy import METADATA_KEY, InterceptionProxy, ProxySession

INSTRUCTIONS = "You are a careful software engineer."
TASK = "Make the failing test pass."
TOOLS = [{"type": "function", **t["function"], "strict": False} for t in TOOLS_CHAT]


def sdk(session: ProxySession) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=session.openai_base_url, api_key="unused", max_retries=0)


async def create(client: openai.AsyncOpenAI, *, stream: bool, **kw: Any) -> Response:
    if not stream:
        return await client.responses.create(**kw)
    async with client.responses.stream(**kw) as events:
        return await events.get_final_response()


def calls_of(response: Response) -> list[tuple[str, str, Any]]:
    items = [i for i in response.output if i.type == "function_call"]
    return [(i.call_id, i.name, json.loads(i.arguments)) for i in items]


@pytest.mark.parametrize("stream", [False, True])
async def test_tool_calls_and_their_results_round_trip(proxy: InterceptionProxy, stream: bool) -> None:
    policy = ScriptedPolicy(TWO_CALLS, DONE)
    session = proxy.open_session(policy)
    kw: dict[str, Any] = {"model": "gpt-test", "instructions": INSTRUCTIONS, "tools": TOOLS, "store": False}
    async with sdk(session) as client:
        history: list[Any] = [{"role": "user", "content": TASK}]
        first = await create(client, stream=stream, input=history, **kw)
        assert first.output_text == "Let me look at both."
        assert calls_of(first) == [
            ("call_read", "read_file", {"path": "app.py"}),
            ("call_bash", "bash", {"command": "pytest -q"}),
        ]
        assert first.status == "completed"
        assert first.usage is not None and (first.usage.input_tokens, first.usage.output_tokens) == (120, 31)

        history += [item.model_dump(exclude_none=True) for item in first.output]
        history.append(
            {"type": "function_call_output", "call_id": "call_read", "output": "def f(): return 1"}
        )
        history.append({"type": "function_call_output", "call_id": "call_bash", "output": "1 failed"})
        second = await create(client, stream=stream, input=history, **kw)
        assert second.output_text == "The test passes now."
        assert calls_of(second) == []

    seen = policy.seen
    assert [r.system_prompt for r in seen] == [INSTRUCTIONS, INSTRUCTIONS]
    assert [(t["function"]["name"], t["function"]["parameters"]) for t in seen[0].tools] == [
        (t["function"]["name"], t["function"]["parameters"]) for t in TOOLS_CHAT
    ]
    assert seen[0].messages[0].text == TASK
    assert [c for m in seen[1].messages for c in m.tool_calls] == list(TWO_CALLS.tool_calls)
    results = [(m.tool_call_id, m.text) for m in seen[1].messages if m.role == "tool"]
    assert results == [("call_read", "def f(): return 1"), ("call_bash", "1 failed")]
    assert seen[0].metadata[METADATA_KEY] == {"dialect": "openai_responses", "session": session.id}


async def test_the_tagged_observation_still_round_trips_through_the_converter(
    proxy: InterceptionProxy,
) -> None:
    policy = ScriptedPolicy(DONE)
    session = proxy.open_session(policy)
    async with sdk(session) as client:
        await client.responses.create(model="m", instructions=INSTRUCTIONS, input=TASK, tools=TOOLS)  # type: ignore[arg-type]
    observed = policy.seen[0]
    assert request_from_responses(request_to_responses(observed)) == observed


async def test_a_stream_carries_exactly_the_non_streaming_answer(proxy: InterceptionProxy) -> None:
    answer = LLMResponse(
        content="Two calls.",
        tool_calls=(ToolCall("c1", "bash", '{"command": "ls"}'), ToolCall("c2", "bash", "{}")),
        finish_reason="tool_calls",
        usage=Usage(10, 5),
        id="resp_fixed",
        model="policy-1",
    )
    session = proxy.open_session(ScriptedPolicy(reply=lambda _: answer))
    async with sdk(session) as client:
        whole = await create(client, stream=False, model="m", input=TASK)
        assembled = await create(client, stream=True, model="m", input=TASK)
        events = [e async for e in await client.responses.create(model="m", input=TASK, stream=True)]
    assert without_parsed(assembled.model_dump()) == whole.model_dump()
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    assert {"response.output_text.delta", "response.function_call_arguments.delta"} <= set(kinds)
    assert [e.sequence_number for e in events] == list(range(len(events)))
