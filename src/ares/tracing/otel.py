"""Spans on OpenTelemetry's SDK, recorded as Chrome trace events by a span processor.

Each ARES span is an SDK span (parent from the OpenTelemetry context, so asyncio tasks nest by
contextvars, and other OpenTelemetry instrumentation nests under or over ours); its track, category
and flows ride along as ``ares.*`` attributes. ``ChromeRecorder`` is a ``SpanProcessor`` that turns
each finished span into a Chrome ``X`` event in a bounded buffer. Any other processor added to the
same provider (an OTLP exporter) sees the same spans, with an OpenTelemetry link per flow.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections import deque
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.trace import Link, SpanContext, Status, StatusCode, TraceFlags

from ares.tracing.chrome import MAIN_TRACK, flow_events, metadata_events, slice_event

CAT, TRACK, FLOWS_IN, FLOWS_OUT = "ares.cat", "ares.track", "ares.flows_in", "ares.flows_out"
_TRACK_KEY = otel_context.create_key("ares.track")
_SCOPE = "ares"


class Tracer:
    """One process's tracer: the provider, its Chrome recorder, and the span factory."""

    def __init__(self, process: str, *, max_events: int, provider: TracerProvider | None) -> None:
        self.owns_provider = provider is None
        if provider is None:
            resource = Resource.create({"service.name": "ares", "ares.process": process})
            provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        self.provider = provider
        self.recorder = ChromeRecorder(process, max_events=max_events)
        provider.add_span_processor(self.recorder)
        self._otel = provider.get_tracer(_SCOPE)

    def rename(self, process: str, *, max_events: int) -> None:
        self.recorder.process = process
        self.recorder.resize(max_events)

    def close(self) -> None:
        self.recorder.closed = True
        if self.owns_provider:
            self.provider.shutdown()
        else:
            self.provider.force_flush()

    def span(
        self,
        name: str,
        cat: str,
        track: str | None,
        flows_in: Iterable[int],
        flows_out: Iterable[int],
        attrs: Mapping[str, Any],
    ) -> Span:
        return Span(self._otel, name, cat, track, list(flows_in), list(flows_out), attrs)


class Span:
    """An open ARES span: an SDK span made current in the OpenTelemetry context while it runs."""

    __slots__ = ("_attrs", "_cat", "_flows_in", "_flows_out", "_name", "_otel", "_span", "_token", "_track")

    def __init__(
        self,
        otel: otel_trace.Tracer,
        name: str,
        cat: str,
        track: str | None,
        flows_in: list[int],
        flows_out: list[int],
        attrs: Mapping[str, Any],
    ) -> None:
        self._otel, self._name, self._cat, self._track = otel, name, cat, track
        self._flows_in, self._flows_out, self._attrs = flows_in, flows_out, attrs
        self._span: Any = None
        self._token: object = None

    def __enter__(self) -> Span:
        parent = otel_context.get_current()
        track = self._track or otel_context.get_value(_TRACK_KEY, parent) or MAIN_TRACK
        attributes = {key: _attribute(value) for key, value in self._attrs.items()}
        attributes[CAT], attributes[TRACK] = self._cat, track
        links = [_link(f, "in") for f in self._flows_in] + [_link(f, "out") for f in self._flows_out]
        self._span = self._otel.start_span(
            self._name, parent, attributes=attributes, links=links,
            record_exception=False, set_status_on_exception=False,
        )  # fmt: skip
        current = otel_trace.set_span_in_context(self._span, parent)
        if self._track is not None:
            current = otel_context.set_value(_TRACK_KEY, track, current)
        self._token = otel_context.attach(current)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        span = self._span
        otel_context.detach(self._token)  # type: ignore[arg-type]
        if self._flows_in:
            span.set_attribute(FLOWS_IN, self._flows_in)
        if self._flows_out:
            span.set_attribute(FLOWS_OUT, self._flows_out)
        if exc_type is not None:
            span.set_attribute("error", exc_type.__name__)
            span.set_status(Status(StatusCode.ERROR, str(exc)[:500]))
            if exc is not None and isinstance(exc, Exception):
                span.record_exception(exc)
        span.end()

    def set(self, key: str, value: object) -> None:
        self._span.set_attribute(key, _attribute(value))

    def flow_in(self, flow: int) -> None:
        self._flows_in.append(flow)
        self._span.add_link(_flow_context(flow), {"ares.flow": flow, "ares.flow.direction": "in"})

    def flow_out(self, flow: int) -> None:
        self._flows_out.append(flow)
        self._span.add_link(_flow_context(flow), {"ares.flow": flow, "ares.flow.direction": "out"})


def _attribute(value: object) -> Any:
    """An OpenTelemetry attribute value: primitives and lists of them as they are, the rest as text."""
    if isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, list | tuple) and all(isinstance(v, str | bool | int | float) for v in value):
        return list(value)
    return str(value)


def _flow_context(flow: int) -> SpanContext:
    """The link target of a flow: a span context derived from the flow id alone, so both ends of a
    flow, whatever process recorded them, link to the same (remote, synthetic) context."""
    return SpanContext(
        trace_id=flow, span_id=flow, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED)
    )


def _link(flow: int, direction: str) -> Link:
    return Link(_flow_context(flow), {"ares.flow": flow, "ares.flow.direction": direction})


class ChromeRecorder(SpanProcessor):
    """Keeps each finished span as a Chrome trace event, at most ``max_events`` (oldest dropped)."""

    def __init__(self, process: str, *, max_events: int) -> None:
        self.process = process
        self.closed = False
        self.dropped = 0
        self._events: deque[dict[str, Any]] = deque(maxlen=max_events)
        self._tids: dict[str, int] = {}
        self._next_tid = 1
        self._lock = threading.Lock()

    def resize(self, max_events: int) -> None:
        if max_events != self._events.maxlen:
            with self._lock:
                self._events = deque(self._events, maxlen=max_events)

    def on_start(self, span: Any, parent_context: otel_context.Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        if self.closed or span.start_time is None or span.end_time is None:
            return
        attributes = dict(span.attributes or {})
        track = str(attributes.pop(TRACK, MAIN_TRACK))
        cat = str(attributes.pop(CAT, "otel"))
        pid = os.getpid()
        with self._lock:
            tid = self._tid(track, pid)
            event = slice_event(span.name, cat, span.start_time, span.end_time, pid, tid, attributes)
            events = self._events
            if len(events) == events.maxlen:
                if not self.dropped:
                    warnings.warn(
                        f"the trace buffer is full ({events.maxlen} events): the oldest are dropped; "
                        "drain more often or raise max_events",
                        RuntimeWarning,
                        stacklevel=2,
                    )
                self.dropped += 1
            events.append(event)

    def _tid(self, track: str, pid: int) -> int:
        """A track's Chrome thread id: "main" is the process's main thread (tid == pid), the others
        count up from 1 (skipping the pid); ``merge_traces`` keeps them apart across processes."""
        tid = self._tids.get(track)
        if tid is None:
            if track == MAIN_TRACK:
                tid = pid
            else:
                tid = self._next_tid + (self._next_tid == pid)
                self._next_tid = tid + 1
            self._tids[track] = tid
        return tid

    def drain(self) -> list[dict[str, Any]]:
        """Metadata (process and track names) then the events recorded since the last drain."""
        with self._lock:
            events, self._events = self._events, deque(maxlen=self._events.maxlen)
            tids = dict(self._tids)
        meta = metadata_events(os.getpid(), self.process, tids, dropped=self.dropped)
        return meta + flow_events(list(events))

    def shutdown(self) -> None:
        self.closed = True

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True
