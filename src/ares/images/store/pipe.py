"""A bounded byte pipe from the event loop to one worker thread.

The layer's bytes arrive in the event loop (the source's async sink); ``tarfile`` wants a blocking
``read``. The writer awaits when the pipe is full (never blocking the loop), the reader blocks in its
own thread, and the buffer never holds more than ``limit`` bytes. Either side can abort the other.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque


class PipeClosed(Exception):
    """The other side gave up: the reader failed, or the writer aborted."""


class BytePipe:
    def __init__(self, limit: int = 4 << 20) -> None:
        self._loop = asyncio.get_running_loop()
        self._limit = limit
        self._cond = threading.Condition()
        self._chunks: deque[memoryview] = deque()
        self._buffered = 0
        self._eof = False
        self._aborted = False
        self._space: asyncio.Future[None] | None = None

    # ------------------------------------------------------------ event loop side
    async def write(self, data: bytes) -> None:
        """Queue ``data``; waits (asynchronously) while the pipe is full. PipeClosed if aborted."""
        if not data:
            return
        while True:
            with self._cond:
                if self._aborted:
                    raise PipeClosed("the reader stopped")
                if self._buffered < self._limit:
                    self._chunks.append(memoryview(data))
                    self._buffered += len(data)
                    self._cond.notify_all()
                    return
                self._space = self._loop.create_future()
                space = self._space
            await space

    def close(self) -> None:
        """No more data: the reader sees end of file once the buffer is drained."""
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def abort(self) -> None:
        """Stop both sides: the reader's ``read`` and the writer's ``write`` raise PipeClosed."""
        with self._cond:
            self._aborted = True
            self._chunks.clear()
            self._buffered = 0
            self._cond.notify_all()
            self._wake_writer()

    # ------------------------------------------------------------ worker thread side
    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes (at least one unless at end of file); blocks until some arrive."""
        with self._cond:
            while not self._chunks and not self._eof and not self._aborted:
                self._cond.wait()
            if self._aborted:
                raise PipeClosed("the download was aborted")
            out: list[bytes] = []
            want = size if size >= 0 else self._buffered
            while self._chunks and want > 0:
                head = self._chunks[0]
                if len(head) <= want:
                    self._chunks.popleft()
                    out.append(bytes(head))
                    want -= len(head)
                else:
                    out.append(bytes(head[:want]))
                    self._chunks[0] = head[want:]
                    want = 0
            data = b"".join(out)
            self._buffered -= len(data)
            if self._buffered < self._limit:
                self._wake_writer()
            return data

    def _wake_writer(self) -> None:
        space, self._space = self._space, None
        if space is not None:
            self._loop.call_soon_threadsafe(_resolve, space)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
