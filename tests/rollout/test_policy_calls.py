"""Each policy call is recorded with its step: the version serving when it was asked (which may
differ from the one that answered, if the weights changed while it was in flight) and how long it
queued (held by a paused gate during a weight update), through the JSONL records to the turn rows."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from ares.policies import make_policy
from ares.policies.versions import VersionReporting
from ares.presets import make
from ares.records.collectors import JsonlCollector
from ares.records.exports.turns import turn_rows
from ares.records.loader import load_episodes
from ares.rollout.pause import PolicyGate
from ares.rollout.runner import run_episodes


class _WatchedGate(PolicyGate):
    """A gate that says when a call has come to it (while paused, it is held there)."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = asyncio.Event()

    @contextlib.asynccontextmanager
    async def call(self) -> AsyncIterator[None]:
        if self.paused:
            self.waiting.set()
        async with super().call():
            yield


class _Trainer:
    """The trainer's side: its version, and the events of the scenario."""

    def __init__(self) -> None:
        self.version = 0
        self.first_call = asyncio.Event()
        self.release_first = asyncio.Event()


def _factory(trainer: _Trainer) -> Any:
    def factory(task: Any, action_format: Any) -> Any:
        oracle = make_policy("oracle")(task, action_format)

        class Versioned:
            calls = 0

            def current_version(self) -> int | None:
                return trainer.version

            async def act(self, observation: Any) -> Any:
                Versioned.calls += 1
                if Versioned.calls == 1:  # the weights change while this call is in flight
                    trainer.first_call.set()
                    await trainer.release_first.wait()
                return replace(await oracle.act(observation), policy_version=trainer.version)

        assert isinstance(Versioned(), VersionReporting)
        return Versioned()

    return factory


def test_calls_record_the_version_asked_and_the_queue_time(tmp_path: Path) -> None:
    trainer, gate = _Trainer(), _WatchedGate()
    marks: dict[str, float] = {}

    async def main() -> list[Any]:
        with JsonlCollector(tmp_path / "t.jsonl") as collector:
            run = asyncio.create_task(
                run_episodes(
                    lambda: make("humaneval", tasks="0"),
                    _factory(trainer),
                    episodes=1,
                    concurrency=1,
                    collector=collector,
                    gate=gate,
                )
            )
            await trainer.first_call.wait()
            trainer.version = 1  # a weight update lands while the first call is generating
            pausing = asyncio.create_task(gate.pause())
            trainer.release_first.set()
            await pausing  # the first call completed; the second will wait at the gate
            await gate.waiting.wait()  # the episode reached its boundary and asked: held
            marks["resumed_at"] = time.time()
            gate.resume()
            return await run

    results = asyncio.run(main())
    assert [(r.status.value, r.reward) for r in results] == [("finished", 1.0)]
    (episode,) = load_episodes(tmp_path / "t.jsonl")
    calls = [s.call for s in episode.steps if s.action is not None]
    assert all(c is not None for c in calls) and len(calls) == 2
    first, second = calls
    assert first is not None and second is not None
    assert first.requested_version == 0  # asked of version 0 ...
    assert second.requested_at < marks["resumed_at"] <= second.asked_at  # held while paused
    assert second.queue_s == second.asked_at - second.requested_at > 0
    rows = turn_rows([episode])
    assert [r["requested_version"] for r in rows] == [0, 1]
    assert [r["policy_version"] for r in rows] == [1, 1]  # ... answered by version 1
    assert rows[1]["queue_s"] == second.queue_s and rows[0]["answered_at"] == first.answered_at
