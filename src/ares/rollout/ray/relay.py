"""The driver's gate and trainer version, pushed to a Ray run's actors as they change.

Why push: a ``PolicyGate`` is asyncio events on the driver's loop and ``Staleness.current`` is
whatever callable the trainer passed (``lambda: trainer.step``); neither can be called from an
actor, and actors cannot call into the driver. Reading them from a small Ray actor instead would
cost a remote call at every step boundary of every episode, all on that one actor. Versions change
once per optimizer step, so the driver pushes each change to every actor (one call per actor and
change) and episodes check their actor's copy (``control.RunControl``) at every step boundary, at
no cost.

A pause is exact: ``gate.pause()`` returns once every actor has paused its episodes and has no
policy call in flight, and ``resume()`` pushes the version read at that moment before any held
episode goes on, so a weight update between the two is seen by the very next step everywhere. A
version that changes without a pause is read every ``VERSION_POLL_S`` and pushed when it changed:
an actor sees it within one poll and one call.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import replace
from types import TracebackType
from typing import Any

from ares.rollout.pause import PolicyGate
from ares.rollout.ray.control import Control
from ares.rollout.ray.fleet import Fleet
from ares.rollout.ray.work import RunConfig
from ares.rollout.staleness import Staleness

#: How often the driver reads the trainer's version (``Staleness.current``) to push a change.
VERSION_POLL_S = 0.05


def initial_control(gate: PolicyGate | None, staleness: Staleness | None) -> Control:
    """A run's control as it starts: the gate's state and the trainer's version now."""
    version, error = read_version(staleness, None)
    return Control(
        gated=gate is not None,
        paused=gate is not None and gate.paused,
        max_staleness=None if staleness is None else staleness.max_staleness,
        version=version,
        version_error=error,
    )


def read_version(staleness: Staleness | None, last: int | None) -> tuple[int | None, str | None]:
    """The trainer's version now, and None; or, when ``current()`` raises, ``last`` and what it
    raised (pushed to the actors, whose episodes then fail with it as a local run's would)."""
    if staleness is None:
        return None, None
    try:
        return staleness.current(), None
    except Exception as exc:
        return last, f"{type(exc).__name__}: {exc}"


class Relay:
    """Begins a run on the fleet and keeps its actors in step with the run's gate (as one of its
    ``GateMember``s) and the trainer's version, until the run ends.

    Pushes go out one after another in the order they were made, so a resume never overtakes the
    pause after it. A ``current()`` that raises is pushed as ``Control.version_error``.
    """

    def __init__(
        self,
        fleet: Fleet,
        config: RunConfig,
        gate: PolicyGate | None,
        staleness: Staleness | None,
        poll_s: float = VERSION_POLL_S,
    ) -> None:
        self._fleet, self._config, self._gate, self._staleness = fleet, config, gate, staleness
        self._poll_s = poll_s
        self._state = config.control
        self._last: asyncio.Task[None] | None = None
        self._poller: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Relay:
        if self._gate is not None:  # joined first: a pause from now on waits for the actors too
            self._gate.join(self)
        await self._then(lambda: self._fleet.begin_run(self._config))
        if self._staleness is not None:
            self._poller = asyncio.create_task(self._poll(), name="ares-ray-version-poll")
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._gate is not None:
            self._gate.leave(self)
        if self._poller is not None:
            self._poller.cancel()
            await asyncio.wait([self._poller])
        if self._last is not None:
            await asyncio.wait([self._last])
        await self._fleet.end_run(self._config.run_id)

    async def pause(self, *, preempt: bool = False, release_after_s: float | None = None) -> None:
        """Pause every actor's episodes of the run (preempting their calls, releasing sandboxes
        after ``release_after_s``, as ``PolicyGate.pause``); return once none has a policy call in
        flight."""
        push = self._push(paused=True, preempt=preempt, release_after_s=release_after_s)
        await asyncio.shield(push)

    def resume(self) -> None:
        """Push the version now and let every actor's episodes go on."""
        self._push(paused=False, preempt=False, release_after_s=None)

    def _push(self, **changes: Any) -> asyncio.Task[None]:
        version, error = read_version(self._staleness, self._state.version)
        state = self._state = replace(self._state, version=version, version_error=error, **changes)
        return self._then(lambda: self._fleet.control(self._config.run_id, state))

    def _then(self, step: Callable[[], Awaitable[None]]) -> asyncio.Task[None]:
        """Run ``step`` once every push made before it is out."""
        previous = self._last

        async def link() -> None:
            if previous is not None:
                await asyncio.wait([previous])
            with contextlib.suppress(Exception):  # a dead actor is no actor to keep in step
                await step()

        self._last = task = asyncio.create_task(link(), name="ares-ray-control")
        return task

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self._poll_s)
            read = read_version(self._staleness, self._state.version)
            if read != (self._state.version, self._state.version_error):
                self._push()
