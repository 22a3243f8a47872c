"""The collectors' writer thread: batching, flush, idle exit, errors, and exit without close()."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ares.records import writer as writer_module
from ares.records.writer import BackgroundWriter


class Recorder:
    def __init__(self) -> None:
        self.batches: list[tuple[list[object], bool]] = []

    def __call__(self, events: list[object], durable: bool) -> None:
        self.batches.append((list(events), durable))

    @property
    def events(self) -> list[object]:
        return [e for batch, _ in self.batches for e in batch]


def writer_threads(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == name]


def test_flush_returns_after_every_earlier_event_is_handled_durably() -> None:
    seen = Recorder()
    writer = BackgroundWriter(seen, name="w-flush", interval_s=10.0)  # no tick: only flush drives it
    for i in range(100):
        writer.put(i)
    writer.flush()
    assert seen.events == list(range(100))
    assert seen.batches[-1][1] is True  # the batch a flush ends is written durably
    writer.close()


def test_events_are_written_in_batches_without_a_flush() -> None:
    seen = Recorder()
    writer = BackgroundWriter(seen, name="w-tick", interval_s=0.01)
    for i in range(10):
        writer.put(i)
    deadline = time.monotonic() + 10
    while len(seen.events) < 10 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert seen.events == list(range(10))
    assert len(seen.batches) < 10  # not one write per event
    writer.close()


def test_idle_thread_exits_and_a_new_event_starts_another(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer_module, "IDLE_EXIT_S", 0.05)
    seen = Recorder()
    writer = BackgroundWriter(seen, name="w-idle", interval_s=0.01)
    assert writer_threads("w-idle") == []  # nothing queued yet: no thread
    writer.put("a")
    writer.flush()
    deadline = time.monotonic() + 10
    while writer_threads("w-idle") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert writer_threads("w-idle") == []
    writer.put("b")
    writer.flush()
    assert seen.events == ["a", "b"]
    writer.close()


def test_a_failed_write_is_raised_to_the_caller() -> None:
    def broken(events: list[object], durable: bool) -> None:
        if events:
            raise OSError(28, "No space left on device")

    writer = BackgroundWriter(broken, name="w-error", interval_s=10.0)
    writer.put("x")
    with pytest.raises(RuntimeError, match="No space left on device"):
        writer.flush()
    writer.close()


def test_closed_writer_refuses_events_and_close_is_idempotent() -> None:
    seen = Recorder()
    writer = BackgroundWriter(seen, name="w-closed")
    writer.put(1)
    writer.close()
    writer.close()
    assert seen.events == [1]
    with pytest.raises(RuntimeError, match="closed"):
        writer.put(2)


def test_records_reach_disk_when_the_process_exits_without_close(tmp_path: Path) -> None:
    script = f"""
from pathlib import Path
from ares.records import JsonlCollector
from ares.records.model import EpisodeRecord, StepRecord
c = JsonlCollector(Path({str(tmp_path / "t.jsonl")!r}), interval_s=60.0)
c.begin_episode(EpisodeRecord("e1", "t", 0, {{}}, 1.0))
for i in range(50):
    c.record_step("e1", StepRecord(i, "MID", None, None, 0.0, 1.0, 1.0, 2.0))
"""  # the interval never elapses: only the exit hook can write these
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    lines = (tmp_path / "t.jsonl").read_text().splitlines()
    assert len(lines) == 51 and json.loads(lines[-1])["step"]["index"] == 49


def test_when_no_thread_may_start_events_are_written_in_the_callers_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At interpreter shutdown (Python 3.12+) starting a thread raises; the exit flush still writes."""

    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't create new thread at interpreter shutdown")

    seen = Recorder()
    writer = BackgroundWriter(seen, name="w-shutdown", interval_s=10.0)
    monkeypatch.setattr(threading.Thread, "start", refuse)
    writer.put("late")
    writer.flush()
    assert seen.events == ["late"] and seen.batches[-1][1] is True
    writer.close()
