"""Shared-prefix groups (``branch_at``) under a trainer's gate and staleness bound: the prefix's and
every branch's policy calls pass the gate, and each branch's answers are held to the bound. Real
HumanEval episodes on the local sandbox, forked after the first answer (a branch's record starts at
the fork; the prefix's answer is in its prompt)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

from ares.policies import make_policy
from ares.presets import make
from ares.records.collectors import MemoryCollector
from ares.rollout import PolicyGate, Staleness
from ares.rollout.runner import run_episodes


class _Versioned:
    """The oracle, its answers stamped with ``trainer["serving"]`` (the trainer's version unless set);
    ``trainer["on_call"](n)`` runs as the run's n-th call (from 1) is answered."""

    calls = 0

    def __init__(self, oracle: Any, trainer: dict[str, Any]) -> None:
        self.oracle, self.trainer = oracle, trainer

    async def act(self, observation: Any) -> Any:
        _Versioned.calls += 1
        self.trainer.get("on_call", lambda n: None)(_Versioned.calls)
        version = self.trainer.get("serving", self.trainer["version"])
        return replace(await self.oracle.act(observation), policy_version=version)


def _factory(trainer: dict[str, Any]) -> Any:
    _Versioned.calls = 0
    return lambda task, action_format: _Versioned(make_policy("oracle")(task, action_format), trainer)


def test_branches_wait_at_a_paused_gate_and_go_on_after_resume() -> None:
    gate = PolicyGate()
    trainer: dict[str, Any] = {"version": 0}

    async def main() -> tuple[list[Any], list[Any], float]:
        paused = asyncio.Event()

        async def update() -> None:  # right after the prefix's answer: pause, new weights, resume
            await gate.pause()
            paused.set()

        def on_call(n: int) -> None:  # the prefix's answer: the trainer pauses to update
            if n == 1:
                trainer["pausing"] = asyncio.create_task(update())

        trainer["on_call"] = on_call
        collector = MemoryCollector()
        run = asyncio.create_task(
            run_episodes(
                lambda: make("humaneval", tasks="0"), _factory(trainer), episodes=2, group_size=2,
                branch_at=1, gate=gate, collector=collector,
            )
        )  # fmt: skip
        await paused.wait()
        for _ in range(6000):  # both branches reach the gate and are held there (however slow the fork)
            if gate.held == 2:
                break
            await asyncio.sleep(0.01)
        trainer["version"] = 1
        resumed_at = time.time()
        gate.resume()
        return await run, collector.take(), resumed_at

    results, episodes, resumed_at = asyncio.run(main())
    assert [(r.status.value, r.reward) for r in results] == [("finished", 1.0)] * 2
    branches = [e for e in episodes if e.status == "finished"]
    assert len(branches) == 2 and _Versioned.calls == 5  # the prefix's answer, two per branch
    for episode in branches:
        versions = [s.action.policy_version for s in episode.steps if s.action is not None]
        assert versions == [1, 1]  # both of the branch's answers came after the update
        call = episode.steps[1].call  # its first: held at the gate until resume()
        assert call is not None and call.requested_at < resumed_at <= call.asked_at and call.queue_s > 0


def test_a_branch_whose_answers_fall_behind_is_ended_stale() -> None:
    """Once the group is forked the trainer moves three versions on, while the server still answers
    with version 0: each branch's first answer is 3 behind (bound 1), so the branch ends stale."""
    trainer: dict[str, Any] = {"version": 0}

    def on_call(n: int) -> None:
        if n == 2:  # a branch's first call
            trainer.update(version=3, serving=0)

    trainer["on_call"] = on_call
    results = asyncio.run(
        run_episodes(
            lambda: make("humaneval", tasks="0"), _factory(trainer), episodes=2, group_size=2, branch_at=1,
            staleness=Staleness(lambda: trainer["version"], 1),
        )
    )  # fmt: skip
    assert len(results) == 2
    for result in results:
        assert (result.status.value, result.blame, result.masked) == ("errored", "infra", True)
        assert result.error is not None and result.error["type"] == "StaleEpisodeError"
        assert "version 0, 3 behind the current 3" in result.error["message"]
