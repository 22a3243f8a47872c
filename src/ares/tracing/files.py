"""Trace files: write one, read one, merge many (one per process) into one timeline.

Every ARES process stamps events in epoch microseconds, so merging needs no clock shifting: it keeps
each process apart (a pid seen in two files from different processes, as on two hosts, gets a new
one), keeps every track apart (thread ids unique across processes, as Perfetto expects), drops
repeated metadata and orders the events.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import orjson

from ares.errors import AresError
from ares.tracing.chrome import ordered

TraceSource = str | os.PathLike[str] | Sequence[dict[str, Any]]


class TraceFileError(AresError):
    """A trace file could not be read as Chrome trace JSON."""


def write_trace(path: str | os.PathLike[str], events: Iterable[dict[str, Any]]) -> None:
    """Write ``events`` as a Chrome JSON trace (gzip'd if ``path`` ends in ``.gz``), atomically."""
    merged = merge_traces([list(events)])
    dropped: dict[int, int] = {}  # each drain repeats its process's running count: keep the last
    for event in merged:
        if event.get("ph") == "M" and event.get("name") == "process_name":
            dropped[event["pid"]] = int((event.get("args") or {}).get("dropped_events", 0))
    document = {
        "traceEvents": merged,
        "displayTimeUnit": "ms",
        "otherData": {"generator": "ares", "clock": "epoch_us", "dropped_events": sum(dropped.values())},
    }
    data = orjson.dumps(document)
    target = Path(path)
    if target.suffix == ".gz":
        data = gzip.compress(data, compresslevel=6)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    partial.write_bytes(data)
    partial.replace(target)


def read_trace(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The events of a Chrome JSON trace file (object or array form, plain or gzip'd)."""
    try:
        data = Path(path).read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        document = orjson.loads(data)
    except (OSError, orjson.JSONDecodeError, gzip.BadGzipFile) as exc:
        raise TraceFileError(f"cannot read the trace {path}: {exc}") from exc
    events = document.get("traceEvents") if isinstance(document, dict) else document
    if not isinstance(events, list):
        raise TraceFileError(f"{path} is not a Chrome trace: no traceEvents list")
    return [e for e in events if isinstance(e, dict)]


def merge_traces(sources: Iterable[TraceSource]) -> list[dict[str, Any]]:
    """One timeline from per-process traces (file paths or event lists, e.g. ``drain()`` results).

    Events of one process may come in several sources (a process drained twice): they are recognised
    by the instance id in their process metadata. Without one, a pid is one process per source.
    """
    loaded = [read_trace(s) if isinstance(s, str | os.PathLike) else list(s) for s in sources]
    # Who each (source, pid) is, and every pid and tid already in use, before anything is renumbered.
    owner: dict[tuple[int, int], object] = {}
    taken: set[int] = set()
    for index, events in enumerate(loaded):
        for event in events:
            pid, tid = _id(event, "pid"), _id(event, "tid")
            if pid is not None:
                taken.add(pid)
                if event.get("ph") == "M" and event.get("name") == "process_name":
                    instance = (event.get("args") or {}).get("ares_instance")
                    if instance:
                        owner[(index, pid)] = instance
            if tid is not None:
                taken.add(tid)
    pids: dict[object, int] = {}  # process -> its pid in the merged trace
    tids: dict[tuple[object, int], int] = {}  # (process, tid) -> its tid in the merged trace
    user: dict[int, object] = {}  # pid or tid in the merged trace -> its process (one id space)
    fresh = _Fresh(taken)
    merged: list[dict[str, Any]] = []
    seen_meta: set[bytes] = set()
    for index, events in enumerate(loaded):
        for event in events:
            pid, tid = _id(event, "pid"), _id(event, "tid")
            if pid is None:
                merged.append(event)
                continue
            process = owner.get((index, pid), (index, pid))
            new_pid = pids.get(process)
            if new_pid is None:
                new_pid = pids[process] = _claim(user, pid, process, fresh)
            event = {**event, "pid": new_pid}
            if tid is not None:
                new_tid = tids.get((process, tid))
                if new_tid is None:  # the main thread (tid == pid) follows its process
                    new_tid = new_pid if tid == pid else _claim(user, tid, process, fresh)
                    tids[(process, tid)] = new_tid
                event["tid"] = new_tid
            if event.get("ph") == "M":
                key = orjson.dumps(event, option=orjson.OPT_SORT_KEYS)
                if key in seen_meta:
                    continue
                seen_meta.add(key)
            merged.append(event)
    return ordered(merged)


def _claim(user: dict[int, object], wanted: int, process: object, fresh: _Fresh) -> int:
    """``wanted`` if no other process has it, else a fresh id; either way now ``process``'s."""
    got = wanted if user.setdefault(wanted, process) == process else fresh()
    user[got] = process
    return got


class _Fresh:
    """Hands out ids no source uses."""

    def __init__(self, taken: set[int]) -> None:
        self._next = max(taken, default=0) + 1

    def __call__(self) -> int:
        value, self._next = self._next, self._next + 1
        return value


def _id(event: dict[str, Any], key: str) -> int | None:
    value = event.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None
