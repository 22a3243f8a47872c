"""The in-process hand-off between a code agent coroutine and the environment."""

from __future__ import annotations

import asyncio
import gc

import pytest

from ares.errors import EnvironmentStateError
from ares.llm.interceptor import AgentFinished, InterceptedLLMClient
from ares.llm.types import LLMRequest, LLMResponse, text_response, user


def ask(text: str) -> LLMRequest:
    return LLMRequest(messages=(user(text),))


async def start(agent_body: object) -> tuple[InterceptedLLMClient, asyncio.Task[object]]:
    """An agent task driven by ``agent_body(client)``, watched by the client."""
    client = InterceptedLLMClient()
    task: asyncio.Task[object] = asyncio.create_task(agent_body(client))  # type: ignore[operator]
    client.watch(task)
    return client, task


async def test_requests_and_responses_are_handed_over_in_order() -> None:
    async def agent(llm: InterceptedLLMClient) -> list[str]:
        answers = []
        for question in ("one", "two", "three"):
            answers.append((await llm(ask(question))).content or "")
        return answers

    client, task = await start(agent)
    for expected in ("one", "two", "three"):
        request = await asyncio.wait_for(client.next_request(), 1)
        assert request.messages[0].text == expected
        client.respond(text_response(expected.upper()))
    with pytest.raises(AgentFinished):
        await asyncio.wait_for(client.next_request(), 1)
    assert await task == ["ONE", "TWO", "THREE"]


async def test_the_response_object_reaches_the_agent_unchanged() -> None:
    response = LLMResponse(content=None, token_ids=(1, 2), logprobs=(-0.1, -0.2))

    async def agent(llm: InterceptedLLMClient) -> LLMResponse:
        return await llm(ask("q"))

    client, task = await start(agent)
    await client.next_request()
    client.respond(response)
    assert await task is response


async def test_a_request_made_before_the_environment_listens_is_not_lost() -> None:
    async def agent(llm: InterceptedLLMClient) -> str | None:
        return (await llm(ask("early"))).content

    client, task = await start(agent)
    await asyncio.sleep(0.01)  # the agent has asked; nobody was waiting yet
    assert (await client.next_request()).messages[0].text == "early"
    client.respond(text_response("ok"))
    assert await task == "ok"


async def test_agent_returning_without_asking_ends_the_episode() -> None:
    async def agent(llm: InterceptedLLMClient) -> str:
        return "done"

    client, task = await start(agent)
    with pytest.raises(AgentFinished):
        await asyncio.wait_for(client.next_request(), 1)
    assert task.result() == "done"


async def test_agent_crash_ends_the_episode_and_keeps_the_error() -> None:
    async def agent(llm: InterceptedLLMClient) -> None:
        await llm(ask("q"))
        raise RuntimeError("agent bug")

    client, task = await start(agent)
    await client.next_request()
    client.respond(text_response("a"))
    with pytest.raises(AgentFinished):
        await asyncio.wait_for(client.next_request(), 1)
    assert isinstance(task.exception(), RuntimeError)


async def test_cancelling_the_waiting_agent_cancels_its_pending_call() -> None:
    async def agent(llm: InterceptedLLMClient) -> None:
        await llm(ask("q"))

    client, task = await start(agent)
    await client.next_request()
    pending = client._response_waiter
    assert pending is not None and not pending.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert pending.cancelled()
    with pytest.raises(AgentFinished):
        await asyncio.wait_for(client.next_request(), 1)
    with pytest.raises(EnvironmentStateError, match="no LLM call is waiting"):
        client.respond(text_response("too late"))


async def test_close_cancels_a_pending_call_and_refuses_new_ones() -> None:
    async def agent(llm: InterceptedLLMClient) -> None:
        await llm(ask("q"))

    client, task = await start(agent)
    await client.next_request()
    client.close()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 1)
    with pytest.raises(asyncio.CancelledError):
        await client(ask("after close"))
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(client.next_request(), 1)


async def test_close_while_the_environment_waits_wakes_it() -> None:
    async def agent(llm: InterceptedLLMClient) -> None:
        await asyncio.sleep(10)

    client, task = await start(agent)
    waiting = asyncio.create_task(client.next_request())
    await asyncio.sleep(0)
    client.close()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(waiting, 1)
    task.cancel()


async def test_respond_without_a_pending_call_is_a_state_error() -> None:
    client = InterceptedLLMClient()
    with pytest.raises(EnvironmentStateError):
        client.respond(text_response("nobody asked"))


async def test_responding_twice_is_a_state_error() -> None:
    async def agent(llm: InterceptedLLMClient) -> None:
        await llm(ask("q"))
        await asyncio.sleep(10)

    client, task = await start(agent)
    await client.next_request()
    client.respond(text_response("a"))
    with pytest.raises(EnvironmentStateError):
        client.respond(text_response("b"))
    task.cancel()


async def test_concurrent_calls_from_one_agent_are_refused() -> None:
    client = InterceptedLLMClient()
    first = asyncio.create_task(client(ask("a")))
    await asyncio.sleep(0)
    with pytest.raises(EnvironmentStateError, match="concurrent"):
        await client(ask("b"))
    first.cancel()


async def test_environment_timeout_on_next_request_does_not_poison_the_client() -> None:
    async def agent(llm: InterceptedLLMClient) -> str | None:
        await asyncio.sleep(0.05)
        return (await llm(ask("late"))).content

    client, task = await start(agent)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(client.next_request(), 0.01)
    assert (await asyncio.wait_for(client.next_request(), 1)).messages[0].text == "late"
    client.respond(text_response("ok"))
    assert await task == "ok"


async def test_agent_cancelled_before_its_request_was_read_ends_the_episode() -> None:
    async def agent(llm: InterceptedLLMClient) -> None:
        await llm(ask("q"))

    client, task = await start(agent)
    await asyncio.sleep(0)  # the agent has asked; nobody read it yet
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    with pytest.raises(AgentFinished):
        await asyncio.wait_for(client.next_request(), 1)


async def test_an_agent_stopped_by_the_environment_leaves_no_unretrieved_error() -> None:
    """A step limit stops the agent while no one waits for its next request: no asyncio warning."""
    loop = asyncio.get_running_loop()
    reported: list[dict[str, object]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))

    async def agent(llm: InterceptedLLMClient) -> None:
        while True:
            await llm(ask("again"))

    try:
        client, task = await start(agent)
        await client.next_request()
        task.cancel()  # what the environment does when a limit cuts the episode
        with pytest.raises(asyncio.CancelledError):
            await task
        client.close()
        del client, task
        gc.collect()
    finally:
        loop.set_exception_handler(previous)
    assert not [c for c in reported if isinstance(c.get("exception"), AgentFinished)]


async def test_a_call_cancelled_before_its_request_was_read_does_not_shadow_the_next_one() -> None:
    """An HTTP caller that gives up (proxy timeout) withdraws its request; the next one is observed."""
    client = InterceptedLLMClient()
    gave_up = asyncio.ensure_future(client(ask("stale")))
    await asyncio.sleep(0)
    gave_up.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gave_up
    fresh = asyncio.ensure_future(client(ask("fresh")))
    request = await client.next_request()
    assert request.messages[0].text == "fresh"
    client.respond(text_response("ok"))
    assert (await fresh).content == "ok"
