"""A background writer thread: collectors hand it events and return at once.

Encoding records to JSON and writing (and fsync'ing) files costs far more than an environment step,
so a collector only appends the event to a queue on the caller's thread; this thread takes
everything queued, at most ``interval_s`` later, and hands it to the collector's ``handle`` as one
batch (one write and one fsync per batch instead of per event). ``flush()`` returns once everything
queued before it is written and durable; ``close()`` flushes and stops the thread, and runs at
interpreter exit, so records survive Ctrl-C and normal exits. A hard kill (SIGKILL, power loss)
loses at most the last ``interval_s`` of events; every file stays valid.

The thread starts on the first event and exits after a second with nothing to do, so idle
collectors hold no thread. A failure in ``handle`` is raised again by the next ``put``/``flush``.
"""

from __future__ import annotations

import atexit
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from ares import tracing

IDLE_EXIT_S = 1.0


class _FlushMark:
    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = threading.Event()


class BackgroundWriter:
    """Runs ``handle(events, durable)`` on a daemon thread for events given to ``put``."""

    def __init__(
        self, handle: Callable[[list[Any], bool], None], *, name: str, interval_s: float = 0.05
    ) -> None:
        self._handle = handle
        self._name = name
        self._interval_s = interval_s
        self._queue: deque[Any] = deque()
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._closed = False
        atexit.register(self.close)

    def put(self, event: Any) -> None:
        """Queue ``event``; cheap enough for every environment step."""
        if self._error is not None:
            self._raise()
        if self._closed:
            raise RuntimeError(f"{self._name} is closed")
        self._queue.append(event)
        if self._thread is None:
            self._start()

    def put_soon(self, event: Any) -> None:
        """Queue ``event`` and have the thread take it now rather than at its next tick."""
        self.put(event)
        self._wake.set()

    def flush(self) -> None:
        """Block until every event queued so far is written and durable (fsync'd)."""
        mark = _FlushMark()
        self._queue.append(mark)
        self._wake.set()
        if self._thread is None:
            self._start()
        mark.done.wait()
        if self._error is not None:
            self._raise()

    def close(self) -> None:
        """Flush, then refuse new events. Safe to call twice and at interpreter exit."""
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._closed = True
            atexit.unregister(self.close)

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                try:
                    thread.start()
                except RuntimeError:  # at interpreter shutdown (3.12+) no thread may start: write here
                    self._drain()
                    return
                self._thread = thread

    def _raise(self) -> None:
        error, self._error = self._error, None
        assert error is not None
        raise RuntimeError(f"{self._name} failed to write records: {error}") from error

    def _run(self) -> None:
        idle = 0.0
        while True:
            self._wake.wait(self._interval_s)
            self._wake.clear()
            if not self._queue:
                idle += self._interval_s
                if idle >= IDLE_EXIT_S and self._retire():
                    return
                continue
            idle = 0.0
            self._drain()

    def _retire(self) -> bool:
        """Exit unless something was queued meanwhile (``put`` starts a new thread once we are gone)."""
        with self._lock:
            self._thread = None
            if self._queue:
                self._thread = threading.current_thread()
                return False
            return True

    def _drain(self) -> None:
        events: list[Any] = []
        while self._queue:
            item = self._queue.popleft()
            if isinstance(item, _FlushMark):
                self._handle_safely(events, durable=True)
                events = []
                item.done.set()
            else:
                events.append(item)
        if events:
            self._handle_safely(events, durable=False)

    def _handle_safely(self, events: list[Any], *, durable: bool) -> None:
        if not events and not durable:
            return
        try:
            with tracing.span(
                "records.write", cat="records", level="full", track=self._name, events=len(events),
                durable=durable,
            ):  # fmt: skip
                self._handle(events, durable)
        except BaseException as exc:  # kept for the caller: a writer thread has no one to raise to
            self._error = exc
