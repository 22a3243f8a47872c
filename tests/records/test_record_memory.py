"""What collectors hold: an episode's requests, responses and messages are released when it ends,
and an episode's cached JSON is bounded, so a collector shared by a long run does not grow."""

from __future__ import annotations

import gc
import json
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ares.llm.types import Message
from ares.records import JsonDirCollector, JsonlCollector
from ares.records.encoding import JsonFragments
from ares.records.loader import load_episodes
from ares.records.model import EpisodeRecord, StepRecord
from ares.records.rollout_trace import StepTrace
from weak_tracked import TrackedMessage, TrackedRequest, TrackedResponse


def begin(collector: Any, episode_id: str) -> None:
    collector.begin_episode(EpisodeRecord(episode_id, "task", 0, {"class": "Test"}, 1.0))


def play(collector: Any, episode_id: str, steps: int = 3) -> list[weakref.ref[Any]]:
    """Record ``steps`` traced steps of a growing conversation; weak references to what they carry."""
    refs: list[weakref.ref[Any]] = []
    history: tuple[Message, ...] = (TrackedMessage("user", f"task of {episode_id}"),)
    previous = None
    for index in range(steps):
        request = TrackedRequest(messages=history, system_prompt="sys")
        response = None if index == 0 else TrackedResponse(content=f"answer {index}")
        trace = StepTrace("full", previous, response, None, 1.0, None, None, previous_observation=index > 0)
        kind = "FIRST" if index == 0 else "MID"
        collector.record_step(
            episode_id, StepRecord(index, kind, request, response, None, 1.0, 1.0, 2.0, trace)
        )
        refs += [weakref.ref(request), *(weakref.ref(m) for m in history)]
        if response is not None:
            refs.append(weakref.ref(response))
        history = (*history, TrackedMessage("assistant", f"answer {index}"), TrackedMessage("user", "ok"))
        previous = request
    return refs


def end(collector: Any, episode_id: str) -> None:
    collector.end_episode(episode_id, status="finished", ended_at=3.0, total_reward=1.0)


COLLECTORS: dict[str, Callable[[Path], Any]] = {
    "jsonl": lambda tmp: JsonlCollector(tmp / "t.jsonl"),
    "jsondir": lambda tmp: JsonDirCollector(tmp / "dir"),
}


@pytest.mark.parametrize("kind", COLLECTORS)
def test_an_episodes_objects_are_released_when_it_ends_not_before(tmp_path: Path, kind: str) -> None:
    collector = COLLECTORS[kind](tmp_path)
    try:
        begin(collector, "first")
        begin(collector, "second")
        first = play(collector, "first")
        second = play(collector, "second")
        end(collector, "first")
        collector.flush()
        gc.collect()
        assert [r for r in first if r() is not None] == []
        # The episode still open keeps its messages (its next steps render only the new ones).
        assert any(r() is not None for r in second)
        assert collector.open_episodes == 1
        end(collector, "second")
        collector.flush()
        gc.collect()
        assert [r for r in second if r() is not None] == []
        assert collector.open_episodes == 0
    finally:
        collector.close()
    where = tmp_path / ("t.jsonl" if kind == "jsonl" else "dir")
    episodes = sorted(load_episodes(where), key=lambda e: e.episode_id)
    assert [(e.episode_id, e.status, len(e.steps)) for e in episodes] == [
        ("first", "finished", 3), ("second", "finished", 3),
    ]  # fmt: skip
    assert episodes[0].steps[2].trace["prompt"][1]["content"] == "task of first"


@pytest.mark.parametrize("kind", COLLECTORS)
def test_a_long_run_leaves_nothing_behind(tmp_path: Path, kind: str) -> None:
    collector = COLLECTORS[kind](tmp_path)
    refs: list[weakref.ref[Any]] = []
    with collector:
        for episode in range(50):
            begin(collector, f"e{episode}")
            refs += play(collector, f"e{episode}")
            end(collector, f"e{episode}")
        collector.flush()
        gc.collect()
        assert collector.open_episodes == 0
        assert [r for r in refs if r() is not None] == []


def test_a_step_of_an_episode_never_begun_is_written_and_leaves_nothing(tmp_path: Path) -> None:
    with JsonlCollector(tmp_path / "t.jsonl") as collector:
        refs = play(collector, "orphan", steps=1)
        collector.flush()
        gc.collect()
        assert collector.open_episodes == 0 and all(r() is None for r in refs)
    (line,) = (tmp_path / "t.jsonl").read_text().splitlines()
    assert json.loads(line)["episode_id"] == "orphan"


def test_cached_texts_are_bounded_by_count_and_size() -> None:
    fragments = JsonFragments(size=4, max_chars=100)
    kept = [[i] for i in range(20)]
    for value in kept:
        assert fragments.text("v", value, lambda v: v) == json.dumps(value)
        assert fragments.cached_objects <= 4 and fragments.cached_chars <= 100
    big = ["x" * 200]
    assert fragments.text("v", big, lambda v: v) == json.dumps(big)  # encoded, not kept
    assert fragments.cached_chars <= 100
    ref = weakref.ref(big_obj := TrackedResponse(content="y" * 500))
    fragments.text("response", big_obj, lambda r: {"content": r.content})
    del big_obj
    gc.collect()
    assert ref() is None  # a text over the budget keeps no reference to its object
    medium = [["z" * 30] for _ in range(5)]
    for value in medium:
        fragments.text("v", value, lambda v: v)
    assert fragments.cached_chars <= 100 and fragments.cached_objects <= 3  # ~36 chars each
