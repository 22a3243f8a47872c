"""span(): nesting across asyncio tasks, tracks, levels, errors, flows, the buffer bound, OTel links."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import warnings

import pytest

from ares import tracing
from conftest import by_name, inside, slices, track_names


def test_off_is_one_shared_no_op() -> None:
    assert not tracing.enabled() and not tracing.enabled("full")
    first = tracing.span("a", cat="t", x=1)
    with first as handle, tracing.span("b", cat="t", level="full", track="elsewhere") as other:
        handle.set("k", object())
        handle.flow_in(1)
        handle.flow_out(2)
    assert first is other is handle
    assert tracing.drain() == []


def test_levels() -> None:
    tracing.configure("basic", process="levels")
    assert tracing.enabled("basic") and not tracing.enabled("full")
    with tracing.span("outer", cat="t"), tracing.span("detail", cat="t", level="full"):
        pass
    assert [e["name"] for e in slices(tracing.drain())] == ["outer"]
    tracing.configure("full", process="levels")  # a second call changes the level in place
    assert tracing.enabled("full")
    with tracing.span("outer", cat="t"), tracing.span("detail", cat="t", level="full"):
        pass
    assert sorted(e["name"] for e in slices(tracing.drain())) == ["detail", "outer"]
    tracing.configure("off", process="levels")
    assert not tracing.enabled()
    with tracing.span("outer", cat="t"):
        pass
    assert tracing.drain() == []


async def test_concurrent_tasks_keep_their_parents_and_tracks() -> None:
    tracing.configure("basic", process="nesting")
    gates = [asyncio.Event(), asyncio.Event()]

    async def episode(i: int) -> None:
        with tracing.span("episode", cat="t", track=f"episode {i}", index=i):
            for step in range(3):
                with tracing.span("step", cat="t", index=i, step=step):
                    gates[i].set()  # let the other task run inside this span
                    await gates[1 - i].wait()
                    await asyncio.sleep(0)
                    with tracing.span("exec", cat="t", index=i, step=step):
                        await asyncio.sleep(0)

    with tracing.span("run", cat="t"):
        await asyncio.gather(episode(0), episode(1))
    events = tracing.drain()
    tracks = track_names(events)
    (run,) = by_name(events, "run")
    assert tracks[(run["pid"], run["tid"])] == "main"
    for i in (0, 1):
        (ep,) = [e for e in by_name(events, "episode") if e["args"]["index"] == i]
        assert tracks[(ep["pid"], ep["tid"])] == f"episode {i}"
        steps = [e for e in by_name(events, "step") if e["args"]["index"] == i]
        execs = [e for e in by_name(events, "exec") if e["args"]["index"] == i]
        assert len(steps) == len(execs) == 3
        for step in steps:
            assert inside(step, ep)
            (exec_,) = [e for e in execs if e["args"]["step"] == step["args"]["step"]]
            assert inside(exec_, step)
    # The two episodes interleaved in time, yet each kept its own track.
    a, b = (by_name(events, "episode")[i] for i in (0, 1))
    assert a["tid"] != b["tid"] and a["ts"] < b["ts"] + b["dur"] and b["ts"] < a["ts"] + a["dur"]


async def test_the_otel_parent_follows_the_task_context() -> None:
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    tracing.configure("basic", process="otel")
    exporter = InMemorySpanExporter()
    provider = tracing.provider()
    assert provider is not None
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    async def child(name: str) -> None:
        with tracing.span(name, cat="t"):
            await asyncio.sleep(0)

    with tracing.span("a", cat="t"):
        task = asyncio.create_task(child("under-a"))
    with tracing.span("b", cat="t"):
        await asyncio.gather(task, child("under-b"))
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert spans["under-a"].parent.span_id == spans["a"].context.span_id
    assert spans["under-b"].parent.span_id == spans["b"].context.span_id


def test_an_escaping_exception_marks_the_span() -> None:
    tracing.configure("basic", process="errors")
    with pytest.raises(KeyError), tracing.span("fails", cat="t"):
        raise KeyError("x")
    with tracing.span("fine", cat="t"):
        pass
    events = tracing.drain()
    (fails,), (fine,) = by_name(events, "fails"), by_name(events, "fine")
    assert fails["args"]["error"] == "KeyError"
    assert "error" not in fine["args"]


def test_attributes_and_flows_added_after_start_reach_events_and_otel_links() -> None:
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    tracing.configure("basic", process="flows")
    exporter = InMemorySpanExporter()
    tracing.provider().add_span_processor(SimpleSpanProcessor(exporter))  # type: ignore[union-attr]
    relay, late, out = tracing.flow_id("relay"), tracing.flow_id("late"), tracing.flow_id("out")
    with tracing.span("s", cat="t", flows_in=[relay], flows_out=[relay], path=__file__) as span:
        span.set("count", 3)
        span.set("odd", {"not": "a primitive"})
        span.flow_in(late)
        span.flow_out(out)
    events = tracing.drain()
    (event,) = slices(events)
    assert event["args"]["count"] == 3 and event["args"]["odd"] == "{'not': 'a primitive'}"
    assert event["args"]["flows_in"] == [relay, late] and event["args"]["flows_out"] == [relay, out]
    flows = [e for e in events if e["ph"] in "stf"]
    assert {(e["ph"], e["id"]) for e in flows} == {("t", relay), ("f", late), ("s", out)}
    assert all(e["ts"] == event["ts"] and e["tid"] == event["tid"] for e in flows)
    assert events.index(flows[0]) == events.index(event) + 1  # right after their slice: bound to it
    (otel_span,) = exporter.get_finished_spans()
    links = {
        (link.attributes["ares.flow"], link.attributes["ares.flow.direction"]) for link in otel_span.links
    }
    assert links == {(relay, "in"), (relay, "out"), (late, "in"), (out, "out")}
    assert {link.context.span_id for link in otel_span.links} == {relay, late, out}  # deterministic targets


def test_the_buffer_keeps_the_newest_and_counts_the_dropped() -> None:
    tracing.configure("basic", process="bounded", max_events=5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(12):
            with tracing.span("s", cat="t", i=i):
                pass
    assert sum("trace buffer is full" in str(w.message) for w in caught) == 1
    events = tracing.drain()
    assert [e["args"]["i"] for e in slices(events)] == [7, 8, 9, 10, 11]
    (process,) = [e for e in events if e.get("name") == "process_name"]
    assert process["args"]["dropped_events"] == 7
    assert slices(tracing.drain()) == []  # drained means forgotten


def test_shutdown_stops_recording() -> None:
    tracing.configure("full", process="p")
    tracing.shutdown()
    assert not tracing.enabled() and tracing.provider() is None
    with tracing.span("after", cat="t"):
        pass
    assert tracing.drain() == []


def test_without_opentelemetry_off_works_and_on_says_what_to_install() -> None:
    code = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "from ares import tracing\n"
        "tracing.configure('off', process='x')\n"
        "with tracing.span('a', cat='t'): pass\n"
        "try:\n"
        "    tracing.configure('basic', process='x')\n"
        "except tracing.TracingUnavailableError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "pip install 'ares[trace]'" in done.stdout


def test_bad_levels_are_refused() -> None:
    with pytest.raises(ValueError, match="off, basic, full"):
        tracing.configure("verbose", process="x")  # type: ignore[arg-type]
