"""Episodes that live through a weight update: pause the hand-over to the policy, update, resume.

An asynchronous trainer updates its weights while episodes are still running. Throwing those
episodes away starves long rollouts and biases training toward fast problems; instead,
``PolicyGate.pause()`` stops handing observations to the policy at the next step boundary of every
episode and returns once no policy call is in flight (the calls under way complete with the old
weights); the trainer updates the weights (and the policy's version); ``resume()`` lets the
episodes go on, their next tokens from the new weights. The records show where the version
changed (``LLMResponse.policy_version``, ``TokenSequence.version_segments``), and each segment is
exact for the weights that made it. Sandboxes stay up meanwhile: the agents are only waiting.

Episodes in other processes (a Ray run's actors, each with a gate of its own) follow the gate as
``GateMember``s: ``pause()`` returns once every member has paused too, ``resume()`` resumes them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Protocol


class GateMember(Protocol):
    """Episodes elsewhere that pass the same gate: paused and resumed with it (``PolicyGate.join``)."""

    async def pause(self) -> None:
        """Hold the member's episodes at their next step boundary; return once none is in a call."""
        ...

    def resume(self) -> None:
        """Let the member's episodes go on (without waiting: ``PolicyGate.resume`` is synchronous)."""
        ...


class PolicyGate:
    """A gate every episode of a run passes before each policy call (``run_episodes(gate=...)``)."""

    def __init__(self) -> None:
        self._open = asyncio.Event()
        self._open.set()
        self._idle = asyncio.Event()
        self._idle.set()
        self._in_flight = 0
        self._members: list[GateMember] = []

    @property
    def paused(self) -> bool:
        return not self._open.is_set()

    @property
    def in_flight(self) -> int:
        """Policy calls under way now."""
        return self._in_flight

    async def pause(self) -> None:
        """Hand out no further observation; return once every call under way has completed, here
        and in every member."""
        self._open.clear()
        await self._idle.wait()
        await asyncio.gather(*(member.pause() for member in tuple(self._members)))

    def resume(self) -> None:
        """Let the waiting episodes ask the policy again, here and in every member."""
        self._open.set()
        for member in tuple(self._members):
            member.resume()

    def join(self, member: GateMember) -> None:
        """Have ``member`` paused and resumed with this gate from now on (it reads ``paused`` to
        start in step)."""
        self._members.append(member)

    def leave(self, member: GateMember) -> None:
        with contextlib.suppress(ValueError):
            self._members.remove(member)

    @contextlib.asynccontextmanager
    async def call(self) -> AsyncIterator[None]:
        """One policy call: waits while the gate is paused, and counts as in flight until it ends."""
        while not self._open.is_set():  # re-checked after waking: a pause may have come in between
            await self._open.wait()
        self._in_flight += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._idle.set()
