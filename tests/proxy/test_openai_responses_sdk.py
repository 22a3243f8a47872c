"""The official OpenAI SDK's Responses client, pointed at a proxy session, over loopback."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import openai
import pytest
from openai.types.responses import Response
from proxy_kit import (
    DONE,
    RESULTS,
    STREAMED,
    SYSTEM,
    TASK,
    TOOLS_CHAT,
    TWO_CALLS,
    TWO_CALLS_DECODED,
    ScriptedPolicy,
    assert_policy_saw_both_turns,
    openai_sdk,
    without_parsed,
)

from ares.llm.openai_responses import request_from_responses, request_to_responses
from ares.proxy import InterceptionProxy

TOOLS = [{"type": "function", **t["function"], "strict": False} for t in TOOLS_CHAT]


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
    kw: dict[str, Any] = {"model": "gpt-test", "instructions": SYSTEM, "tools": TOOLS, "store": False}
    async with openai_sdk(session) as client:
        history: list[Any] = [{"role": "user", "content": TASK}]
        first = await create(client, stream=stream, input=history, **kw)
        assert first.output_text == "Let me look at both."
        assert calls_of(first) == TWO_CALLS_DECODED
        assert first.status == "completed"
        assert first.usage is not None and (first.usage.input_tokens, first.usage.output_tokens) == (120, 31)

        history += [item.model_dump(exclude_none=True) for item in first.output]
        history += [{"type": "function_call_output", "call_id": i, "output": out} for i, out in RESULTS]
        second = await create(client, stream=stream, input=history, **kw)
        assert second.output_text == "The test passes now."
        assert calls_of(second) == []

    assert_policy_saw_both_turns(policy.seen, session, "openai_responses")
    # Responses carries arguments as strings: the policy sees the very calls it made, to the byte
    assert [c for m in policy.seen[1].messages for c in m.tool_calls] == list(TWO_CALLS.tool_calls)


async def test_the_tagged_observation_still_round_trips_through_the_converter(
    proxy: InterceptionProxy,
) -> None:
    policy = ScriptedPolicy(DONE)
    session = proxy.open_session(policy)
    async with openai_sdk(session) as client:
        await client.responses.create(model="m", instructions=SYSTEM, input=TASK, tools=TOOLS)  # type: ignore[arg-type]
    observed = policy.seen[0]
    assert request_from_responses(request_to_responses(observed)) == observed


async def test_a_stream_carries_exactly_the_non_streaming_answer(proxy: InterceptionProxy) -> None:
    answer = replace(STREAMED, id="resp_fixed")
    session = proxy.open_session(ScriptedPolicy(reply=lambda _: answer))
    async with openai_sdk(session) as client:
        whole = await create(client, stream=False, model="m", input=TASK)
        assembled = await create(client, stream=True, model="m", input=TASK)
        events = [e async for e in await client.responses.create(model="m", input=TASK, stream=True)]
    assert without_parsed(assembled.model_dump()) == whole.model_dump()
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    assert {"response.output_text.delta", "response.function_call_arguments.delta"} <= set(kinds)
    assert [e.sequence_number for e in events] == list(range(len(events)))
