"""The tracing switch and ``span()``: free when off, OpenTelemetry spans when on.

The level lives in module globals so the off path of ``span()`` is one comparison returning a shared
no-op; OpenTelemetry is imported only by ``configure`` (``ares[trace]``), so code that is merely
instrumented never needs it.
"""

from __future__ import annotations

import atexit
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ares.errors import AresError

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from ares.tracing.otel import Tracer

Level = Literal["off", "basic", "full"]
_RANK: dict[str, int] = {"off": 0, "basic": 1, "full": 2}
#: Events one process keeps before the oldest are dropped (and counted).
DEFAULT_MAX_EVENTS = 1_000_000

_rank = 0
_tracer: Tracer | None = None
_atexit_registered = False
_listeners: list[Callable[[int], None]] = []


class TracingUnavailableError(AresError):
    """Tracing was switched on but OpenTelemetry's SDK is not installed."""


class SpanHandle(Protocol):
    """What ``with span(...) as s`` gives: add attributes and flows while the span is open."""

    def set(self, key: str, value: object) -> None: ...

    def flow_in(self, flow: int) -> None: ...

    def flow_out(self, flow: int) -> None: ...


class _NoSpan:
    """The one object ``span()`` returns while tracing is off (or below the span's level)."""

    __slots__ = ()

    def __enter__(self) -> _NoSpan:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    def set(self, key: str, value: object) -> None:
        return None

    def flow_in(self, flow: int) -> None:
        return None

    def flow_out(self, flow: int) -> None:
        return None


NO_SPAN = _NoSpan()


#: ``current_rank()`` of each level: hot paths compare ranks instead of calling ``enabled`` per event.
BASIC, FULL = _RANK["basic"], _RANK["full"]


def current_rank() -> int:
    """The level now as a rank: 0 (off), ``BASIC`` or ``FULL``."""
    return _rank


def on_level_change(listener: Callable[[int], None]) -> None:
    """Call ``listener(rank)`` now and after every change of level: instrumentation that puts its
    wrappers in place only while they would record (the sandboxes' operations) costs nothing off."""
    _listeners.append(listener)
    listener(_rank)


def _set_rank(rank: int) -> None:
    global _rank
    changed, _rank = rank != _rank, rank
    if changed:
        for listener in _listeners:
            listener(rank)


def enabled(level: Literal["basic", "full"] = "basic") -> bool:
    """Whether spans of ``level`` are recorded now (a global read: call it freely)."""
    return _rank >= _RANK[level]


def span(
    name: str,
    *,
    cat: str,
    level: Literal["basic", "full"] = "basic",
    track: str | None = None,
    flows_in: Iterable[int] = (),
    flows_out: Iterable[int] = (),
    **attrs: Any,
) -> AbstractContextManager[SpanHandle]:
    """A span around a block (sync ``with``, fine across ``await``s; asyncio tasks nest by context).

    ``track`` starts a named timeline track that nested spans inherit (default: the enclosing span's,
    else the process's "main"). ``flows_out``/``flows_in`` are ``flow_id``s: an arrow is drawn from
    the span holding an id in ``flows_out`` to every span holding it in ``flows_in``, in any process;
    a span holding the same id in both relays it (arrows in from its source, out from this span).
    An exception escaping the block marks the span errored.
    """
    tracer = _tracer
    if tracer is None or _RANK[level] > _rank:
        return NO_SPAN
    return tracer.span(name, cat, track, flows_in, flows_out, attrs)


def configure(
    level: Level,
    *,
    process: str,
    max_events: int = DEFAULT_MAX_EVENTS,
    provider: TracerProvider | None = None,
) -> None:
    """Install this process's tracer at ``level`` ("off" uninstalls it); ``process`` names its
    timeline. Calling again changes level and name but keeps the recorded events and the provider.

    ``provider``: an OpenTelemetry ``TracerProvider`` of your own (say, with an OTLP exporter) to
    record into; by default ARES makes one (``provider()`` returns it, to add exporters to).
    """
    global _tracer, _atexit_registered
    if level not in _RANK:
        raise ValueError(f"trace level must be one of: {', '.join(_RANK)}; got {level!r}")
    if level == "off":
        shutdown()
        return
    if max_events < 1:
        raise ValueError(f"max_events must be >= 1, got {max_events}")
    tracer = _tracer
    if tracer is None or (provider is not None and provider is not tracer.provider):
        try:
            from ares.tracing.otel import Tracer
        except ImportError as exc:
            raise TracingUnavailableError(
                f"span tracing needs OpenTelemetry's SDK: pip install 'ares[trace]' ({exc})"
            ) from exc
        if tracer is not None:
            tracer.close()
        tracer = Tracer(process, max_events=max_events, provider=provider)
        if not _atexit_registered:
            atexit.register(shutdown)
            _atexit_registered = True
    else:
        tracer.rename(process, max_events=max_events)
    _tracer = tracer
    _set_rank(_RANK[level])


def provider() -> TracerProvider | None:
    """The OpenTelemetry ``TracerProvider`` spans go to (None while tracing is off)."""
    return None if _tracer is None else _tracer.provider


def drain() -> list[dict[str, Any]]:
    """Take the Chrome trace events recorded so far in this process (with its process and track
    names), forgetting them: a Ray actor ships these to the driver. Empty while off."""
    return [] if _tracer is None else _tracer.recorder.drain()


def shutdown() -> None:
    """Flush the provider's exporters and switch tracing off; ``span()`` is a no-op again. Events not
    drained yet are lost, so drain (or write) first."""
    global _tracer
    tracer, _tracer = _tracer, None
    _set_rank(0)
    if tracer is not None:
        tracer.close()
