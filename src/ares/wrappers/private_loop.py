"""A private event loop, so synchronous APIs can drive async environments from anywhere.

Gymnasium and dm_env are synchronous; ARES environments are async. Each adapter owns one event loop
that exists only for its environment, and runs it *during* calls:

- from plain synchronous code (a script, a training loop) the loop runs in the caller's own thread
  (``run_until_complete``): no thread hop, so a sync step costs about what an async one does;
- from code that already runs an event loop (Jupyter, an asyncio application), where a second loop
  cannot run in the same thread, the call is handed to one worker thread that runs the private loop
  and the caller's thread waits for the result.

Between calls the loop is idle, which suits an environment: its agent is waiting for the next action
anyway, timers that came due meanwhile fire at the start of the next call, and subprocess output
waits in the kernel's pipes. Calls are serialized (one at a time); an interrupted call (Ctrl-C) has
its coroutine cancelled and run to the end of its cleanup, so nothing keeps running unseen.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


def _in_running_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class PrivateLoop:
    """One event loop for one environment, run in the caller's thread or, inside a loop, a worker's."""

    def __init__(self, name: str = "ares-loop") -> None:
        self._name = name
        self._loop = asyncio.new_event_loop()
        self._lock = threading.Lock()
        self._worker: ThreadPoolExecutor | None = None
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def worker_thread_prefix(self) -> str:
        """Name prefix of the worker thread used for calls made from inside a running event loop."""
        return self._name

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the private loop and return its result (its exception is raised here)."""
        if self._closed:
            coro.close()
            raise RuntimeError("the environment's event loop is closed")
        if self._loop.is_running():
            coro.close()
            raise RuntimeError(
                "PrivateLoop.run() called while the loop is running (from its own coroutine, or from two "
                "threads at once): await the coroutine instead"
            )
        with self._lock:
            return self._dispatch(self._run_here, coro)

    def close(self) -> None:
        """Cancel what is left on the loop, join its executor threads and close it. Idempotent."""
        if self._closed:
            return
        with self._lock:
            self._closed = True
            try:
                self._dispatch(self._shutdown_here)
            finally:
                self._loop.close()
                if self._worker is not None:
                    self._worker.shutdown(wait=True)

    # ------------------------------------------------------------------ internals
    def _dispatch(self, call: Any, *args: Any) -> Any:
        """``call(*args)`` here, or on the worker thread when this thread already runs a loop."""
        if not _in_running_loop():
            return call(*args)
        if self._worker is None:
            self._worker = ThreadPoolExecutor(1, thread_name_prefix=self._name)
        future = self._worker.submit(call, *args)
        try:
            return future.result()
        except BaseException:
            if not future.done():  # the caller was interrupted: stop the coroutine, wait for its cleanup
                self._loop.call_soon_threadsafe(self._cancel_all)
                future.exception()
            raise

    def _run_here(self, coro: Coroutine[Any, Any, T]) -> T:
        task = self._loop.create_task(coro)
        try:
            return self._loop.run_until_complete(task)
        except BaseException:
            if not task.done():  # KeyboardInterrupt in this thread: cancel and let it clean up
                task.cancel()
                self._loop.run_until_complete(asyncio.gather(task, return_exceptions=True))
            raise

    def _cancel_all(self) -> None:
        for task in asyncio.all_tasks(self._loop):
            task.cancel()

    def _shutdown_here(self) -> None:
        pending = [t for t in asyncio.all_tasks(self._loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self._loop.run_until_complete(self._loop.shutdown_asyncgens())
        # Join the to_thread() workers too, so close() leaves no thread behind.
        self._loop.run_until_complete(self._loop.shutdown_default_executor())
