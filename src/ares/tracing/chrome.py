"""Chrome trace events (the JSON that Perfetto and chrome://tracing open) for ARES spans.

A span is an ``X`` (complete) event on its process (``pid``) and track (``tid``, named by a
``thread_name`` metadata event). Timestamps are epoch microseconds (from ``time.time_ns``), so
processes on one machine share the clock. Flows are v1 flow events (``s`` start, ``t`` step, ``f``
end with ``bp: "e"``), which Perfetto binds to the slice open on their track at their timestamp: each
is written right after its span's ``X`` event at the span's start, where that span is the innermost
open slice. v1 flows, unlike v2 ``bind_id``s, allow several flows per span; Perfetto v52 draws them
across processes.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from typing import Any

MAIN_TRACK = "main"
FLOW_CAT, FLOW_NAME = "ares.flow", "flow"
_INTERNAL = "ares."
_instance: tuple[int, str] | None = None


def instance_id() -> str:
    """This process's identity in merged traces (two hosts may reuse a pid; a fork gets a new one)."""
    global _instance
    pid = os.getpid()
    if _instance is None or _instance[0] != pid:
        _instance = (pid, f"{pid}-{uuid.uuid4().hex[:12]}")
    return _instance[1]


def slice_event(
    name: str, cat: str, start_ns: int, end_ns: int, pid: int, tid: int, attributes: Mapping[str, Any]
) -> dict[str, Any]:
    """An ``X`` event; ``ares.flows_in``/``ares.flows_out`` become the args ``flows_in``/``flows_out``.

    Start and end are floored to whole microseconds separately, so a child's slice never pokes out of
    its parent's."""
    start_us = start_ns // 1000
    args: dict[str, Any] = {}
    for key, value in attributes.items():
        if key.startswith(_INTERNAL):
            key = key[len(_INTERNAL) :]
        if isinstance(value, bytes):
            value = value.decode(errors="replace")
        args[key] = list(value) if isinstance(value, tuple) else value
    event = {"ph": "X", "name": name, "cat": cat, "ts": start_us, "dur": max(0, end_ns // 1000 - start_us)}
    event.update(pid=pid, tid=tid, args=args)
    return event


def metadata_events(
    pid: int, process: str, tids: Mapping[str, int], *, dropped: int = 0
) -> list[dict[str, Any]]:
    """The process's name (with its instance id, and the events dropped, if any) and its tracks'."""
    args: dict[str, Any] = {"name": process, "ares_instance": instance_id()}
    if dropped:
        args["dropped_events"] = dropped
    events = [{"ph": "M", "name": "process_name", "pid": pid, "tid": pid, "args": args}]
    for track, tid in tids.items():
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": track}})
    return events


def flow_events(slices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``slices`` in timeline order, each followed by the flow events of its ``flows_in``/``flows_out``."""
    out: list[dict[str, Any]] = []
    for event in sorted(slices, key=_order):
        out.append(event)
        args = event.get("args") or {}
        ins, outs = args.get("flows_in") or (), args.get("flows_out") or ()
        if not ins and not outs:
            continue
        where = {"ts": event["ts"], "pid": event["pid"], "tid": event["tid"]}
        for flow in dict.fromkeys([*ins, *outs]):
            phase = ("t" if flow in outs else "f") if flow in ins else "s"
            flow_event = {"ph": phase, "cat": FLOW_CAT, "name": FLOW_NAME, "id": flow, **where}
            if phase == "f":
                flow_event["bp"] = "e"
            out.append(flow_event)
    return out


def ordered(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Metadata first, then events by time, outer slices before inner ones that start with them; a
    flow event stays right after the slice it follows (that is what binds it to that slice)."""
    meta: list[dict[str, Any]] = []
    groups: list[list[dict[str, Any]]] = []
    for event in events:
        phase = event.get("ph")
        if phase == "M":
            meta.append(event)
        elif phase in ("s", "t", "f") and groups and _binds(groups[-1][0], event):
            groups[-1].append(event)
        else:
            groups.append([event])
    groups.sort(key=lambda group: _order(group[0]))
    return meta + [event for group in groups for event in group]


def _binds(head: dict[str, Any], flow: dict[str, Any]) -> bool:
    return (
        head.get("ph") == "X"
        and head.get("ts") == flow.get("ts")
        and head.get("pid") == flow.get("pid")
        and head.get("tid") == flow.get("tid")
    )


def _order(event: dict[str, Any]) -> tuple[float, float]:
    return (float(event.get("ts", 0)), -float(event.get("dur", 0)))
