"""One episode's slice of the proxy: its LLM client, its call queue and its counters.

Calls on a session are served one at a time, in arrival order: an agent that issues two calls
at once gets them answered one after the other. The environment's ``InterceptedLLMClient`` holds
one pending call at a time, and a policy sees one observation per step, so this is what an agent
stepping through an environment must get anyway. ``call_timeout_s`` bounds the client's time on
one call, not the time a call waits in line behind the others.

An HTTP caller that hangs up does not cancel its call: the environment already holds it as an
observation, and the policy's answer must still be accepted (it is then dropped).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import TracebackType
from typing import Self

from ares.errors import AresError
from ares.llm.interceptor import LLMClient
from ares.llm.types import LLMRequest, LLMResponse
from ares.proxy.compaction import CompactionDetector
from ares.proxy.errors import ApiError


class ProxySession:
    """Routes ``/s/{id}/v1/...`` calls to ``client``; made by ``InterceptionProxy.open_session``.

    ``close()`` fails the calls still waiting (HTTP 503 naming the reason) and makes later calls
    fail with HTTP 400; the client is not closed, it belongs to whoever opened the session.
    """

    def __init__(
        self,
        session_id: str,
        client: LLMClient,
        *,
        base_url: Callable[[], str],
        call_timeout_s: float | None,
        model: str | None = None,
        on_close: Callable[[ProxySession], None] | None = None,
    ) -> None:
        self._id = session_id
        self._client = client
        self._base_url = base_url
        self._timeout_s = call_timeout_s
        self._on_close = on_close
        self._lock = asyncio.Lock()
        self._turns: set[asyncio.Task[LLMResponse]] = set()
        self._close_reason: str | None = None
        self.model = model
        """The model name ``GET /v1/models`` lists: the one given, else the last one an agent asked for."""
        self.calls_served = 0
        """Calls answered with the policy's response."""
        self.calls_failed = 0
        """Calls that reached the session and failed (timeout, client error, close)."""
        self.compaction = CompactionDetector()
        """Marks the calls that follow a compaction the agent did on its own."""

    @property
    def id(self) -> str:
        return self._id

    @property
    def openai_base_url(self) -> str:
        """What the OpenAI SDK's ``base_url`` (or ``OPENAI_BASE_URL``) should be for this session."""
        return f"{self._base_url()}/s/{self._id}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """What the Anthropic SDK's ``base_url`` should be (it appends ``/v1/messages`` itself)."""
        return f"{self._base_url()}/s/{self._id}"

    @property
    def closed(self) -> bool:
        return self._close_reason is not None

    @property
    def calls_in_flight(self) -> int:
        """Calls waiting for the policy or queued behind the one that is."""
        return len(self._turns)

    def close(self, reason: str | None = None) -> None:
        """Fail pending calls with ``reason`` and refuse new ones; idempotent."""
        if self._close_reason is not None:
            return
        self._close_reason = reason or f"session {self._id!r} was closed while this call was pending"
        for turn in list(self._turns):
            turn.cancel()
        if self._on_close is not None:
            self._on_close(self)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()

    def check_open(self) -> None:
        """Raise the HTTP 400 a call to a closed session gets."""
        if self._close_reason is not None:
            raise ApiError(400, f"session {self._id!r} is closed; open a new session", "session_closed")

    async def call(self, request: LLMRequest) -> LLMResponse:
        """The client's answer to ``request``, after the calls queued before it; raises ``ApiError``."""
        self.check_open()
        if request.model is not None:
            self.model = request.model
        turn = asyncio.ensure_future(self._turn(self.compaction.mark(request)))
        self._turns.add(turn)
        turn.add_done_callback(self._turns.discard)
        try:
            response = await turn
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # the HTTP handler itself is being cancelled
            self.calls_failed += 1
            reason = (
                self._close_reason
                or "the session's LLM client cancelled the call (was its environment closed?)"
            )
            raise ApiError(503, reason, "call_cancelled") from None
        except ApiError:
            self.calls_failed += 1
            raise
        self.calls_served += 1
        return response

    async def _turn(self, request: LLMRequest) -> LLMResponse:
        async with self._lock:
            try:
                async with asyncio.timeout(self._timeout_s) as deadline:
                    response = await self._client(request)
            except TimeoutError as e:
                if not deadline.expired():
                    raise _client_failed(e) from None
                message = (
                    f"the policy did not answer within call_timeout_s={self._timeout_s:g} s; "
                    "raise InterceptionProxy(call_timeout_s=...) if it needs longer"
                )
                raise ApiError(504, message, "policy_timeout") from None
            except Exception as e:
                raise _client_failed(e) from None
        if not isinstance(response, LLMResponse):
            message = f"the session's LLM client returned {type(response).__name__}, not an LLMResponse"
            raise ApiError(500, message, "policy_error")
        return response


def _client_failed(error: BaseException) -> ApiError:
    """An ARES error is the policy side failing (502); anything else is a bug in the client (500)."""
    status = 502 if isinstance(error, AresError) else 500
    return ApiError(
        status, f"the session's LLM client failed: {type(error).__name__}: {error}", "policy_error"
    )
