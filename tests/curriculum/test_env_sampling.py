"""A curriculum inside one environment: ``make(sampler=..., pass_rates=...)`` draws the task of every
``reset()`` that names none from the pass rates, and each episode that ends feeds them (a real
HumanEval environment on the local sandbox)."""

from __future__ import annotations

import asyncio

from ares.curriculum import PassRateStore, SkipSolved
from ares.presets import make


def test_reset_draws_by_pass_rate_and_each_ended_episode_is_counted() -> None:
    store = PassRateStore()
    for task in ("humaneval_0", "humaneval_1"):
        for _ in range(2):
            store.record(task, True)

    async def play() -> list[str]:
        drawn = []
        env = make("humaneval", tasks="0:3", seed=1, sampler=SkipSolved(0.9, 2), pass_rates=store)
        async with env:
            for _ in range(3):
                await env.reset()
                assert env.task is not None
                drawn.append(env.task.id)
                await env.step(env.action_format.submit())  # the untouched stub fails its tests
            named = await env.reset(task="humaneval_0")  # a task named is played as named
            assert not named.last() and env.task is not None and env.task.id == "humaneval_0"
        return drawn

    assert asyncio.run(play()) == ["humaneval_2"] * 3
    assert (store.get("humaneval_2").samples, store.get("humaneval_2").rate) == (3, 0.0)
    assert store.get("humaneval_0").samples == 2  # the named one was abandoned by close: masked, not counted
