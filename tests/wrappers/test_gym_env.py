"""AresGymEnv on real HumanEval environments (local sandbox): gymnasium's checker, episodes, lifecycle."""

from __future__ import annotations

import asyncio
import threading
import warnings
from collections.abc import Iterator

import gymnasium
import pytest
from gymnasium.error import ClosedEnvironmentError, ResetNeeded
from gymnasium.utils.env_checker import check_env

import ares
from ares.agents.bash import BashActionFormat
from ares.core.status import EpisodeStatus
from ares.envs.code_env import CodeEnvironment
from ares.llm.types import LLMRequest, LLMResponse
from ares.policies.scripted import oracle_command
from ares.wrappers.gym import AresGymEnv, LLMRequestSpace, LLMResponseSpace, wrap_as_gym

FMT = BashActionFormat()


@pytest.fixture(autouse=True)
def no_leaked_threads() -> Iterator[None]:
    """Every test must leave no loop thread (or its executor threads) behind."""
    before = set(threading.enumerate())
    yield
    for thread in set(threading.enumerate()) - before:
        thread.join(timeout=10)
        assert not thread.is_alive(), f"thread {thread.name} outlived its environment"


@pytest.fixture
def env() -> Iterator[AresGymEnv]:
    with AresGymEnv(ares.make("humaneval", tasks="0:3"), render_mode="ansi") as gym_env:
        yield gym_env


def ares_env(env: AresGymEnv) -> CodeEnvironment:
    inner = env.unwrapped_ares
    assert isinstance(inner, CodeEnvironment)
    return inner


def oracle_action(env: AresGymEnv) -> LLMResponse:
    task = ares_env(env).task
    assert task is not None
    return FMT.command(oracle_command(task))


def test_check_env_passes_on_a_wrapped_humaneval_env() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with AresGymEnv(ares.make("humaneval", tasks="0:3"), render_mode="ansi") as env:
            check_env(env)
    # The one warning left cannot be avoided without gymnasium.make: check_env can only re-create an env
    # in each render mode from a spec, and only gymnasium.make gives an env its spec.
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and "not having a spec" in messages[0], messages


def test_check_env_passes_without_warnings_through_gymnasium_make() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = gymnasium.make("ares/humaneval", tasks="0:3", render_mode="ansi")
        try:
            # gymnasium recommends checking the unwrapped env (make adds its checker/order wrappers).
            check_env(env.unwrapped)
            env.reset(seed=1)  # and the wrapped env runs clean through the passive checker
            env.step(env.action_space.sample())
        finally:
            env.close()
    assert [str(w.message) for w in caught] == []


def test_oracle_episode_terminates_with_reward_one(env: AresGymEnv) -> None:
    obs, info = env.reset(seed=0)
    assert isinstance(obs, LLMRequest) and obs in env.observation_space
    assert info["status"] == "running" and info["timestep"].first() and info["seed"] == 0
    assert info["episode_id"] == env.episode_id and info["task_id"] == ares_env(env).task.id  # type: ignore[union-attr]
    obs, reward, terminated, truncated, info = env.step(oracle_action(env))
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info["status"] == "running" and "episode_id" not in info
    obs, reward, terminated, truncated, info = env.step(FMT.submit())
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info["status"] == "finished" and info["truncation"] is None
    assert info["episode_id"] == env.episode_id and info["timestep"].last()
    assert isinstance(info["reward_terms"], dict)
    assert obs in env.observation_space  # the last request stands in for ARES's empty LAST observation


def test_step_limit_truncates() -> None:
    limited = AresGymEnv(ares.make("humaneval", tasks="0:1", step_limit=2))
    with limited:
        limited.reset()
        assert limited.step(FMT.command("echo one"))[2:4] == (False, False)
        _, reward, terminated, truncated, info = limited.step(FMT.command("echo two"))
    assert (terminated, truncated) == (False, True)
    assert reward == 0.0 and info["status"] == "truncated" and info["truncation"] == "step_limit"
    assert info["timestep"].discount == 1.0


def test_reset_needed_before_reset_and_after_the_last_step(env: AresGymEnv) -> None:
    with pytest.raises(ResetNeeded, match="before reset"):
        env.step(FMT.submit())
    env.reset()
    env.step(FMT.submit())
    with pytest.raises(ResetNeeded, match="does not reset by itself"):
        env.step(FMT.submit())
    env.reset()  # a reset is all it takes
    assert env.step(FMT.submit())[2] is True


def test_bad_actions_are_clear_errors_that_keep_the_episode(env: AresGymEnv) -> None:
    env.reset()
    with pytest.raises(TypeError, match=r"expects an ares\.LLMResponse, got str"):
        env.step("ls")
    with pytest.raises(ValueError, match="malformed"):
        env.step(LLMResponse(content=3))  # type: ignore[arg-type]
    assert ares_env(env).episode.status is EpisodeStatus.RUNNING  # type: ignore[union-attr]
    assert env.step(FMT.command("true"))[2:4] == (False, False)


def test_close_mid_episode_aborts_stops_the_sandbox_and_the_thread() -> None:
    env = AresGymEnv(ares.make("humaneval", tasks="0:3"))
    env.reset()
    env.step(FMT.command("sleep 1000 > /dev/null 2>&1 & echo started"))
    inner = ares_env(env)
    sandbox = inner.sandbox
    assert sandbox is not None and sandbox.running
    env.close()
    assert inner.episode is not None and inner.episode.status is EpisodeStatus.ABORTED
    assert not sandbox.running and inner.sandbox is None and inner.closed
    assert env.private_loop.closed  # (and the autouse fixture checks no thread outlives the test)
    env.close()  # idempotent
    with pytest.raises(ClosedEnvironmentError):
        env.reset()
    with pytest.raises(ClosedEnvironmentError):
        env.step(FMT.submit())


async def test_the_sync_env_works_inside_a_running_event_loop() -> None:
    # Nothing is awaited: the caller's loop just waits while the env's own loop thread does the work.
    with AresGymEnv(ares.make("humaneval", tasks="0:3"), render_mode="ansi") as env:
        env.reset(options={"task": 0})
        env.step(oracle_action(env))
        _, reward, terminated, _, _ = env.step(FMT.submit())
        assert (reward, terminated) == (1.0, True)
        assert "[episode over: finished, reward 1]" in (env.render() or "")


def test_render_shows_the_conversation_so_far(env: AresGymEnv) -> None:
    assert env.render() == ""
    obs, _ = env.reset(options={"task": 1})
    text = env.render() or ""
    assert text.startswith("[system]\n") and "\n\n[user]\n" in text
    assert obs.system_prompt in text and obs.messages[0].text in text
    env.step(FMT.command("echo render-marker-$((6 * 7))"))
    text = env.render() or ""
    assert "[assistant]\nRunning the next step." in text and "render-marker-42" in text
    env.step(FMT.submit())
    text = env.render() or ""
    assert text.rstrip().endswith("[episode over: finished, reward 0]")
    assert text.count("[assistant]") == 2  # the final (submitting) reply is shown too
    with (
        AresGymEnv(ares.make("humaneval", tasks="0:1")) as quiet,
        pytest.warns(UserWarning, match="render_mode"),
    ):
        assert quiet.render() is None


def test_reset_options_seed_and_construction(env: AresGymEnv) -> None:
    tasks = ares_env(env).tasks
    _, info = env.reset(options={"task": 2})
    assert info["task_id"] == tasks[2].id
    _, info = env.reset(options={"task": tasks[1].id})
    assert info["task_id"] == tasks[1].id
    first = env.reset(seed=11)[1]["task_id"]
    assert all(env.reset(seed=11)[1]["task_id"] == first for _ in range(3))
    with pytest.raises(ValueError, match="unknown reset option"):
        env.reset(options={"tsk": 1})
    with pytest.raises(ValueError, match="render_mode"):
        AresGymEnv(ares.make("humaneval", tasks="0:1"), render_mode="human")
    with pytest.raises(TypeError, match="ARES Environment"):
        AresGymEnv(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="factory returned"):
        AresGymEnv(lambda: "not an env")  # type: ignore[arg-type,return-value]


def test_built_from_a_factory_on_its_private_loop() -> None:
    built_on: list[object] = []

    def factory() -> CodeEnvironment:
        built_on.append(asyncio.get_running_loop())
        return ares.make("humaneval", tasks="0:1")

    with wrap_as_gym(factory) as env:
        assert isinstance(env, AresGymEnv)
        assert len(built_on) == 1 and built_on[0] is env.private_loop._loop
        assert env.observation_space == LLMRequestSpace() and env.action_space == LLMResponseSpace()
        env.reset()
        assert env.step(FMT.submit())[2] is True
