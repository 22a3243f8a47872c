"""The official Anthropic SDK, pointed at a proxy session, over loopback."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import anthropic
import pytest
from anthropic.types import Message as AnthropicMessage
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
    anthropic_sdk,
    assert_policy_saw_both_turns,
)

from ares.llm.anthropic_messages import request_from_anthropic, request_to_anthropic
from ares.proxy import InterceptionProxy

TOOLS = [
    {"name": f["name"], "description": f["description"], "input_schema": f["parameters"]}
    for f in (t["function"] for t in TOOLS_CHAT)
]


async def create(client: anthropic.AsyncAnthropic, *, stream: bool, **kw: Any) -> AnthropicMessage:
    if not stream:
        return await client.messages.create(**kw)
    async with client.messages.stream(**kw) as events:
        return await events.get_final_message()


def tool_uses(message: AnthropicMessage) -> list[tuple[str, str, Any]]:
    return [(b.id, b.name, b.input) for b in message.content if b.type == "tool_use"]


@pytest.mark.parametrize("stream", [False, True])
async def test_tool_calls_and_their_results_round_trip(proxy: InterceptionProxy, stream: bool) -> None:
    policy = ScriptedPolicy(TWO_CALLS, DONE)
    session = proxy.open_session(policy)
    kw: dict[str, Any] = {"model": "claude-test", "system": SYSTEM, "tools": TOOLS, "max_tokens": 1024}
    async with anthropic_sdk(session) as client:
        history: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
        first = await create(client, stream=stream, messages=history, **kw)
        assert [b.text for b in first.content if b.type == "text"] == ["Let me look at both."]
        assert tool_uses(first) == TWO_CALLS_DECODED
        assert first.stop_reason == "tool_use"
        assert (first.usage.input_tokens, first.usage.output_tokens) == (120, 31)

        history.append(
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]}
        )
        results = [{"type": "tool_result", "tool_use_id": i, "content": out} for i, out in RESULTS]
        history.append({"role": "user", "content": results})
        second = await create(client, stream=stream, messages=history, **kw)
        assert [b.text for b in second.content if b.type == "text"] == ["The test passes now."]
        assert second.stop_reason == "end_turn"

    # Anthropic carries tool inputs as objects: the policy sees them re-serialized (same JSON value)
    assert_policy_saw_both_turns(policy.seen, session, "anthropic_messages")
    assert policy.seen[0].sampling.max_tokens == 1024


async def test_the_tagged_observation_still_round_trips_through_the_converter(
    proxy: InterceptionProxy,
) -> None:
    policy = ScriptedPolicy(DONE)
    session = proxy.open_session(policy)
    async with anthropic_sdk(session) as client:
        await client.messages.create(
            model="m", system=SYSTEM, max_tokens=64, tools=TOOLS, messages=[{"role": "user", "content": TASK}]
        )  # type: ignore[arg-type]
    observed = policy.seen[0]
    assert request_from_anthropic(request_to_anthropic(observed)) == observed


async def test_a_stream_carries_exactly_the_non_streaming_answer(proxy: InterceptionProxy) -> None:
    answer = replace(STREAMED, id="msg_fixed")
    session = proxy.open_session(ScriptedPolicy(reply=lambda _: answer))
    kw: dict[str, Any] = {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": TASK}]}
    async with anthropic_sdk(session) as client:
        whole = await create(client, stream=False, **kw)
        assembled = await create(client, stream=True, **kw)
        events = [e.type async for e in await client.messages.create(stream=True, **kw)]
    assert assembled.model_dump() == whole.model_dump()
    assert events[0] == "message_start" and events[-2:] == ["message_delta", "message_stop"]
    assert events.count("content_block_start") == events.count("content_block_stop") == 3


async def test_errors_reach_the_sdk_as_anthropic_errors(proxy: InterceptionProxy) -> None:
    session = proxy.open_session(ScriptedPolicy(DONE))
    async with anthropic_sdk(session) as client:
        with pytest.raises(anthropic.BadRequestError) as caught:
            await client.messages.create(
                model="m", max_tokens=5, messages=[{"role": "wizard", "content": "x"}]
            )  # type: ignore[list-item, typeddict-item]
    assert caught.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
