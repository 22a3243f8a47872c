"""Each stream encoder, read by the official SDK's own stream accumulator, gives back the whole answer.

A tiny loopback server answers any call with one canned wire object, as JSON or as the encoder's
SSE stream, so wire features no converter emits yet (thinking blocks, citations, reasoning items,
refusals, several choices) are covered too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anthropic
import openai
from aiohttp import web
from openai.lib.streaming.chat import ChatCompletionStreamState
from proxy_kit import without_parsed

from ares.proxy import stream_anthropic, stream_chat, stream_responses

Encoder = Callable[[Mapping[str, Any], Mapping[str, Any]], Iterator[bytes]]

ANTHROPIC_MESSAGE: dict[str, Any] = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-x",
    "content": [
        {"type": "thinking", "thinking": "Look at the file first.", "signature": "sig=="},
        {"type": "redacted_thinking", "data": "opaque"},
        {
            "type": "text",
            "text": "Per the docs, yes.",
            "citations": [
                {
                    "type": "char_location",
                    "cited_text": "yes",
                    "document_index": 0,
                    "document_title": "docs",
                    "start_char_index": 0,
                    "end_char_index": 3,
                }
            ],
        },
        {
            "type": "tool_use",
            "id": "toolu_1",
            "name": "bash",
            "input": {"command": "ls", "flags": ["-l", "-a"]},
        },
        {"type": "tool_use", "id": "toolu_2", "name": "noop", "input": {}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 42, "output_tokens": 17, "cache_read_input_tokens": 5},
}

RESPONSES_OBJECT: dict[str, Any] = {
    "id": "resp_1",
    "object": "response",
    "created_at": 1,
    "status": "completed",
    "model": "gpt-x",
    "output": [
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Think."}]},
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [
                {"type": "output_text", "text": "Hello.", "annotations": []},
                {"type": "refusal", "refusal": "Not that part."},
            ],
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "bash",
            "arguments": '{"command": "ls"}',
            "status": "completed",
        },
    ],
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
    "usage": {
        "input_tokens": 3,
        "output_tokens": 4,
        "total_tokens": 7,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens_details": {"reasoning_tokens": 1},
    },
}

CHAT_COMPLETION: dict[str, Any] = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 5,
    "model": "gpt-x",
    "system_fingerprint": "fp_1",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "First.", "refusal": None},
            "logprobs": None,
            "finish_reason": "stop",
        },
        {
            "index": 1,
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            "logprobs": None,
            "finish_reason": "tool_calls",
        },
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
}


@asynccontextmanager
async def canned(answer: Mapping[str, Any], encode: Encoder) -> AsyncIterator[str]:
    """A loopback server answering every POST with ``answer``, streamed when the body asks for it."""

    async def handle(request: web.Request) -> web.Response:
        body = await request.json()
        if body.get("stream"):
            return web.Response(body=b"".join(encode(answer, body)), content_type="text/event-stream")
        return web.json_response(answer)

    app = web.Application()
    app.router.add_post("/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


async def test_anthropic_stream_rebuilds_thinking_citations_and_tool_inputs() -> None:
    async with (
        canned(ANTHROPIC_MESSAGE, stream_anthropic.encode) as url,
        anthropic.AsyncAnthropic(base_url=url, api_key="-", max_retries=0) as client,
    ):
        kw: dict[str, Any] = {
            "model": "m",
            "max_tokens": 9,
            "messages": [{"role": "user", "content": "q"}],
        }
        whole = await client.messages.create(**kw)
        async with client.messages.stream(**kw) as events:
            assembled = await events.get_final_message()
    assert assembled.model_dump() == whole.model_dump()
    assert whole.model_dump(exclude_none=True) == {
        k: v for k, v in ANTHROPIC_MESSAGE.items() if v is not None
    }


async def test_responses_stream_rebuilds_reasoning_refusals_and_calls() -> None:
    async with (
        canned(RESPONSES_OBJECT, stream_responses.encode) as url,
        openai.AsyncOpenAI(base_url=url, api_key="-", max_retries=0) as client,
    ):
        whole = await client.responses.create(model="m", input="q")
        async with client.responses.stream(model="m", input="q") as events:
            streamed = [event async for event in events]
            assembled = await events.get_final_response()
    assert without_parsed(assembled.model_dump()) == whole.model_dump()
    deltas = {kind: "" for kind in ("output_text", "refusal", "function_call_arguments")}
    for event in streamed:
        for kind in deltas:
            if event.type == f"response.{kind}.delta":
                deltas[kind] += event.delta  # type: ignore[union-attr]
    assert deltas == {
        "output_text": "Hello.",
        "refusal": "Not that part.",
        "function_call_arguments": '{"command": "ls"}',
    }
    assert [e.sequence_number for e in streamed] == list(range(len(streamed)))


async def test_chat_stream_rebuilds_every_choice() -> None:
    async with (
        canned(CHAT_COMPLETION, stream_chat.encode) as url,
        openai.AsyncOpenAI(base_url=url, api_key="-", max_retries=0) as client,
    ):
        whole = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}])
        state: ChatCompletionStreamState[None] = ChatCompletionStreamState()
        chunks = await client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "q"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        async for chunk in chunks:
            state.handle_chunk(chunk)
        assembled = state.get_final_completion()
    assert [c.message.content for c in assembled.choices] == ["First.", None]
    assert [c.finish_reason for c in assembled.choices] == ["stop", "tool_calls"]
    assert assembled.choices[1].message.tool_calls[0].id == "c1"  # type: ignore[index]
    assert assembled.usage == whole.usage and assembled.system_fingerprint == "fp_1"
