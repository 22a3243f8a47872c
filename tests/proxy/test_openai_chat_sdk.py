"""The official OpenAI SDK's Chat Completions client, pointed at a proxy session, over loopback."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import openai
import pytest
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletion
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
)

from ares.llm.openai_chat import request_from_openai, request_to_openai
from ares.proxy import InterceptionProxy


async def streamed(client: openai.AsyncOpenAI, **kw: Any) -> ChatCompletion:
    """A streamed completion put back together the way the SDK's own stream helper does."""
    state: ChatCompletionStreamState[None] = ChatCompletionStreamState()
    async for chunk in await client.chat.completions.create(stream=True, **kw):
        state.handle_chunk(chunk)
    return state.get_final_completion()


def without_helper_fields(completion: ChatCompletion) -> dict[str, Any]:
    """The completion the stream helper assembled, minus the fields only that helper adds."""
    dumped = completion.model_dump(exclude={"object"})
    for choice in dumped["choices"]:
        choice["message"].pop("parsed", None)
        for call in choice["message"]["tool_calls"] or ():
            call.pop("index")
            call["function"].pop("parsed_arguments")
    return dumped


def first_turn() -> list[dict[str, Any]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]


@pytest.mark.parametrize("stream", [False, True])
async def test_tool_calls_and_their_results_round_trip(proxy: InterceptionProxy, stream: bool) -> None:
    policy = ScriptedPolicy(TWO_CALLS, DONE)
    session = proxy.open_session(policy)
    async with openai_sdk(session) as client:
        messages = first_turn()
        kw: dict[str, Any] = {"model": "gpt-test", "tools": TOOLS_CHAT, "temperature": 0.2}
        if stream:
            first = await streamed(client, messages=messages, **kw)
        else:
            first = await client.chat.completions.create(messages=messages, **kw)  # type: ignore[arg-type]

        message = first.choices[0].message
        assert message.content == "Let me look at both."
        assert first.choices[0].finish_reason == "tool_calls"
        calls = [(c.id, c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls or ()]
        assert calls == TWO_CALLS_DECODED
        assert first.model == "gpt-test"  # the policy named none: the caller's model is echoed
        if not stream:  # the SDK's stream helper drops usage unless include_usage was asked
            assert first.usage is not None and (first.usage.prompt_tokens, first.usage.completion_tokens) == (
                120,
                31,
            )

        messages.append(message.model_dump(exclude_none=True))  # type: ignore[arg-type]
        messages += [{"role": "tool", "tool_call_id": i, "content": out} for i, out in RESULTS]
        second = await client.chat.completions.create(messages=messages, **kw)  # type: ignore[arg-type]
        assert second.choices[0].message.content == "The test passes now."
        assert second.choices[0].finish_reason == "stop"

    assert_policy_saw_both_turns(policy.seen, session, "openai_chat")
    # Chat is the policy's own dialect: tools and calls arrive unchanged, results right after the call
    seen = policy.seen
    assert seen[0].tools == tuple(TOOLS_CHAT) and seen[0].sampling.temperature == 0.2
    assistant, *results = seen[1].messages[1:]
    assert assistant.tool_calls == TWO_CALLS.tool_calls
    assert [(m.role, m.tool_call_id, m.text) for m in results] == [("tool", i, out) for i, out in RESULTS]
    assert session.calls_served == 2


async def test_the_tagged_observation_still_round_trips_through_the_converter(
    proxy: InterceptionProxy,
) -> None:
    policy = ScriptedPolicy(DONE)
    session = proxy.open_session(policy)
    async with openai_sdk(session) as client:
        await client.chat.completions.create(model="m", messages=first_turn(), tools=TOOLS_CHAT)  # type: ignore[arg-type]
    observed = policy.seen[0]
    assert request_from_openai(request_to_openai(observed)) == observed


async def test_a_stream_carries_exactly_the_non_streaming_answer(proxy: InterceptionProxy) -> None:
    answer = replace(STREAMED, usage=None, id="chatcmpl-fixed", logprobs=(-0.5, -0.25))
    session = proxy.open_session(ScriptedPolicy(reply=lambda _: answer))
    async with openai_sdk(session) as client:
        whole = await client.chat.completions.create(model="m", messages=first_turn())  # type: ignore[arg-type]
        assembled = await streamed(client, model="m", messages=first_turn())
    assert without_helper_fields(assembled) == whole.model_dump(exclude={"object"})


async def test_a_raw_stream_has_role_text_tool_deltas_finish_usage_and_done(proxy: InterceptionProxy) -> None:
    session = proxy.open_session(ScriptedPolicy(TWO_CALLS))
    async with openai_sdk(session) as client:
        chunks = [
            c
            async for c in await client.chat.completions.create(
                model="m",
                messages=first_turn(),  # type: ignore[arg-type]
                stream=True,
                stream_options={"include_usage": True},
            )
        ]
    assert {c.object for c in chunks} == {"chat.completion.chunk"}
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[0].choices[0].delta.content == "Let me look at both."
    tool_deltas = [
        c.choices[0].delta.tool_calls[0] for c in chunks if c.choices and c.choices[0].delta.tool_calls
    ]
    assert [(d.index, d.id, d.function.name) for d in tool_deltas] == [  # type: ignore[union-attr]
        (0, "call_read", "read_file"),
        (1, "call_bash", "bash"),
    ]
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (120, 31)
    assert len({c.id for c in chunks}) == 1


async def test_models_lists_the_session_model(proxy: InterceptionProxy) -> None:
    session = proxy.open_session(ScriptedPolicy(DONE), model="policy-under-test")
    async with openai_sdk(session) as client:
        models = [m.id async for m in client.models.list()]
    assert models == ["policy-under-test"]
