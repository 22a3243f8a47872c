"""Tracing is process-global: every test here starts and ends with it off."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ares import tracing


@pytest.fixture(autouse=True)
def tracing_off() -> Iterator[None]:
    tracing.shutdown()
    yield
    tracing.shutdown()


def slices(events: list[dict]) -> list[dict]:
    return [e for e in events if e["ph"] == "X"]


def track_names(events: list[dict]) -> dict[tuple[int, int], str]:
    """(pid, tid) -> track name, from the thread_name metadata."""
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("name") == "thread_name"}


def by_name(events: list[dict], name: str) -> list[dict]:
    return [e for e in slices(events) if e["name"] == name]


def inside(inner: dict, outer: dict) -> bool:
    """``inner``'s slice lies within ``outer``'s on the same track."""
    same_track = (inner["pid"], inner["tid"]) == (outer["pid"], outer["tid"])
    return (
        same_track and outer["ts"] <= inner["ts"] and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"]
    )
