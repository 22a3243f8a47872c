"""A collector that keeps an episode's record events in memory, to be replayed elsewhere.

A Ray actor records its episodes into one of these and ships the events back with the episode's
result; the driver replays them into the run's real collector. Records are written once, by the
driver, and an actor that dies takes only unsent events with it (its episodes are then recorded by
the driver as errored).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ares.records.collectors import TrajectoryCollector
from ares.records.model import EpisodeRecord, StepRecord

#: ("begin", EpisodeRecord) | ("step", episode_id, StepRecord) | ("end", episode_id, end kwargs)
RecordEvent = tuple[Any, ...]


class BufferCollector:
    """Buffers collector calls until ``take()``; cheap to pickle (records are frozen dataclasses)."""

    def __init__(self) -> None:
        self._events: list[RecordEvent] = []

    def begin_episode(self, episode: EpisodeRecord) -> None:
        self._events.append(("begin", episode))

    def record_step(self, episode_id: str, step: StepRecord) -> None:
        self._events.append(("step", episode_id, step))

    def end_episode(self, episode_id: str, **end: Any) -> None:
        self._events.append(("end", episode_id, end))

    def take(self) -> list[RecordEvent]:
        """The events buffered so far, which the buffer then forgets."""
        events, self._events = self._events, []
        return events

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self._events.clear()


def replay(events: Iterable[RecordEvent], collector: TrajectoryCollector) -> None:
    """Hand buffered events to ``collector`` in the order they happened."""
    for event in events:
        kind = event[0]
        if kind == "begin":
            collector.begin_episode(event[1])
        elif kind == "step":
            collector.record_step(event[1], event[2])
        elif kind == "end":
            collector.end_episode(event[1], **event[2])
        else:  # pragma: no cover - a version mismatch between driver and actor
            raise ValueError(f"unknown record event {kind!r}")
