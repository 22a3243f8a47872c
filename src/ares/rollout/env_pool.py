"""Ready-first stepping: submit resets and steps to many environments, receive each result when it lands.

Lock-step batching (``asyncio.gather`` over every environment, then the next action for all) waits for
the slowest environment of each round: one 300 s verifier idles the other N-1. ``EnvPool`` decouples
the environments instead. Each submitted operation runs as its own task on the caller's event loop;
its outcome, value or exception, is queued as a ``PoolResult`` the moment it finishes, and the caller
takes results in the order they arrive::

    async with EnvPool(envs) as pool:
        pool.send_reset()                                  # every env, concurrently
        async for result in pool.as_completed():           # one result at a time, fastest first
            if result.error is not None or result.timestep.last():
                pool.submit_reset(result.env_id)           # or stop submitting to that env
            else:
                pool.submit_step(result.env_id, await policy(result.timestep.observation))

or, EnvPool style, in batches: ``pool.send(env_ids, actions)`` then
``results = await pool.recv(min_results=k, timeout=t)`` (at least ``k`` results, or whatever is ready
when ``t`` seconds have passed).

Each environment goes through a small state machine (``EnvState``): an environment with an operation
in flight, or whose result has not been received yet, is ``BUSY`` and takes no other operation; after
a LAST time step or a failed operation it takes only a reset. Breaking these rules raises
``PoolStateError`` at submission, before anything runs. One environment's exception is that
environment's result and never touches the others. ``close()`` (also on leaving ``async with``, e.g.
when the caller is cancelled) cancels every in-flight operation, waits for it to unwind, then closes
every environment concurrently.
"""

from __future__ import annotations

import asyncio
import enum
from collections import deque
from collections.abc import AsyncIterator, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from types import TracebackType
from typing import Any, Generic, Literal, Self, TypeVar

from ares.core.environment import Environment
from ares.core.timestep import StepType, TimeStep
from ares.errors import AresError

ObsT = TypeVar("ObsT")
ActT = TypeVar("ActT")

Operation = Literal["reset", "step"]


class PoolError(AresError):
    """Base class of the pool's own errors."""


class PoolStateError(PoolError):
    """An operation was submitted that the environment's state does not allow (see ``EnvState``)."""


class PoolClosedError(PoolError):
    """The pool is closed (or closing); create a new one."""


class PoolCloseError(PoolError):
    """Some environments raised while closing. ``failures`` maps each env id to its exception; every
    other environment was closed."""

    def __init__(self, failures: Mapping[int, BaseException]) -> None:
        self.failures = dict(sorted(failures.items()))
        detail = "; ".join(f"[{i}] {type(e).__name__}: {e}" for i, e in self.failures.items())
        super().__init__(f"close() failed in environment(s) {detail}")


class EnvState(enum.Enum):
    """Where one environment of the pool stands, from the caller's point of view."""

    NEW = "new"  # never reset: takes only a reset
    READY = "ready"  # mid-episode, result received: takes a step or a reset
    BUSY = "busy"  # an operation is in flight or its result has not been received yet
    ENDED = "ended"  # the last result was a LAST time step: takes only a reset
    FAILED = "failed"  # the last operation raised: takes only a reset


@dataclass(frozen=True, slots=True)
class PoolResult(Generic[ObsT]):
    """The outcome of one operation on environment ``env_id``: its ``timestep``, or the ``error`` it
    raised (then ``timestep`` is None). ``duration_s`` runs from submission to completion."""

    env_id: int
    operation: Operation
    timestep: TimeStep[ObsT] | None
    error: BaseException | None = None
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None

    def unwrap(self) -> TimeStep[ObsT]:
        """The time step, or raise the operation's error."""
        if self.error is not None:
            raise self.error
        assert self.timestep is not None
        return self.timestep


class EnvPool(Generic[ObsT, ActT]):
    """Many environments stepped independently on one event loop; results come back ready-first.

    Environment ``i`` of ``envs`` has env id ``i``. The pool owns the environments: ``close()`` closes
    them. Use it from one event loop, with one consumer (``recv`` or ``as_completed``) at a time.
    """

    def __init__(self, envs: Iterable[Environment[ObsT, ActT]]) -> None:
        self._envs: tuple[Environment[ObsT, ActT], ...] = tuple(envs)
        if not self._envs:
            raise ValueError("EnvPool needs at least one environment")
        self._states = [EnvState.NEW] * len(self._envs)
        self._tasks: dict[int, asyncio.Task[TimeStep[ObsT]]] = {}
        self._ready: deque[PoolResult[ObsT]] = deque()
        self._waiter: tuple[int, asyncio.Future[None]] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ inspection
    @property
    def envs(self) -> tuple[Environment[ObsT, ActT], ...]:
        return self._envs

    @property
    def num_envs(self) -> int:
        return len(self._envs)

    def __len__(self) -> int:
        return len(self._envs)

    def state(self, env_id: int) -> EnvState:
        self._check_id(env_id)
        return self._states[env_id]

    @property
    def in_flight(self) -> int:
        """Operations submitted and still running."""
        return len(self._tasks)

    @property
    def ready(self) -> int:
        """Results finished and waiting to be received."""
        return len(self._ready)

    @property
    def closed(self) -> bool:
        return self._closing is not None

    # ------------------------------------------------------------------ submitting
    def submit_reset(self, env_id: int, *, seed: int | None = None, task: Any | None = None) -> None:
        """Start ``reset(seed=, task=)`` on one environment (allowed in any state but ``BUSY``)."""
        self._check_submit(env_id, "reset")
        self._start(env_id, "reset", self._envs[env_id].reset(seed=seed, task=task))

    def submit_step(self, env_id: int, action: ActT) -> None:
        """Start ``step(action)`` on one environment (allowed only when it is ``READY``)."""
        self._check_submit(env_id, "step")
        self._start(env_id, "step", self._envs[env_id].step(action))

    def send_reset(
        self,
        env_ids: Sequence[int] | None = None,
        *,
        seeds: Sequence[int | None] | None = None,
        tasks: Sequence[Any] | None = None,
    ) -> None:
        """Reset several environments (all when ``env_ids`` is None); ``seeds``/``tasks`` align with
        ``env_ids``. Every one is checked before any starts."""
        ids = list(range(self.num_envs)) if env_ids is None else list(env_ids)
        seeds_ = [None] * len(ids) if seeds is None else list(seeds)
        tasks_ = [None] * len(ids) if tasks is None else list(tasks)
        self._check_batch(ids, "reset", seeds=seeds_, tasks=tasks_)
        for env_id, seed, task in zip(ids, seeds_, tasks_, strict=True):
            self._start(env_id, "reset", self._envs[env_id].reset(seed=seed, task=task))

    def send(self, env_ids: Sequence[int], actions: Sequence[ActT]) -> None:
        """Step environment ``env_ids[k]`` with ``actions[k]``; every one is checked before any starts."""
        ids, acts = list(env_ids), list(actions)
        self._check_batch(ids, "step", actions=acts)
        for env_id, action in zip(ids, acts, strict=True):
            self._start(env_id, "step", self._envs[env_id].step(action))

    # ------------------------------------------------------------------ receiving
    async def recv(
        self,
        min_results: int = 1,
        *,
        max_results: int | None = None,
        timeout: float | None = None,  # noqa: ASYNC109  # returns what is ready at the deadline, not an error
    ) -> list[PoolResult[ObsT]]:
        """Wait until at least ``min_results`` results are ready (or ``timeout`` seconds pass), then
        return every ready result (at most ``max_results``) in arrival order.

        ``min_results=0`` returns at once with whatever is ready. On timeout the list may be shorter
        than ``min_results``, even empty. Asking for more results than operations outstanding is an
        error (it could never return). If the caller is cancelled while waiting, no result is lost:
        they stay queued for the next call."""
        self._check_open()
        if max_results is not None and max_results < max(1, min_results):
            raise ValueError(f"max_results={max_results} is below min_results={min_results} (or 1)")
        outstanding = len(self._tasks) + len(self._ready)
        if min_results < 0 or min_results > outstanding:
            raise ValueError(
                f"min_results={min_results} but only {outstanding} operation(s) are outstanding"
                " (submitted and not yet received); submit more first"
            )
        if len(self._ready) < min_results:
            await self._wait_for(min_results, timeout)
        count = len(self._ready) if max_results is None else min(max_results, len(self._ready))
        taken = [self._ready.popleft() for _ in range(count)]
        for result in taken:
            self._states[result.env_id] = _state_after(result)
        return taken

    async def as_completed(self) -> AsyncIterator[PoolResult[ObsT]]:
        """Yield results one at a time as they arrive, until nothing is in flight or waiting.

        Operations submitted inside the loop body keep the iteration going."""
        self._check_open()
        while self._tasks or self._ready:
            if not self._ready:
                await self._wait_for(1, None)
            result = self._ready.popleft()
            self._states[result.env_id] = _state_after(result)
            yield result
            self._check_open()

    # ------------------------------------------------------------------ closing
    async def close(self) -> None:
        """Cancel in-flight operations, then close every environment concurrently. Idempotent; if the
        caller is cancelled meanwhile, the close still finishes in the background."""
        if self._closing is None:
            self._closing = asyncio.get_running_loop().create_task(self._close())
        await asyncio.shield(self._closing)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def _close(self) -> None:
        if self._waiter is not None and not self._waiter[1].done():
            self._waiter[1].set_exception(PoolClosedError("the pool was closed while recv() waited"))
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        self._ready.clear()
        results = await asyncio.gather(*(env.close() for env in self._envs), return_exceptions=True)
        failures = {i: r for i, r in enumerate(results) if isinstance(r, BaseException)}
        if failures:
            raise PoolCloseError(failures) from next(iter(failures.values()))

    # ------------------------------------------------------------------ internals
    def _check_open(self) -> None:
        if self._closing is not None:
            raise PoolClosedError("the pool is closed; create a new one")

    def _check_id(self, env_id: int) -> None:
        if not isinstance(env_id, int) or isinstance(env_id, bool) or not 0 <= env_id < len(self._envs):
            raise IndexError(f"env id {env_id!r} is not in 0..{len(self._envs) - 1}")

    def _check_submit(self, env_id: int, operation: Operation) -> None:
        self._check_open()
        self._check_id(env_id)
        state = self._states[env_id]
        if state is EnvState.BUSY:
            raise PoolStateError(
                f"env {env_id} already has an operation outstanding; receive its result"
                f" (recv() or as_completed()) before submitting a {operation}"
            )
        if operation == "step" and state is not EnvState.READY:
            why = {
                EnvState.NEW: "has never been reset",
                EnvState.ENDED: "ended its episode (LAST)",
                EnvState.FAILED: "raised on its last operation",
            }[state]
            raise PoolStateError(f"env {env_id} {why}; submit a reset before stepping it")

    def _check_batch(self, ids: list[int], operation: Operation, **aligned: list[Any]) -> None:
        for name, values in aligned.items():
            if len(values) != len(ids):
                raise ValueError(f"got {len(values)} {name} for {len(ids)} env ids")
        if len(set(ids)) != len(ids):
            raise ValueError(f"env ids repeat: {ids}")
        for env_id in ids:
            self._check_submit(env_id, operation)

    def _start(self, env_id: int, operation: Operation, op: Coroutine[Any, Any, TimeStep[ObsT]]) -> None:
        """Run ``op`` (checked by ``_check_submit`` already) as a task that reports to ``_finished``."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            op.close()
            raise PoolStateError(
                "submit operations from a coroutine running on the pool's event loop"
            ) from None
        if self._loop is None:
            self._loop = loop
        elif loop is not self._loop:
            op.close()
            raise PoolStateError("the pool is used from another event loop than the one it started on")
        self._states[env_id] = EnvState.BUSY
        task = loop.create_task(op)
        self._tasks[env_id] = task
        task.add_done_callback(partial(self._finished, env_id, operation, loop.time()))

    def _finished(self, env_id: int, operation: Operation, started: float, task: asyncio.Task[Any]) -> None:
        if self._closing is not None:
            return  # close() cancelled it; nobody will receive results any more
        del self._tasks[env_id]
        duration = task.get_loop().time() - started
        error: BaseException | None
        if task.cancelled():
            # Only the environment itself can have cancelled it (close() is handled above); a bare
            # CancelledError handed to the caller would look like the caller's own cancellation.
            error, timestep = PoolError(f"env {env_id}'s {operation}() was cancelled from inside it"), None
        else:
            error, timestep = task.exception(), None
            if error is None:
                timestep = task.result()
                if not isinstance(timestep, TimeStep):
                    error = TypeError(
                        f"env {env_id}'s {operation}() returned {type(timestep).__name__}, not a TimeStep"
                    )
                    timestep = None
        self._ready.append(PoolResult(env_id, operation, timestep, error, duration))
        if self._waiter is not None:
            wanted, future = self._waiter
            if len(self._ready) >= wanted and not future.done():
                future.set_result(None)

    async def _wait_for(self, count: int, timeout: float | None) -> None:  # noqa: ASYNC109
        if self._waiter is not None:
            raise PoolStateError("another recv() or as_completed() is already waiting on this pool")
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiter = (count, future)
        try:
            if timeout is None:
                await future
            else:
                await asyncio.wait((future,), timeout=timeout)
                if future.done():
                    future.result()  # raises PoolClosedError if close() interrupted the wait
        finally:
            self._waiter = None
            if not future.done():
                future.cancel()


def _state_after(result: PoolResult[Any]) -> EnvState:
    if result.error is not None:
        return EnvState.FAILED
    assert result.timestep is not None
    return EnvState.ENDED if result.timestep.step_type is StepType.LAST else EnvState.READY
