"""OpenAIChatClient and OpenAIPolicy against a real HTTP server on loopback serving canned replies."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from ares.errors import LLMError, MalformedResponseError
from ares.llm.openai_chat import METADATA_KEY
from ares.llm.openai_client import DEFAULT_BASE_URL, LLMHTTPError, OpenAIChatClient
from ares.llm.types import LLMRequest, SamplingParams, ToolCall, user
from ares.policies.openai import OpenAIPolicy, openai_policy_factory
from ares.tasks.model import Task
from fake_openai import COMPLETION, FakeOpenAI, Reply

UNAUTHORIZED = {
    "error": {
        "message": "Incorrect API key provided: sk-wrong. You can find your API key at ...",
        "type": "invalid_request_error",
        "code": "invalid_api_key",
    }
}


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    fake.start()
    yield fake
    fake.stop()


def client_for(server: FakeOpenAI, **options: Any) -> OpenAIChatClient:
    options = {"api_key": "sk-test", "model": "policy-model", "backoff_s": 0.01, **options}
    return OpenAIChatClient(base_url=server.base_url, **options)


REQUEST = LLMRequest(
    messages=(user("list the files"),),
    system_prompt="You are a shell agent.",
    model="the-agents-own-model",
    sampling=SamplingParams(temperature=0.0, max_tokens=256),
    tools=({"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}},),
    prompt_token_ids=(1, 2, 3),
    metadata={"episode": 3},
    extra={"stream": True, "stream_options": {"include_usage": True}},
)


async def test_call_sends_a_clean_body_and_parses_the_reply(server: FakeOpenAI) -> None:
    async with client_for(server) as client:
        resp = await client(REQUEST)
    assert resp.tool_calls == (ToolCall("call_x1", "bash", '{"command":"ls -la"}'),)
    assert resp.finish_reason == "tool_calls" and resp.usage is not None and resp.usage.total_tokens == 98
    assert resp.model == "gpt-4o-mini-2024-07-18"
    [sent] = server.received
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.body == {
        "model": "policy-model",
        "messages": [
            {"role": "system", "content": "You are a shell agent."},
            {"role": "user", "content": "list the files"},
        ],
        "tools": [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}],
        "temperature": 0.0,
        "max_tokens": 256,
    }
    assert METADATA_KEY not in sent.body


async def test_request_model_is_used_when_the_client_has_none(server: FakeOpenAI) -> None:
    async with client_for(server, model=None, api_key=None) as client:
        await client(REQUEST)
    assert server.received[0].body["model"] == "the-agents-own-model"
    assert "authorization" not in server.received[0].headers


async def test_no_model_anywhere_is_a_clear_error(server: FakeOpenAI) -> None:
    async with client_for(server, model=None) as client:
        with pytest.raises(LLMError, match="OPENAI_MODEL"):
            await client(LLMRequest(messages=(user("hi"),)))
    assert server.received == []


async def test_500_then_200_is_retried(server: FakeOpenAI) -> None:
    server.then(Reply(500, {"error": {"message": "The server had an error"}}), Reply())
    async with client_for(server) as client:
        resp = await client(REQUEST)
    assert resp.id == COMPLETION["id"] and len(server.received) == 2


async def test_429_honours_retry_after(server: FakeOpenAI) -> None:
    server.then(Reply(429, {"error": {"message": "Rate limit reached"}}, headers={"Retry-After": "0.05"}))
    async with client_for(server, backoff_s=10.0) as client:
        started = time.monotonic()
        await client(REQUEST)
    assert len(server.received) == 2 and 0.04 <= time.monotonic() - started < 5


async def test_persistent_5xx_gives_up_with_status_and_excerpt(server: FakeOpenAI) -> None:
    server.then(*[Reply(503, {"error": {"message": "overloaded " * 200}})] * 3)
    async with client_for(server, max_retries=2) as client:
        with pytest.raises(LLMHTTPError, match=r"HTTP 503 \(3 attempt") as info:
            await client(REQUEST)
    assert info.value.status == 503 and "overloaded" in info.value.body and len(info.value.body) <= 500
    assert len(server.received) == 3


async def test_401_is_not_retried(server: FakeOpenAI) -> None:
    server.then(Reply(401, UNAUTHORIZED))
    async with client_for(server) as client:
        with pytest.raises(LLMHTTPError, match="OPENAI_API_KEY") as info:
            await client(REQUEST)
    assert info.value.status == 401 and "Incorrect API key" in info.value.body
    assert len(server.received) == 1


async def test_wrong_path_404_hints_at_the_base_url(server: FakeOpenAI) -> None:
    client = OpenAIChatClient(base_url=server.base_url.removesuffix("/v1"), model="m")
    async with client:
        with pytest.raises(LLMHTTPError, match="OPENAI_BASE_URL") as info:
            await client(REQUEST)
    assert info.value.status == 404


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (b"<html><body>502 Bad Gateway</body></html>", "not JSON"),
        ({"id": "x", "object": "chat.completion", "choices": []}, "choices is empty"),
        ({"choices": [{"message": {"content": 42}}]}, "content must be a string"),
        (UNAUTHORIZED, "error object"),
    ],
)
async def test_malformed_200_bodies_raise(server: FakeOpenAI, body: Any, match: str) -> None:
    server.then(Reply(200, body))
    async with client_for(server) as client:
        with pytest.raises(MalformedResponseError, match=match):
            await client(REQUEST)
    assert len(server.received) == 1


async def test_slow_response_times_out(server: FakeOpenAI) -> None:
    server.then(Reply(delay_s=3.0))
    async with client_for(server, timeout_s=0.3, max_retries=0) as client:
        started = time.monotonic()
        with pytest.raises(LLMError, match=r"timed out after 0\.3s"):
            await client(REQUEST)
    assert time.monotonic() - started < 2.0


async def test_timeout_is_retried(server: FakeOpenAI) -> None:
    server.then(Reply(delay_s=3.0), Reply())
    async with client_for(server, timeout_s=0.5, max_retries=1) as client:
        resp = await client(REQUEST)
    assert resp.finish_reason == "tool_calls" and len(server.received) == 2


async def test_connection_refused_is_retried_then_reported() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = OpenAIChatClient(
        base_url=f"http://127.0.0.1:{port}/v1", model="m", max_retries=2, backoff_s=0.01
    )
    async with client:
        with pytest.raises(LLMError, match=r"could not reach .*3 attempt"):
            await client(REQUEST)


async def test_concurrent_calls_share_one_client(server: FakeOpenAI) -> None:
    async with client_for(server) as client:
        responses = await asyncio.gather(*(client(REQUEST) for _ in range(16)))
    assert {r.id for r in responses} == {COMPLETION["id"]} and len(server.received) == 16


async def test_closed_client_refuses_calls(server: FakeOpenAI) -> None:
    client = client_for(server)
    await client(REQUEST)
    await client.aclose()
    with pytest.raises(LLMError, match="closed"):
        await client(REQUEST)


def test_from_env_reads_openai_variables_and_explicit_options_win() -> None:
    env = {
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1/",
        "OPENAI_API_KEY": "sk-env",
        "OPENAI_MODEL": "env-model",
    }
    client = OpenAIChatClient.from_env(env=env)
    assert (client.base_url, client.model, client.url) == (
        "http://127.0.0.1:9/v1",
        "env-model",
        "http://127.0.0.1:9/v1/chat/completions",
    )
    assert "sk-env" not in repr(client)
    assert OpenAIChatClient.from_env(model="explicit", env=env).model == "explicit"
    assert (
        OpenAIChatClient.from_env(env={"OPENAI_MODEL": "m", "OPENAI_API_KEY": "k"}).base_url
        == DEFAULT_BASE_URL
    )


def test_from_env_names_what_is_missing() -> None:
    with pytest.raises(LLMError, match="OPENAI_MODEL"):
        OpenAIChatClient.from_env(env={"OPENAI_API_KEY": "k"})
    with pytest.raises(LLMError, match="OPENAI_API_KEY"):
        OpenAIChatClient.from_env(env={"OPENAI_MODEL": "gpt-4o"})
    assert (
        OpenAIChatClient.from_env(base_url="http://localhost:8000/v1", env={"OPENAI_MODEL": "m"}).model == "m"
    )
    with pytest.raises(LLMError, match="http"):
        OpenAIChatClient(base_url="localhost:8000/v1")


async def test_policy_factory_shares_one_client_across_episodes(server: FakeOpenAI) -> None:
    factory = openai_policy_factory(base_url=server.base_url, model="policy-model", api_key="k")
    task = Task(id="t1", instruction="do it", tests={"test.sh": "exit 0"})
    first, second = factory(task, action_format=None), factory(task, action_format=None)  # type: ignore[arg-type]
    assert isinstance(first, OpenAIPolicy) and isinstance(second, OpenAIPolicy)
    assert first.client is second.client is factory.client
    resp = await first.act(REQUEST)
    assert resp.tool_calls[0].name == "bash" and server.received[0].body["model"] == "policy-model"
    await factory.aclose()
    with pytest.raises(LLMError, match="closed"):
        await second.act(REQUEST)
