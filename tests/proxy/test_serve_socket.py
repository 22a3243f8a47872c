"""A session served alone on an extra listening socket (as handed over from a sandbox's namespace)."""

from __future__ import annotations

import socket

import httpx
import openai
import pytest
from proxy_kit import DONE, ScriptedPolicy

from ares.llm.types import text_response
from ares.proxy import InterceptionProxy, ProxyError

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def listening_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


async def test_a_served_socket_answers_its_session_without_prefix_and_nothing_else(
    proxy: InterceptionProxy,
) -> None:
    mine = ScriptedPolicy(reply=lambda _: text_response("mine"))
    theirs = ScriptedPolicy(reply=lambda _: text_response("theirs"))
    session = proxy.open_session(mine, model="policy-x")
    other = proxy.open_session(theirs)
    sock = listening_socket()
    host, port = sock.getsockname()
    served = await proxy.serve_socket(sock, session)
    base = f"http://{host}:{port}"
    async with openai.AsyncOpenAI(base_url=f"{base}/v1", api_key="-", max_retries=0) as client:
        reply = await client.chat.completions.create(**CHAT)  # type: ignore[call-overload]
        assert reply.choices[0].message.content == "mine"
        assert [m.id async for m in client.models.list()] == ["m"]  # the model the agent last asked for

    async with httpx.AsyncClient(base_url=base) as http:
        assert (await http.get("/health")).json() == {"ok": True, "sessions": 1, "calls_in_flight": 0}
        for path in (f"/s/{other.id}/v1/chat/completions", f"/s/{session.id}/v1/chat/completions"):
            response = await http.post(path, json=CHAT)
            assert response.status_code == 404
        session.close()
        response = await http.post("/v1/chat/completions", json=CHAT)
        assert response.status_code == 400 and response.json()["error"]["code"] == "session_closed"
    assert len(theirs.seen) == 0 and len(mine.seen) == 1

    await served.close()
    await served.close()
    with pytest.raises(OSError):
        socket.create_connection((host, port), timeout=5).close()


async def test_serve_socket_checks_its_arguments(proxy: InterceptionProxy) -> None:
    session = proxy.open_session(ScriptedPolicy(DONE))
    with socket.socket() as unbound, pytest.raises(ProxyError, match="listening"):
        await proxy.serve_socket(unbound, session)
    stranger = InterceptionProxy().open_session(ScriptedPolicy(DONE))
    with listening_socket() as sock, pytest.raises(ProxyError, match="not open on this proxy"):
        await proxy.serve_socket(sock, stranger)


async def test_stopping_the_proxy_closes_served_sockets() -> None:
    async with InterceptionProxy() as proxy:
        sock = listening_socket()
        address = sock.getsockname()
        await proxy.serve_socket(sock, proxy.open_session(ScriptedPolicy(DONE)))
    with pytest.raises(OSError):
        socket.create_connection(address, timeout=5).close()
