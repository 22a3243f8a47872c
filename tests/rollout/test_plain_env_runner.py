"""The runner plays a plain Environment (reset/step/close only) through the episodic seam's adapter:
no task and no action format for the policy factory, the TimeSteps for the result, and a policy
failure that leaves the environment open for the next episode."""

from __future__ import annotations

from typing import Any

from ares.core import EpisodeStatus, TimeStep, restart, termination, transition
from ares.llm.types import LLMResponse, Usage
from ares.rollout.runner import run_episode, run_episodes


class CountdownEnv:
    """Three steps to a reward of 1.0; nothing but the Environment protocol."""

    def __init__(self) -> None:
        self.left = 0
        self.closes = 0
        self.resets = 0

    async def reset(self, *, seed: int | None = None, task: Any | None = None) -> TimeStep[str]:
        self.left, self.resets = 3, self.resets + 1
        return restart("go")

    async def step(self, action: Any) -> TimeStep[str]:
        self.left -= 1
        return termination(1.0) if self.left == 0 else transition(f"{self.left} left")

    async def close(self) -> None:
        self.closes += 1

    async def __aenter__(self) -> CountdownEnv:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class Answers:
    def __init__(self, fail_at: int | None = None) -> None:
        self.calls, self.fail_at = 0, fail_at

    async def act(self, observation: str) -> LLMResponse:
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError("the policy broke")
        return LLMResponse(content="ok", usage=Usage(prompt_tokens=10, completion_tokens=2), cost=0.5)


async def test_a_plain_env_runs_to_the_end_with_its_timesteps_as_the_result() -> None:
    opened: list[tuple[Any, Any]] = []

    def policies(task: Any, action_format: Any) -> Answers:
        opened.append((task, action_format))
        return Answers()

    results = await run_episodes(CountdownEnv, policies, episodes=3, concurrency=2)
    assert [r.status for r in results] == [EpisodeStatus.FINISHED] * 3
    assert [r.reward for r in results] == [1.0] * 3
    assert [r.steps for r in results] == [3] * 3
    assert [r.task_id for r in results] == ["0", "0", "0"]  # a plain env names no tasks: the selector
    assert opened == [(None, None)] * 3
    assert results[0].prompt_tokens == 30 and results[0].cost_usd == 1.5
    assert results[0].record == {}


async def test_a_policy_failure_errors_the_episode_and_leaves_the_plain_env_open() -> None:
    env = CountdownEnv()
    result = await run_episode(env, lambda task, fmt: Answers(fail_at=2), index=0, task=None, seed=0)
    assert result.status is EpisodeStatus.ERRORED and result.reward is None
    assert result.error is not None and result.error["message"] == "the policy broke"
    assert env.closes == 0  # nothing to end early: the next reset starts over
    again = await run_episode(env, lambda task, fmt: Answers(), index=1, task=None, seed=1)
    assert again.status is EpisodeStatus.FINISHED and env.resets == 2
