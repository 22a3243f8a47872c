"""Bad input, failing or silent policies, and shutdown: every call gets a clear JSON error, none hangs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest
from proxy_kit import DONE, ScriptedPolicy, Stuck, eventually

from ares.errors import LLMError
from ares.llm.types import LLMRequest, LLMResponse
from ares.proxy import InterceptionProxy, ProxyError

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
async def http(proxy: InterceptionProxy) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=proxy.url, timeout=30) as client:
        yield client


def openai_error(response: httpx.Response) -> dict[str, Any]:
    assert response.headers["content-type"].startswith("application/json")
    assert response.headers["x-should-retry"] == "false"
    error: dict[str, Any] = response.json()["error"]
    assert set(error) >= {"message", "type", "code"}
    return error


async def test_malformed_json_is_a_400_naming_the_problem(
    proxy: InterceptionProxy, http: httpx.AsyncClient
) -> None:
    session = proxy.open_session(ScriptedPolicy(DONE))
    response = await http.post(
        f"/s/{session.id}/v1/chat/completions", content=b'{"model": "m", "messages": ['
    )
    assert response.status_code == 400
    error = openai_error(response)
    assert "not valid JSON" in error["message"] and error["code"] == "malformed_json"
    assert error["type"] == "invalid_request_error"


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ([1, 2], "JSON object"),
        ({"model": "m", "messages": "hi"}, "messages"),
        ({"model": "m", "messages": [{"role": "wizard", "content": "hi"}]}, "messages[0].role"),
        ({**CHAT, "stream": "yes"}, "stream"),
    ],
)
async def test_a_body_of_the_wrong_shape_is_a_400_naming_the_path(
    proxy: InterceptionProxy, http: httpx.AsyncClient, body: object, named: str
) -> None:
    policy = ScriptedPolicy(DONE)
    session = proxy.open_session(policy)
    response = await http.post(f"/s/{session.id}/v1/chat/completions", json=body)
    assert response.status_code == 400
    assert named in openai_error(response)["message"]
    assert policy.seen == []


async def test_unknown_and_closed_sessions_are_400s(
    proxy: InterceptionProxy, http: httpx.AsyncClient
) -> None:
    response = await http.post("/s/no-such-session/v1/chat/completions", json=CHAT)
    assert response.status_code == 400
    error = openai_error(response)
    assert error["code"] == "unknown_session" and "no-such-session" in error["message"]

    session = proxy.open_session(ScriptedPolicy(DONE))
    session.close()
    response = await http.post(f"/s/{session.id}/v1/chat/completions", json=CHAT)
    assert response.status_code == 400 and openai_error(response)["code"] == "unknown_session"


async def test_errors_on_anthropic_routes_have_the_anthropic_shape(http: httpx.AsyncClient) -> None:
    response = await http.post("/s/nope/v1/messages", json={"model": "m", "max_tokens": 5, "messages": []})
    assert response.status_code == 400
    body = response.json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert "nope" in body["error"]["message"]


async def test_unknown_routes_and_methods_are_json_404_and_405(http: httpx.AsyncClient) -> None:
    response = await http.post("/v1/chat/completions", json=CHAT)  # no session prefix on the main site
    assert response.status_code == 404 and openai_error(response)["type"] == "not_found_error"
    response = await http.get("/s/abc/v1/chat/completions")
    assert response.status_code == 405 and "GET" in openai_error(response)["message"]
    response = await http.get("/s/abc/v1/messages/batches", headers={"anthropic-version": "2023-06-01"})
    assert response.status_code == 404 and response.json()["error"]["type"] == "not_found_error"


async def test_an_oversized_body_is_a_413() -> None:
    async with InterceptionProxy(max_body_bytes=1024) as proxy, httpx.AsyncClient(base_url=proxy.url) as http:
        policy = ScriptedPolicy(DONE)
        session = proxy.open_session(policy)
        big = {**CHAT, "messages": [{"role": "user", "content": "x" * 4096}]}
        response = await http.post(f"/s/{session.id}/v1/chat/completions", json=big)
        assert response.status_code == 413
        assert "max_body_bytes=1024" in openai_error(response)["message"]
        # the connection and the session are still usable
        response = await http.post(f"/s/{session.id}/v1/chat/completions", json=CHAT)
        assert (
            response.status_code == 200
            and response.json()["choices"][0]["message"]["content"] == DONE.content
        )


async def test_a_policy_that_never_answers_gets_a_504_and_is_cancelled() -> None:
    stuck = Stuck()
    async with InterceptionProxy(call_timeout_s=0.2) as proxy:
        session = proxy.open_session(stuck)
        # default max_retries: the proxy's x-should-retry header keeps the SDK from asking again
        async with openai.AsyncOpenAI(base_url=session.openai_base_url, api_key="-") as client:
            with pytest.raises(openai.APIStatusError) as caught:
                await client.chat.completions.create(**CHAT)  # type: ignore[call-overload]
        assert caught.value.status_code == 504
        assert "call_timeout_s=0.2" in caught.value.message
        assert (stuck.calls, stuck.cancelled) == (1, 1)
        assert (session.calls_served, session.calls_failed, session.calls_in_flight) == (0, 1, 0)


class Failing:
    def __init__(self, error: Exception | None) -> None:
        self.error = error

    async def __call__(self, request: LLMRequest) -> LLMResponse:
        if self.error is None:
            return "not a response"  # type: ignore[return-value]
        raise self.error


@pytest.mark.parametrize(
    ("client", "status", "text"),
    [
        (Failing(LLMError("upstream said 429 twice")), 502, "LLMError: upstream said 429 twice"),
        (Failing(RuntimeError("bug in the policy")), 500, "RuntimeError: bug in the policy"),
        (Failing(None), 500, "returned str, not an LLMResponse"),
    ],
)
async def test_a_failing_client_is_a_5xx_with_its_error_text(
    proxy: InterceptionProxy, http: httpx.AsyncClient, client: Failing, status: int, text: str
) -> None:
    session = proxy.open_session(client)
    response = await http.post(f"/s/{session.id}/v1/chat/completions", json=CHAT)
    assert response.status_code == status
    error = openai_error(response)
    assert text in error["message"] and error["type"] == "server_error"


async def test_closing_a_session_fails_its_pending_and_queued_calls(
    proxy: InterceptionProxy, http: httpx.AsyncClient
) -> None:
    stuck = Stuck()
    session = proxy.open_session(stuck)
    other = proxy.open_session(ScriptedPolicy(DONE))
    url = f"/s/{session.id}/v1/chat/completions"
    pending = [asyncio.create_task(http.post(url, json=CHAT)) for _ in range(2)]
    await eventually(lambda: session.calls_in_flight == 2 and stuck.calls == 1, "two calls pending")
    assert (await http.get("/health")).json() == {"ok": True, "sessions": 2, "calls_in_flight": 2}
    session.close()
    for response in await asyncio.gather(*pending):
        assert response.status_code == 503
        assert "was closed" in openai_error(response)["message"]
    assert stuck.calls == 1  # the queued call never reached the policy
    assert proxy.sessions == (other,)
    response = await http.post(f"/s/{other.id}/v1/chat/completions", json=CHAT)
    assert response.status_code == 200


async def test_stop_fails_pending_calls_returns_and_leaks_no_task() -> None:
    before = asyncio.all_tasks()
    stuck = Stuck()
    proxy = InterceptionProxy()
    await proxy.start()
    session = proxy.open_session(stuck)
    async with httpx.AsyncClient(base_url=session.openai_base_url, timeout=30) as http:
        pending = [asyncio.create_task(http.post("/chat/completions", json=CHAT)) for _ in range(3)]
        await eventually(lambda: session.calls_in_flight == 3 and stuck.calls == 1, "three calls pending")
        await proxy.stop()
        responses = await asyncio.gather(*pending)
    assert [r.status_code for r in responses] == [503, 503, 503]
    assert all("proxy is stopping" in openai_error(r)["message"] for r in responses)
    assert stuck.cancelled == 1
    await asyncio.sleep(0)
    assert asyncio.all_tasks() == before
    with pytest.raises(ProxyError):
        proxy.open_session(stuck)
    with pytest.raises(httpx.ConnectError):
        async with httpx.AsyncClient() as http:
            await http.get(f"{proxy.url}/health")


async def test_calls_of_one_session_are_served_one_after_another(
    proxy: InterceptionProxy, http: httpx.AsyncClient
) -> None:
    active = 0

    async def one_at_a_time(request: LLMRequest) -> LLMResponse:
        nonlocal active
        active += 1
        assert active == 1, "the proxy let two calls of one session reach the client at once"
        await asyncio.sleep(0.01)
        active -= 1
        return LLMResponse(content=request.messages[0].text.upper())

    session = proxy.open_session(one_at_a_time)
    url = f"/s/{session.id}/v1/chat/completions"
    bodies = [{"model": "m", "messages": [{"role": "user", "content": f"call {i}"}]} for i in range(5)]
    responses = await asyncio.gather(*(http.post(url, json=b) for b in bodies))
    assert [r.json()["choices"][0]["message"]["content"] for r in responses] == [
        f"CALL {i}" for i in range(5)
    ]
    assert session.calls_served == 5


def test_bad_arguments_raise_proxy_errors() -> None:
    with pytest.raises(ProxyError, match="call_timeout_s"):
        InterceptionProxy(call_timeout_s=0)
    proxy = InterceptionProxy()
    with pytest.raises(ProxyError, match="start"):
        _ = proxy.url
    proxy.open_session(ScriptedPolicy(), session_id="episode-1")
    with pytest.raises(ProxyError, match="already open"):
        proxy.open_session(ScriptedPolicy(), session_id="episode-1")
    with pytest.raises(ProxyError, match="session_id"):
        proxy.open_session(ScriptedPolicy(), session_id="../etc")
