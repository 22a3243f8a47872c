"""The tracker protocol, its errors, and a fan-out that keeps a run going when one sink fails."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from ares.errors import AresError
from ares.rollout.results import EpisodeResult, RunSummary


class TrackingError(AresError):
    """A tracker cannot be made: a bad ``--track`` spec, or its library is not installed."""


@runtime_checkable
class Tracker(Protocol):
    """Where a run's metrics go. ``log_episode`` is called once per finished episode (from the
    runner's ``on_result``), ``log_summary`` once at the end with the run's summary and results,
    ``close`` once, whatever ended the run."""

    def log_episode(self, result: EpisodeResult) -> None: ...

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None: ...

    def log_summary(self, summary: RunSummary, results: Sequence[EpisodeResult] = ()) -> None: ...

    def close(self) -> None: ...


class Trackers:
    """Several trackers as one. A sink that raises is reported through ``on_error`` (with its name)
    and dropped: tracking never ends a run."""

    def __init__(
        self,
        trackers: Sequence[Tracker],
        *,
        names: Sequence[str] | None = None,
        on_error: Callable[[str, BaseException], None] | None = None,
    ) -> None:
        self._sinks = list(zip(names or [type(t).__name__ for t in trackers], trackers, strict=True))
        self._on_error = on_error

    def __len__(self) -> int:
        return len(self._sinks)

    def _each(self, call: Callable[[Tracker], Any]) -> None:
        for entry in list(self._sinks):
            name, tracker = entry
            try:
                call(tracker)
            except Exception as exc:
                self._sinks.remove(entry)
                if self._on_error is None:
                    raise
                self._on_error(name, exc)
                with contextlib.suppress(Exception):
                    tracker.close()

    def log_episode(self, result: EpisodeResult) -> None:
        self._each(lambda t: t.log_episode(result))

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        self._each(lambda t: t.log_metrics(metrics, step))

    def log_summary(self, summary: RunSummary, results: Sequence[EpisodeResult] = ()) -> None:
        self._each(lambda t: t.log_summary(summary, results))

    def close(self) -> None:
        sinks, self._sinks = self._sinks, []
        first: BaseException | None = None
        for name, tracker in sinks:
            try:
                tracker.close()
            except Exception as exc:
                if self._on_error is None:
                    first = first or exc
                else:
                    self._on_error(name, exc)
        if first is not None:
            raise first
