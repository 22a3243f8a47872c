"""Episodes that live through a weight update: pause the hand-over to the policy, update, resume.

An asynchronous trainer updates its weights while episodes are still running. Throwing those
episodes away starves long rollouts and biases training toward fast problems; instead,
``PolicyGate.pause()`` stops handing observations to the policy at the next step boundary of every
episode and returns once no policy call is in flight (the calls under way complete with the old
weights); the trainer updates the weights (and the policy's version); ``resume()`` lets the
episodes go on, their next tokens from the new weights. The records show where the version
changed (``LLMResponse.policy_version``, ``TokenSequence.version_segments``), and each segment is
exact for the weights that made it.

Two options for a trainer that cannot wait. ``pause(preempt=True)`` does not let the calls under way
finish: it cancels them and returns once they have stopped; after ``resume()`` each is re-issued
(``ares.rollout.preemption``), and a ``ResumablePolicy`` continues from the tokens it had sampled.
``pause(release_after_s=s)`` frees the sandboxes of episodes held longer than ``s``: each one's
environment snapshots and stops its sandbox, and restores it before the episode goes on
(``ares.rollout.release``). Otherwise sandboxes stay up meanwhile: the agents are only waiting.

Episodes in other processes (a Ray run's actors, each with a gate of its own) follow the gate as
``GateMember``s: ``pause()`` returns once every member has paused too (with the same options),
``resume()`` resumes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Iterator
from typing import Any, Protocol

from ares.rollout.release import Release, reacquire, release


class GateMember(Protocol):
    """Episodes elsewhere that pass the same gate: paused and resumed with it (``PolicyGate.join``)."""

    async def pause(self, *, preempt: bool = False, release_after_s: float | None = None) -> None:
        """Hold the member's episodes at their next step boundary; return once none is in a call."""
        ...

    def resume(self) -> None:
        """Let the member's episodes go on (without waiting: ``PolicyGate.resume`` is synchronous)."""
        ...


class GateCall:
    """One episode's policy call at the gate: the attempt under way (``ares.rollout.preemption``
    runs it), whether a pause asked to preempt it, whether it waits for resume() already, and how
    long it has waited for resume() in all (``parked_s``: not the policy's time)."""

    __slots__ = ("attempt", "parked", "parked_s", "preempted")

    def __init__(self) -> None:
        self.attempt: asyncio.Future[Any] | None = None
        self.preempted = self.parked = False
        self.parked_s = 0.0

    def preempt(self) -> None:
        if self.parked:  # preempted already: it waits for resume()
            return
        self.preempted = True
        if self.attempt is not None:
            self.attempt.cancel("preempted by PolicyGate.pause(preempt=True)")


class PolicyGate:
    """A gate every episode of a run passes before each policy call (``run_episodes(gate=...)``)."""

    def __init__(self) -> None:
        self._open = asyncio.Event()
        self._open.set()
        self._idle = asyncio.Event()
        self._idle.set()
        self._in_flight = 0
        self._wake = asyncio.Event()  # replaced (and the old one set) whenever the pause changes
        self._paused_at = 0.0
        self._release_at: float | None = None
        self._calls: dict[asyncio.Task[Any], GateCall] = {}
        self._envs: dict[asyncio.Task[Any], Any] = {}
        self._held = 0
        self._members: list[GateMember] = []
        #: Calls preempted so far (each one re-issued after its resume).
        self.preemptions = 0
        #: What became of each held episode's sandbox at a long pause, latest last (the last 1000).
        self.releases: deque[Release] = deque(maxlen=1000)

    @property
    def paused(self) -> bool:
        return not self._open.is_set()

    @property
    def in_flight(self) -> int:
        """Policy calls under way now."""
        return self._in_flight

    @property
    def held(self) -> int:
        """Episodes waiting at the gate now (at a step boundary, or with a preempted call)."""
        return self._held

    async def pause(self, *, preempt: bool = False, release_after_s: float | None = None) -> None:
        """Hand out no further observation; return once no call is under way. ``preempt``: cancel
        the calls under way instead of waiting for them (re-issued after ``resume()``).
        ``release_after_s``: once the pause has lasted that long, every held episode's
        environment releases its sandbox (restored before it goes on; ``releases`` says what
        happened to each). A pause while paused keeps its start and takes the new options."""
        if release_after_s is not None and release_after_s < 0:
            raise ValueError(f"release_after_s must be >= 0, got {release_after_s}")
        if self._open.is_set():
            self._paused_at = time.monotonic()
        self._open.clear()
        self._release_at = None if release_after_s is None else self._paused_at + release_after_s
        self._notify()
        if preempt:
            for call in self._calls.values():
                call.preempt()
        await self._idle.wait()
        members = tuple(self._members)
        await asyncio.gather(*(m.pause(preempt=preempt, release_after_s=release_after_s) for m in members))

    def resume(self) -> None:
        """Let the waiting episodes ask the policy again (preempted calls are re-issued), here and in
        every member."""
        self._open.set()
        self._release_at = None
        self._notify()
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
        await self._hold()
        task = asyncio.current_task()
        assert task is not None
        self._calls[task] = GateCall()
        self._enter()
        try:
            yield
        finally:
            self._calls.pop(task, None)
            self._leave()

    def current_call(self) -> GateCall | None:
        """The call this task is making through ``call()`` (None outside one)."""
        task = asyncio.current_task()
        return None if task is None else self._calls.get(task)

    async def park(self) -> None:
        """This task's preempted call waits for ``resume()``, not in flight meanwhile (so the
        ``pause()`` that preempted it can return)."""
        call = self.current_call()
        if call is None:
            raise RuntimeError("park() waits for a call made through PolicyGate.call()")
        call.preempted, call.parked = False, True
        self.preemptions += 1
        self._leave()
        since = time.perf_counter()
        try:
            await self._hold()
        finally:
            self._enter()
            call.parked = False
            call.parked_s += time.perf_counter() - since

    @contextlib.contextmanager
    def attach(self, env: Any) -> Iterator[None]:
        """``env`` is the environment of the episode this task plays: what a long pause releases."""
        task = asyncio.current_task()
        assert task is not None
        self._envs[task] = env
        try:
            yield
        finally:
            self._envs.pop(task, None)

    async def _hold(self) -> None:
        """Wait while paused; an episode released meanwhile gets its sandbox back before going on
        (re-checked after: a pause may have come in meanwhile)."""
        env = self._envs.get(asyncio.current_task())  # type: ignore[arg-type]
        while not self._open.is_set():
            self._held += 1
            try:
                released = await self._wait(env)
            finally:
                self._held -= 1
            if released:
                await reacquire(env)

    async def _wait(self, env: Any) -> bool:
        """Until the gate opens; past the release deadline, release ``env`` once. Whether it did."""
        released = tried = False
        while not self._open.is_set():
            wake, deadline = self._wake, self._release_at
            left = None if env is None or tried or deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                tried = True
                outcome = await release(env)
                self.releases.append(outcome)
                released = outcome.released
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), left)
        return released

    def _notify(self) -> None:
        wake, self._wake = self._wake, asyncio.Event()
        wake.set()

    def _enter(self) -> None:
        self._in_flight += 1
        self._idle.clear()

    def _leave(self) -> None:
        self._in_flight -= 1
        if self._in_flight == 0:
            self._idle.set()
