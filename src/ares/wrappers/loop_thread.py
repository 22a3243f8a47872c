"""A private event loop on its own thread, so synchronous APIs can drive async environments.

Gymnasium and dm_env are synchronous; ARES environments are async. Running the environment on a
dedicated loop thread (instead of ``asyncio.run`` per call, or refusing when a loop is already
running) makes the sync adapters work from plain scripts, from Jupyter and from inside an asyncio
application alike: the caller's thread only waits for the result.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """Runs coroutines on one long-lived event loop in a daemon thread."""

    def __init__(self, name: str = "ares-loop") -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    @property
    def closed(self) -> bool:
        return self._loop.is_closed()

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run ``coro`` on the loop thread and return its result (its exception is raised here).

        Interrupting the wait (Ctrl-C) cancels the coroutine, so nothing keeps running unseen.
        """
        if self._loop.is_closed():
            coro.close()
            raise RuntimeError("the environment's event-loop thread is closed")
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("LoopThread.run() called from its own loop: await the coroutine instead")
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout_s)
        except BaseException:
            future.cancel()
            raise

    def close(self) -> None:
        """Stop the loop and join the thread; pending tasks are cancelled first. Idempotent."""
        if self._loop.is_closed():
            return
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
        self._loop.close()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            pending = [t for t in asyncio.all_tasks(self._loop) if not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            # Join the to_thread() workers too, so close() leaves no thread behind.
            self._loop.run_until_complete(self._loop.shutdown_default_executor())
