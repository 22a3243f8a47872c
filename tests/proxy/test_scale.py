"""Many sessions through one proxy at once, each with its own client.

The callers use aiohttp's client: httpx's connection pool slows down badly with hundreds of
concurrent connections, which would measure the client rather than the proxy.
"""

from __future__ import annotations

import asyncio

import aiohttp
from proxy_kit import ScriptedPolicy

from ares.llm.types import LLMRequest, LLMResponse
from ares.proxy import InterceptionProxy, ProxySession

SESSIONS = 200
TURNS = 3


def echo(session_index: int) -> ScriptedPolicy:
    def reply(request: LLMRequest) -> LLMResponse:
        return LLMResponse(content=f"{session_index}:{request.messages[-1].text}")

    return ScriptedPolicy(reply=reply)


async def episode(http: aiohttp.ClientSession, session: ProxySession) -> list[str]:
    answers = []
    for turn in range(TURNS):
        body = {"model": "m", "messages": [{"role": "user", "content": f"turn {turn}"}]}
        async with http.post(f"/s/{session.id}/v1/chat/completions", json=body) as response:
            response.raise_for_status()
            answers.append((await response.json())["choices"][0]["message"]["content"])
    return answers


async def test_200_concurrent_sessions_each_get_their_own_answers(proxy: InterceptionProxy) -> None:
    sessions = [proxy.open_session(echo(i)) for i in range(SESSIONS)]
    connector = aiohttp.TCPConnector(limit=SESSIONS)
    async with aiohttp.ClientSession(base_url=proxy.url, connector=connector) as http:
        results = await asyncio.gather(*(episode(http, s) for s in sessions))
    assert results == [[f"{i}:turn {t}" for t in range(TURNS)] for i in range(SESSIONS)]
    assert all(s.calls_served == TURNS and s.calls_in_flight == 0 for s in sessions)
    assert len({s.id for s in sessions}) == SESSIONS
