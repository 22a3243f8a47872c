"""What the HTTP interception proxy costs per LLM call, against the in-process interceptor.

Both paths end at the same place: an ``InterceptedLLMClient`` whose environment side (a driver
coroutine standing in for ``env.step`` and an instant policy) answers every request with a fixed
response. The in-process path is an agent coroutine awaiting that client. The proxy path is an
agent calling ``InterceptionProxy`` over loopback HTTP, in each dialect, streaming and not: raw
aiohttp POSTs (the proxy's own cost) and the official ``openai`` / ``anthropic`` SDKs (what a real
agent adds). Caller, proxy and driver share one process and one event loop, so a figure is the full
round trip including the caller's own CPU: an upper bound on what the proxy adds to a step.

The conversation is realistic in size: ``--messages`` messages of ``--chars`` characters each (the
body the agent sends every call), answered by ``--reply-chars`` characters.

    .venv/bin/python bench/proxy.py [--calls 400] [--messages 20] [--chars 2000] [--reply-chars 400]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

from _common import machine_info, summarize_ms
from ares.llm.interceptor import AgentFinished, InterceptedLLMClient
from ares.llm.types import LLMRequest, LLMResponse, Message, Usage
from ares.proxy import InterceptionProxy

Call = Callable[[], Awaitable[object]]


async def drive(client: InterceptedLLMClient, reply: LLMResponse) -> None:
    """The environment side: read each request, answer it at once (an instant policy)."""
    while True:
        try:
            await client.next_request()
        except AgentFinished:
            return
        client.respond(reply)


async def timed(call: Call, calls: int, warmup: int) -> dict[str, float]:
    samples = []
    for i in range(warmup + calls):
        start = time.perf_counter()
        await call()
        if i >= warmup:
            samples.append(time.perf_counter() - start)
    return summarize_ms(samples)


async def measure(name: str, make_call: Callable[[InterceptedLLMClient], Call], args: argparse.Namespace,
                  reply: LLMResponse, proxy: InterceptionProxy) -> dict[str, Any]:  # fmt: skip
    client = InterceptedLLMClient()
    session = proxy.open_session(client)
    call = make_call(client) if name == "in_process" else make_call(session)  # type: ignore[arg-type]
    agent = asyncio.ensure_future(timed(call, args.calls, args.warmup))
    client.watch(agent)
    driver = asyncio.ensure_future(drive(client, reply))
    try:
        return await agent
    finally:
        await driver
        session.close()
        client.close()


def conversation(args: argparse.Namespace) -> list[dict[str, str]]:
    text = ("lorem ipsum " * (args.chars // 12 + 1))[: args.chars]
    roles = ["user", "assistant"]
    return [{"role": roles[i % 2], "content": f"{i}: {text}"} for i in range(args.messages)]


async def main(args: argparse.Namespace) -> dict[str, Any]:
    reply = LLMResponse(content="x" * args.reply_chars, usage=Usage(1000, 100), model="m")
    messages = conversation(args)
    request = LLMRequest(messages=tuple(Message(m["role"], m["content"]) for m in messages))  # type: ignore[arg-type]
    bodies = {
        "chat": ("v1/chat/completions", {"model": "m", "messages": messages}),
        "responses": ("v1/responses", {"model": "m", "input": messages}),
        "anthropic": ("v1/messages", {"model": "m", "max_tokens": 1024, "messages": messages}),
    }
    results: dict[str, Any] = {}
    async with InterceptionProxy(call_timeout_s=60) as proxy, aiohttp.ClientSession() as http:

        def raw(dialect: str, stream: bool) -> Callable[[Any], Call]:
            path, body = bodies[dialect]
            payload = json.dumps({**body, "stream": stream}).encode()

            def make(session: Any) -> Call:
                base = session.anthropic_base_url if dialect == "anthropic" else session.openai_base_url[:-3]
                url = f"{base}/{path}"

                async def call() -> object:
                    async with http.post(
                        url, data=payload, headers={"content-type": "application/json"}
                    ) as r:
                        data = await r.read()
                        assert r.status == 200, data[:500]
                        return data

                return call

            return make

        def in_process(client: InterceptedLLMClient) -> Call:
            return lambda: client(request)

        results["in_process"] = await measure("in_process", in_process, args, reply, proxy)
        for dialect in bodies:
            for stream in (False, True):
                name = f"http_{dialect}{'_stream' if stream else ''}"
                results[name] = await measure(name, raw(dialect, stream), args, reply, proxy)
        results.update(await sdk_figures(args, reply, proxy, messages))
    base = results["in_process"]["p50_ms"]
    overhead = {k: round(v["p50_ms"] - base, 3) for k, v in results.items() if k != "in_process"}
    return {
        "bench": "proxy",
        "machine": machine_info(),
        "config": vars(args),
        "per_call": results,
        "p50_overhead_vs_in_process_ms": overhead,
    }


async def sdk_figures(args: argparse.Namespace, reply: LLMResponse, proxy: InterceptionProxy,
                      messages: list[dict[str, str]]) -> dict[str, Any]:  # fmt: skip
    """The official SDKs as the caller: what a real Python agent pays on top of the raw POST."""
    try:
        import anthropic
        import openai
    except ImportError:
        return {}
    out: dict[str, Any] = {}
    for stream in (False, True):

        def openai_call(session: Any, stream: bool = stream) -> Call:
            sdk = openai.AsyncOpenAI(base_url=session.openai_base_url, api_key="x", max_retries=0)

            async def call() -> object:
                if not stream:
                    return await sdk.chat.completions.create(model="m", messages=messages)  # type: ignore[arg-type]
                chunks = await sdk.chat.completions.create(model="m", messages=messages, stream=True)  # type: ignore[arg-type]
                return [c async for c in chunks]

            return call

        def anthropic_call(session: Any, stream: bool = stream) -> Call:
            sdk = anthropic.AsyncAnthropic(base_url=session.anthropic_base_url, api_key="x", max_retries=0)

            async def call() -> object:
                if not stream:
                    return await sdk.messages.create(model="m", max_tokens=1024, messages=messages)  # type: ignore[arg-type]
                async with sdk.messages.stream(model="m", max_tokens=1024, messages=messages) as s:  # type: ignore[arg-type]
                    return await s.get_final_message()

            return call

        suffix = "_stream" if stream else ""
        out[f"sdk_openai_chat{suffix}"] = await measure("sdk", openai_call, args, reply, proxy)
        out[f"sdk_anthropic{suffix}"] = await measure("sdk", anthropic_call, args, reply, proxy)
    return out


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=40)
    parser.add_argument("--messages", type=int, default=20)
    parser.add_argument("--chars", type=int, default=2000)
    parser.add_argument("--reply-chars", type=int, default=400)
    return parser.parse_args()


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(parse())), indent=2))
