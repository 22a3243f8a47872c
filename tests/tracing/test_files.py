"""drain / write_trace / merge_traces / `ares trace merge`: processes kept apart on one clock."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ares import tracing
from conftest import slices, track_names

WORKER = """
import json, sys
from ares import tracing
tracing.configure("basic", process=sys.argv[1])
flow = tracing.flow_id("episode", 0)
with tracing.span("episode", cat="run", track="episode 0", flows_in=[flow], flows_out=[flow]):
    with tracing.span("step", cat="env"):
        pass
print(json.dumps(tracing.drain()))
"""


def run_worker(name: str) -> list[dict]:
    done = subprocess.run([sys.executable, "-c", WORKER, name], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def workers() -> dict[str, list[dict]]:
    """The drained events of two worker processes, "actor a" and "actor b"."""
    return {name: run_worker(f"actor {name}") for name in ("a", "b")}


def with_pid(events: list[dict], pid: int) -> list[dict]:
    """The events as if recorded by process ``pid`` (another host reusing a pid)."""
    out = []
    for e in events:
        e = {**e, "pid": pid}
        if "tid" in e and e["tid"] == events[0]["pid"]:
            e["tid"] = pid
        out.append(e)
    return out


def test_merge_keeps_colliding_pids_apart_on_one_clock(
    tmp_path: Path, workers: dict[str, list[dict]]
) -> None:
    a, b = with_pid(workers["a"], 4242), with_pid(workers["b"], 4242)
    tracing.write_trace(tmp_path / "a.json", a)
    tracing.write_trace(tmp_path / "b.json.gz", b)
    merged = tracing.merge_traces([tmp_path / "a.json", tmp_path / "b.json.gz"])
    names = {e["pid"]: e["args"]["name"] for e in merged if e.get("name") == "process_name"}
    assert sorted(names.values()) == ["actor a", "actor b"]
    assert names[4242] == "actor a"  # the first keeps its pid; the other is renumbered
    tracks = track_names(merged)
    assert sorted(tracks.values()) == ["episode 0", "episode 0"]
    assert len({tid for _pid, tid in tracks}) == 2  # thread ids unique across processes
    for e in slices(merged):
        assert (e["pid"], e["tid"]) in tracks
    # One clock: timestamps are untouched epoch microseconds, events come metadata first then by time.
    originals = sorted(e["ts"] for e in slices(a) + slices(b))
    assert sorted(e["ts"] for e in slices(merged)) == originals
    body = [e for e in merged if e["ph"] != "M"]
    assert all(e["ph"] == "M" for e in merged[: len(merged) - len(body)])
    assert [e["ts"] for e in body] == sorted(e["ts"] for e in body)


def test_two_drains_of_one_process_stay_one_process() -> None:
    tracing.configure("basic", process="driver")
    with tracing.span("first", cat="t", track="episode 1"):
        pass
    early = tracing.drain()
    with tracing.span("second", cat="t", track="episode 1"):
        pass
    merged = tracing.merge_traces([early, tracing.drain()])
    assert len({e["pid"] for e in merged}) == 1
    assert len({(e["pid"], e["tid"]) for e in slices(merged)}) == 1
    assert [e.get("name") for e in merged if e["ph"] == "M"] == ["process_name", "thread_name"]  # deduped


def test_written_file_is_chrome_json(tmp_path: Path, workers: dict[str, list[dict]]) -> None:
    events = workers["a"]
    tracing.write_trace(tmp_path / "t.json", events)
    document = json.loads((tmp_path / "t.json").read_text())
    assert document["otherData"]["clock"] == "epoch_us"
    assert document["traceEvents"] == tracing.merge_traces([events])
    assert tracing.read_trace(tmp_path / "t.json") == document["traceEvents"]
    (tmp_path / "array.json.gz").write_bytes(gzip.compress(json.dumps(events).encode()))
    assert tracing.read_trace(tmp_path / "array.json.gz") == events


def test_cli_merge(tmp_path: Path, workers: dict[str, list[dict]]) -> None:
    from typer.testing import CliRunner

    from ares.cli.main import app

    for name, events in workers.items():
        tracing.write_trace(tmp_path / f"{name}.json", events)
    out = tmp_path / "merged.json"

    def merge(*inputs: str) -> tuple[int, str]:
        result = CliRunner().invoke(
            app, ["trace", "merge", *(str(tmp_path / i) for i in inputs), "-o", str(out)]
        )
        return result.exit_code, result.output

    code, output = merge("a.json", "b.json")
    assert code == 0, output
    assert "4 spans from 2 process(es), 2 file(s)" in output
    events = tracing.read_trace(out)
    assert sorted(e["args"]["name"] for e in events if e.get("name") == "process_name") == [
        "actor a",
        "actor b",
    ]
    code, output = merge("a.json", "nope.json")
    assert code == 2 and "no such trace file" in output
    (tmp_path / "bad.json").write_text("{not json")
    code, output = merge("a.json", "bad.json")
    assert code == 2 and "cannot read the trace" in output
