"""mini-swe-agent's loop is synchronous: it runs in a thread of its own and awaits on the event loop.

Each model or sandbox call of the loop is a coroutine run on the episode's event loop while the thread
waits for its result. When the episode goes away (its agent task is cancelled, or its LLM client is
closed under a pending call) the call in flight is cancelled and later calls are refused, so mini's
loop gets an exception at its next step and the thread ends: none is left waiting on a dead episode.

A dedicated thread per episode, not ``asyncio.to_thread``: the default executor has a few dozen
workers, so hundreds of concurrent episodes would queue behind each other there.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

#: Worker threads are named with this prefix (plus the task id), so they can be told apart.
THREAD_PREFIX = "ares-mswea"


class EpisodeClosed(Exception):
    """Raised in the worker thread when the episode ended under it; mini's loop unwinds on it."""


class Bridge:
    """Runs coroutines on ``loop`` for a worker thread; ``close()`` cancels and refuses them."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._closed = False
        self._pending: concurrent.futures.Future[Any] | None = None

    def call(self, call: Callable[[], Awaitable[T]]) -> T:
        """``await call()`` on the loop and return its result (worker thread only)."""

        async def run() -> T:
            return await call()

        coro = run()
        with self._lock:
            if self._closed:
                coro.close()
                raise EpisodeClosed("the episode ended; mini-swe-agent's loop stops here")
            try:
                future = asyncio.run_coroutine_threadsafe(coro, self._loop)
            except RuntimeError as exc:  # the loop is closed
                coro.close()
                raise EpisodeClosed(f"the episode's event loop is gone: {exc}") from None
            self._pending = future
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            raise EpisodeClosed("the episode ended during a call; mini-swe-agent's loop stops here") from None
        finally:
            with self._lock:
                self._pending = None

    def close(self) -> None:
        """Cancel the call in flight (if any) and refuse later ones. Safe from any thread."""
        with self._lock:
            self._closed = True
            pending = self._pending
        if pending is not None:
            pending.cancel()


async def run_in_thread(work: Callable[[], T], *, name: str, on_cancel: Callable[[], None]) -> T:
    """``work()`` in a new thread; its result or exception comes back here.

    If the awaiting task is cancelled, ``on_cancel()`` (which must make ``work`` end soon, e.g. by
    closing its bridge) is called and the thread's end is awaited before the cancellation goes on,
    so the caller never outlives its thread; a second cancellation stops that wait.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()  # tracing spans and the like follow the work into the thread

    def settle(outcome: T | None, error: BaseException | None) -> None:
        if done.done():
            return
        if error is None:
            done.set_result(outcome)  # type: ignore[arg-type]
        else:
            done.set_exception(error)

    def target() -> None:
        outcome: T | None = None
        error: BaseException | None = None
        try:
            outcome = context.run(work)
        except BaseException as exc:
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop closed first: nobody is waiting any more
            loop.call_soon_threadsafe(settle, outcome, error)

    threading.Thread(target=target, name=name, daemon=True).start()
    try:
        return await asyncio.shield(done)
    except asyncio.CancelledError:
        on_cancel()
        done.add_done_callback(_consume)
        # Until the thread ended (how does not matter now), or a second cancellation came.
        with contextlib.suppress(BaseException):
            await asyncio.shield(done)
        raise


def _consume(future: asyncio.Future[Any]) -> None:
    """Mark an outcome as seen so an exception nobody reads logs no warning."""
    if not future.cancelled():
        future.exception()
