"""In-process interception: the code agent awaits an LLM client; the environment answers it.

The agent side calls ``await client(request)``. The environment side awaits ``next_event()``,
which yields the agent's next request, or raises ``AgentFinished`` once the agent's task is done,
and later calls ``respond(response)``. Only bare futures are used (no queues, no timers) because
this hand-off is the hot path of every environment step.
"""

from __future__ import annotations

import asyncio
from typing import Protocol, cast

from ares.errors import EnvironmentStateError
from ares.llm.types import LLMRequest, LLMResponse


class LLMClient(Protocol):
    """What a code agent needs: one awaitable call from request to response."""

    async def __call__(self, request: LLMRequest) -> LLMResponse: ...


class AgentFinished(Exception):
    """Raised by ``next_event`` when the agent task ended instead of asking the LLM again."""


#: What the request waiter holds once the agent task ended: a plain result, so that no future holds
#: an exception whose traceback holds the frames that hold the future (a cycle per episode, left
#: for the garbage collector with everything the episode's frames reference).
_FINISHED: LLMRequest = cast(LLMRequest, object())


class InterceptedLLMClient:
    """A queue of depth one between an agent coroutine and the environment.

    Cancellation safety: if the agent is cancelled while waiting for a response, the pending
    response future is cancelled with it; if the environment goes away (``close``), the agent's
    pending call is cancelled rather than left hanging.
    """

    __slots__ = ("_closed", "_loop", "_request_waiter", "_response_waiter")

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._request_waiter: asyncio.Future[LLMRequest] = self._loop.create_future()
        self._response_waiter: asyncio.Future[LLMResponse] | None = None
        self._closed = False

    async def __call__(self, request: LLMRequest) -> LLMResponse:
        if self._closed:
            raise asyncio.CancelledError("the environment owning this LLM client was closed")
        if self._response_waiter is not None:
            raise EnvironmentStateError("concurrent LLM calls from one agent are not supported")
        response_waiter = self._response_waiter = self._loop.create_future()
        request_waiter = self._request_waiter
        if not request_waiter.done():
            request_waiter.set_result(request)
        try:
            response = await response_waiter
        except BaseException:
            self._response_waiter = None
            waiter = self._request_waiter
            unread = waiter.done() and not waiter.cancelled() and waiter.exception() is None
            if unread and waiter.result() is request:
                # Cancelled before the environment read it: withdraw the request, or it would
                # shadow the next call's and the policy would answer a stale observation.
                self._request_waiter = self._loop.create_future()
            raise
        # A response comes only after the environment read the request (respond() needs this call's
        # waiter, and step() answers only what next_request() returned): nothing to withdraw.
        self._response_waiter = None
        return response

    def watch(self, agent_task: asyncio.Future[object]) -> None:
        """Make ``next_request`` raise AgentFinished once ``agent_task`` ends (registered once)."""
        agent_task.add_done_callback(self._on_agent_done)

    async def next_request(self) -> LLMRequest:
        """The agent's next request; raises AgentFinished if the watched agent task ended instead.

        If the caller is cancelled while waiting (e.g. an outer timeout), the client stays usable:
        a request the agent sends later is still delivered to the next call.
        """
        waiter = self._request_waiter
        try:
            request = await waiter
        except asyncio.CancelledError:
            if waiter.cancelled() and not self._closed:
                self._request_waiter = self._loop.create_future()
            raise
        if request is _FINISHED:
            raise AgentFinished()
        self._request_waiter = self._loop.create_future()
        return request

    def _on_agent_done(self, _task: asyncio.Future[object]) -> None:
        if self._closed:
            return
        waiter = self._request_waiter
        if waiter.done():
            if waiter.cancelled() or waiter.result() is _FINISHED:
                return
            # The agent asked and then died before the request was read: that request is stale.
            waiter = self._request_waiter = self._loop.create_future()
        waiter.set_result(_FINISHED)

    def respond(self, response: LLMResponse) -> None:
        """Deliver the policy's response to the agent waiting on its request."""
        waiter = self._response_waiter
        if waiter is None or waiter.done():
            raise EnvironmentStateError("no LLM call is waiting for a response")
        waiter.set_result(response)

    def close(self) -> None:
        """Cancel any call in flight; later calls fail immediately."""
        self._closed = True
        if self._response_waiter is not None and not self._response_waiter.done():
            self._response_waiter.cancel()
        waiter = self._request_waiter
        if not waiter.done():
            waiter.cancel()
