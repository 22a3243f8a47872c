"""Episodes that live through a weight update: the trainer pauses the gate mid-episode, no policy
call is in flight once ``pause()`` returns, it updates the version, resumes, and the episodes go on
to the end; the records show where the version changed."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from ares.policies import make_policy
from ares.records.collectors import MemoryCollector
from ares.records.exports.turns import turn_rows
from ares.rollout import RunSpec
from ares.rollout.pause import PolicyGate


def test_a_weight_update_mid_episode_keeps_the_episodes_and_records_the_change() -> None:
    gate = PolicyGate()
    state = {"version": 0, "answers": 0, "in_flight_at_update": None}
    first_answer = asyncio.Event()

    def factory(task: Any, action_format: Any) -> Any:
        oracle = make_policy("oracle")(task, action_format)

        class Versioned:
            async def act(self, observation: Any) -> Any:
                answer = replace(await oracle.act(observation), policy_version=state["version"])
                state["answers"] += 1
                first_answer.set()
                return answer

        return Versioned()

    async def main() -> list[Any]:
        spec = RunSpec.load("humaneval", tasks="0:2", concurrency=2, gate=gate)
        collector = MemoryCollector()
        run = asyncio.create_task(spec.play(factory, collector=collector))
        await first_answer.wait()
        await gate.pause()  # every call under way has completed; none starts now
        state["in_flight_at_update"] = gate.in_flight
        answered = state["answers"]
        for _ in range(50):
            await asyncio.sleep(0)  # the episodes reach their next boundary and wait there
        assert state["answers"] == answered and gate.paused
        state["version"] = 1  # the "weight update"
        gate.resume()
        results = await run
        return [results, collector.take()]

    results, episodes = asyncio.run(main())
    assert state["in_flight_at_update"] == 0
    assert all(r.status.value == "finished" and r.reward == 1.0 for r in results)  # none thrown away
    versions = [row["policy_version"] for row in turn_rows(episodes)]
    assert versions.count(0) >= 1 and versions.count(1) >= 1  # both versions answered
    for episode in episodes:  # within an episode, the version only moves forward
        mine = [row["policy_version"] for row in turn_rows([episode])]
        assert mine == sorted(mine)


def test_a_gate_never_left_open_by_accident() -> None:
    async def main() -> None:
        gate = PolicyGate()
        await gate.pause()
        assert gate.paused and gate.in_flight == 0
        entered = asyncio.Event()

        async def caller() -> None:
            async with gate.call():
                entered.set()

        task = asyncio.create_task(caller())
        for _ in range(20):
            await asyncio.sleep(0)
        assert not entered.is_set()  # paused: the call waits
        gate.resume()
        await task
        assert entered.is_set() and gate.in_flight == 0

    asyncio.run(main())
