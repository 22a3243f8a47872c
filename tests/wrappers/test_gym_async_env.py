"""AsyncAresGymEnv inside the test's own event loop, on real HumanEval environments."""

from __future__ import annotations

import asyncio

import pytest
from gymnasium.error import ClosedEnvironmentError, ResetNeeded

import ares
from ares.agents.bash import BashActionFormat
from ares.core.status import EpisodeStatus
from ares.envs.code_env import CodeEnvironment
from ares.policies import make_policy
from ares.wrappers.gym import AsyncAresGymEnv, wrap_as_gym

FMT = BashActionFormat()


def code_env(env: AsyncAresGymEnv) -> CodeEnvironment:
    inner = env.unwrapped_ares
    assert isinstance(inner, CodeEnvironment)
    return inner


async def test_oracle_policy_drives_the_async_env() -> None:
    async with AsyncAresGymEnv(ares.make("humaneval", tasks="0:3")) as env:
        obs, info = await env.reset(seed=3)
        assert obs in env.observation_space and info["episode_id"] == env.episode_id
        inner = code_env(env)
        assert inner.task is not None
        policy = make_policy("oracle")(inner.task, inner.action_format)
        terminated = truncated = False
        steps = 0
        while not (terminated or truncated):
            obs, reward, terminated, truncated, info = await env.step(await policy.act(obs))
            steps += 1
        assert (steps, reward, terminated, truncated) == (2, 1.0, True, False)
        assert info["status"] == "finished" and env.needs_reset
        assert env.render().endswith("[episode over: finished, reward 1]")
        with pytest.raises(ResetNeeded):
            await env.step(FMT.submit())


async def test_reset_needed_before_reset_and_bad_options() -> None:
    async with wrap_as_gym(ares.make("humaneval", tasks="0:1"), async_mode=True) as env:
        assert isinstance(env, AsyncAresGymEnv) and env.needs_reset
        with pytest.raises(ResetNeeded, match="before reset"):
            await env.step(FMT.submit())
        with pytest.raises(TypeError, match="must be a dict"):
            await env.reset(options=[("task", 0)])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="render_mode applies to the sync env"):
        wrap_as_gym(ares.make("humaneval", tasks="0:1"), async_mode=True, render_mode="ansi")  # type: ignore[call-overload]


async def test_close_mid_episode_aborts_and_stops_the_sandbox() -> None:
    env = AsyncAresGymEnv(ares.make("humaneval", tasks="0:1"))
    await env.reset()
    await env.step(FMT.command("echo working"))
    inner = code_env(env)
    sandbox = inner.sandbox
    assert sandbox is not None and sandbox.running
    await env.close()
    assert inner.episode is not None and inner.episode.status is EpisodeStatus.ABORTED
    assert not sandbox.running and env.closed
    await env.close()  # idempotent
    with pytest.raises(ClosedEnvironmentError):
        await env.reset()


async def test_many_async_envs_share_one_loop() -> None:
    envs = [AsyncAresGymEnv(ares.make("humaneval", tasks="0:3")) for _ in range(3)]
    try:
        resets = await asyncio.gather(*(env.reset(options={"task": i}) for i, env in enumerate(envs)))
        assert len({info["task_id"] for _, info in resets}) == 3
        results = await asyncio.gather(*(env.step(FMT.submit()) for env in envs))
        assert all(terminated and not truncated for _, _, terminated, truncated, _ in results)
    finally:
        await asyncio.gather(*(env.close() for env in envs))
    assert all(code_env(env).closed for env in envs)
