"""Span tracing: reset/step/exec/verify/policy spans and cross-process flows, as a Perfetto timeline.

Off by default and then nearly free (``span()`` returns one shared no-op). ``configure("basic" |
"full", process=...)`` records spans with OpenTelemetry's SDK; a span processor keeps them as Chrome
trace events that ``drain()`` hands out and ``write_trace`` writes for Perfetto. ``flow_id`` derives
the same id in every process, so arrows link dispatch, episode and policy calls across Ray workers.
See docs/tracing.md.
"""

from ares.tracing.files import TraceFileError, merge_traces, read_trace, write_trace
from ares.tracing.flows import flow_id
from ares.tracing.spans import (
    DEFAULT_MAX_EVENTS,
    Level,
    SpanHandle,
    TracingUnavailableError,
    configure,
    drain,
    enabled,
    provider,
    shutdown,
    span,
)

__all__ = [
    "DEFAULT_MAX_EVENTS",
    "Level",
    "SpanHandle",
    "TraceFileError",
    "TracingUnavailableError",
    "configure",
    "drain",
    "enabled",
    "flow_id",
    "merge_traces",
    "provider",
    "read_trace",
    "shutdown",
    "span",
    "write_trace",
]
