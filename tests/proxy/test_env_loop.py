"""The proxy inside an environment loop: a black-box agent on the OpenAI SDK, stepped by a policy.

The session's client is the environment's ``InterceptedLLMClient``: each HTTP call the agent makes
is the next observation (``next_request``), and the action (``respond``) is what the agent's SDK
returns, exactly the reset/step hand-off of ``CodeEnvironment``.
"""

from __future__ import annotations

import asyncio
import json

import openai
import pytest
from proxy_kit import TOOLS_CHAT

from ares.llm.interceptor import AgentFinished, InterceptedLLMClient
from ares.llm.types import LLMResponse, ToolCall, text_response
from ares.proxy import METADATA_KEY, InterceptionProxy


async def black_box_agent(base_url: str) -> str:
    """A tiny tool-calling agent that only knows an OpenAI base URL (as a CLI agent would)."""
    files = {"app.py": "def answer(): return 41"}
    messages: list[dict[str, object]] = [
        {"role": "system", "content": "Fix the bug."},
        {"role": "user", "content": "answer() must return 42"},
    ]
    async with openai.AsyncOpenAI(base_url=base_url, api_key="-", max_retries=0) as llm:
        for _ in range(10):
            reply = await llm.chat.completions.create(
                model="agent-model", messages=messages, tools=TOOLS_CHAT
            )  # type: ignore[arg-type]
            message = reply.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                return message.content or ""
            for call in message.tool_calls:
                path = json.loads(call.function.arguments)["path"]  # type: ignore[union-attr]
                messages.append(
                    {"role": "tool", "tool_call_id": call.id, "content": files.get(path, "missing")}
                )
    return "gave up"


async def test_reset_and_step_drive_a_black_box_agent_through_the_proxy(proxy: InterceptionProxy) -> None:
    llm = InterceptedLLMClient()
    session = proxy.open_session(llm)
    agent = asyncio.create_task(black_box_agent(session.openai_base_url))
    llm.watch(agent)

    # reset: the agent's first call is the first observation
    observation = await asyncio.wait_for(llm.next_request(), 10)
    assert observation.system_prompt == "Fix the bug." and observation.tools == tuple(TOOLS_CHAT)
    assert observation.metadata[METADATA_KEY]["session"] == session.id
    read = ToolCall("call_1", "read_file", '{"path": "app.py"}')
    llm.respond(LLMResponse(content=None, tool_calls=(read,), finish_reason="tool_calls"))

    # step: the tool result comes back as the next observation
    observation = await asyncio.wait_for(llm.next_request(), 10)
    tool_result = observation.messages[-1]
    assert (tool_result.role, tool_result.tool_call_id, tool_result.text) == (
        "tool",
        "call_1",
        "def answer(): return 41",
    )
    llm.respond(text_response("Change 41 to 42."))

    # the agent is done: the environment sees AgentFinished, the agent its answer
    with pytest.raises(AgentFinished):
        await asyncio.wait_for(llm.next_request(), 10)
    assert await agent == "Change 41 to 42."
    assert session.calls_served == 2
    session.close()
    llm.close()


async def test_closing_the_environment_mid_call_fails_the_agent_call_cleanly(
    proxy: InterceptionProxy,
) -> None:
    llm = InterceptedLLMClient()
    session = proxy.open_session(llm)
    agent = asyncio.create_task(black_box_agent(session.openai_base_url))
    llm.watch(agent)
    await asyncio.wait_for(llm.next_request(), 10)
    llm.close()  # the environment goes away while the agent waits for its answer
    with pytest.raises(openai.APIStatusError) as caught:
        await agent
    assert caught.value.status_code == 503 and "cancelled the call" in caught.value.message
