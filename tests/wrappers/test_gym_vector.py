"""AresVectorEnv over real HumanEval environments on the local sandbox: batching, autoreset, concurrency."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, cast

import gymnasium
import numpy as np
import pytest
from gymnasium.error import ResetNeeded
from gymnasium.spaces import Tuple as TupleSpace
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space
from gymnasium.wrappers.vector import RecordEpisodeStatistics

import ares
import ares.wrappers.gym  # registers the ares/<preset> ids for gymnasium.make_vec
from ares.agents.bash import BashActionFormat
from ares.core.status import EpisodeStatus
from ares.envs.code_env import CodeEnvironment
from ares.llm.types import LLMRequest, LLMResponse
from ares.policies.scripted import oracle_command
from ares.sandbox.base import ExecResult, SandboxSpec
from ares.sandbox.local import LocalSandbox
from ares.tasks.model import Task
from ares.wrappers.gym.vector import AresVectorEnv, make_vector_env

FMT = BashActionFormat()
SUBMIT = FMT.submit()
BUSY = FMT.command("echo busy")


def ares_envs(vec: AresVectorEnv) -> list[CodeEnvironment]:
    return [cast(CodeEnvironment, env.unwrapped_ares) for env in vec.envs]


def tasks_of(vec: AresVectorEnv) -> list[Task]:
    tasks = [env.task for env in ares_envs(vec)]
    assert all(task is not None for task in tasks)
    return tasks  # type: ignore[return-value]


def oracle(task: Task) -> LLMResponse:
    return FMT.command(oracle_command(task))


def is_first(observation: Any) -> bool:
    """The bash agent's first request: its turn counter is 0 and it holds only the task prompt."""
    return (
        isinstance(observation, LLMRequest)
        and observation.metadata["turn"] == 0
        and len(observation.messages) == 1
    )


def assert_vector_infos(infos: Mapping[str, Any], n: int) -> None:
    """Gymnasium's vector info format: every key has a bool mask ``_key`` of length n (except inside the
    ``episode`` dict RecordEpisodeStatistics adds)."""
    for key, value in infos.items():
        if key.startswith("_") or key == "episode":
            continue
        mask = infos[f"_{key}"]
        assert isinstance(mask, np.ndarray) and mask.dtype == np.bool_ and mask.shape == (n,)
        if isinstance(value, np.ndarray):
            assert value.shape[0] == n
        else:
            assert_vector_infos(value, n)


def test_reset_batches_one_first_observation_per_real_environment() -> None:
    with make_vector_env("humaneval", 8, tasks="0:8") as vec:
        assert vec.num_envs == 8 and len(vec.envs) == 8
        assert vec.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
        assert vec.single_observation_space == vec.envs[0].observation_space
        assert vec.single_action_space == vec.envs[0].action_space
        assert vec.observation_space == batch_space(vec.single_observation_space, 8)
        assert isinstance(vec.action_space, TupleSpace) and len(vec.action_space) == 8

        observations, infos = vec.reset(seed=3)
        assert isinstance(observations, tuple) and len(observations) == 8
        assert vec.observation_space.contains(observations)
        assert all(is_first(obs) for obs in observations)
        assert_vector_infos(infos, 8)
        tasks = tasks_of(vec)
        # Slot i shows sub-environment i's own task.
        for obs, task in zip(observations, tasks, strict=True):
            assert task.instruction.strip()[:80] in obs.messages[0].text
        episodes = [env.episode for env in ares_envs(vec)]
        assert all(e is not None and e.status is EpisodeStatus.RUNNING for e in episodes)
        assert len({e.id for e in episodes if e is not None}) == 8

        # seed=s seeds sub-environment i with s + i: the same seed draws the same tasks again.
        vec.reset(seed=3)
        assert [t.id for t in tasks_of(vec)] == [t.id for t in tasks]
        assert all(e is not None and e.status is EpisodeStatus.ABANDONED for e in episodes)
        vec.reset(seed=[3 + i for i in range(8)])
        assert [t.id for t in tasks_of(vec)] == [t.id for t in tasks]


def test_next_step_autoreset_with_episodes_ending_at_different_steps() -> None:
    """Oracle in slots 0-2 (done at step 2, reward 1), an immediate submit in slot 3 (done at step 1,
    reward 0), busy work in slots 4-7 (truncated by step_limit=3 at step 3, reward 0). Gymnasium's
    own RecordEpisodeStatistics, which relies on the NEXT_STEP contract, counts the same episodes."""
    with make_vector_env("humaneval", 8, tasks="0:8", step_limit=3) as vec:
        recorded = RecordEpisodeStatistics(vec)
        recorded.reset(seed=0)
        tasks = tasks_of(vec)
        first_episodes = [env.episode for env in ares_envs(vec)]
        false = np.zeros(8, dtype=np.bool_)

        # Step 1: slot 3 submits and terminates.
        obs, rewards, terminated, truncated, infos = recorded.step(
            [oracle(tasks[0]), oracle(tasks[1]), oracle(tasks[2]), SUBMIT, BUSY, BUSY, BUSY, BUSY]
        )
        assert rewards.dtype == np.float64 and terminated.dtype == np.bool_ and truncated.dtype == np.bool_
        np.testing.assert_array_equal(rewards, np.zeros(8))
        np.testing.assert_array_equal(terminated, [False, False, False, True, False, False, False, False])
        np.testing.assert_array_equal(truncated, false)
        assert_vector_infos(infos, 8)
        np.testing.assert_array_equal(infos["_episode"], terminated)
        assert infos["episode"]["l"][3] == 1 and infos["episode"]["r"][3] == 0.0
        assert first_episodes[3] is not None and first_episodes[3].status is EpisodeStatus.FINISHED
        assert infos["status"][3] == "finished" and infos["episode_id"][3] == first_episodes[3].id
        assert not any(is_first(o) for o in obs[:3] + obs[4:])

        # Step 2: the oracles finish with reward 1; slot 3 is reset (its action, None, is ignored).
        obs, rewards, terminated, truncated, infos = recorded.step([SUBMIT] * 3 + [None] + [BUSY] * 4)
        np.testing.assert_array_equal(rewards, [1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0])
        np.testing.assert_array_equal(terminated, [True, True, True, False, False, False, False, False])
        np.testing.assert_array_equal(truncated, false)
        np.testing.assert_array_equal(infos["episode"]["l"][:3], [2, 2, 2])
        np.testing.assert_array_equal(infos["episode"]["r"][:3], [1.0, 1.0, 1.0])
        assert is_first(obs[3]) and not is_first(obs[4])
        second_episode_3 = ares_envs(vec)[3].episode
        assert second_episode_3 is not None and second_episode_3 is not first_episodes[3]
        assert second_episode_3.status is EpisodeStatus.RUNNING and second_episode_3.steps == 0
        assert infos["episode_id"][3] == second_episode_3.id and infos["_seed"][3]  # reset info
        assert all(e is not None and e.status is EpisodeStatus.FINISHED for e in first_episodes[:3])
        assert all(e is not None and e.reward == 1.0 for e in first_episodes[:3])

        # Step 3: slots 0-2 are reset; slots 4-7 hit the step limit and are truncated.
        obs, rewards, terminated, truncated, infos = recorded.step([None] * 3 + [BUSY] * 5)
        np.testing.assert_array_equal(rewards, np.zeros(8))
        np.testing.assert_array_equal(terminated, false)
        np.testing.assert_array_equal(truncated, [False, False, False, False, True, True, True, True])
        np.testing.assert_array_equal(infos["episode"]["l"][4:], [3, 3, 3, 3])
        assert all(is_first(o) for o in obs[:3]) and not is_first(obs[3])
        for episode in first_episodes[4:]:
            assert episode is not None and episode.status is EpisodeStatus.TRUNCATED
            assert episode.truncation == "step_limit" and episode.steps == 3
        assert list(infos["truncation"][4:]) == ["step_limit"] * 4

        # Step 4: slots 4-7 are reset; everyone else keeps going.
        obs, rewards, terminated, truncated, infos = recorded.step([BUSY] * 4 + [None] * 4)
        np.testing.assert_array_equal(rewards, np.zeros(8))
        np.testing.assert_array_equal(terminated | truncated, false)
        assert all(is_first(o) for o in obs[4:]) and not any(is_first(o) for o in obs[:4])
        assert [env.episode.steps for env in ares_envs(vec)] == [1, 1, 1, 2, 0, 0, 0, 0]  # type: ignore[union-attr]
        assert_vector_infos(infos, 8)
        assert list(recorded.length_queue) == [1, 2, 2, 2, 3, 3, 3, 3]
    assert vec.closed


def test_same_step_autoreset_reports_the_final_observation_in_infos() -> None:
    with make_vector_env("humaneval", 2, tasks="0:2", autoreset_mode="SameStep") as vec:
        assert vec.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
        first, _ = vec.reset(seed=0)
        ended = ares_envs(vec)[0].episode
        obs, rewards, terminated, truncated, infos = vec.step([SUBMIT, BUSY])
        np.testing.assert_array_equal(terminated, [True, False])
        np.testing.assert_array_equal(truncated, [False, False])
        np.testing.assert_array_equal(rewards, [0.0, 0.0])
        np.testing.assert_array_equal(infos["_final_obs"], [True, False])
        np.testing.assert_array_equal(infos["_final_info"], [True, False])
        # The ended episode's last observation (its only request) and info; the slot holds the next one.
        assert infos["final_obs"][0] is first[0] and infos["final_obs"][1] is None
        assert ended is not None and ended.status is EpisodeStatus.FINISHED
        assert infos["final_info"]["episode_id"][0] == ended.id
        assert infos["final_info"]["status"][0] == "finished"
        assert is_first(obs[0]) and obs[0] is not first[0] and not is_first(obs[1])
        assert ares_envs(vec)[0].episode is not ended
        assert infos["episode_id"][0] == ares_envs(vec)[0].episode.id  # type: ignore[union-attr]
        # No pending reset: the next step acts on slot 0's new episode.
        vec.step([BUSY, BUSY])
        assert [env.episode.steps for env in ares_envs(vec)] == [1, 2]  # type: ignore[union-attr]


def test_disabled_autoreset_needs_a_masked_reset_before_an_ended_slot_steps_again() -> None:
    with make_vector_env("humaneval", 2, tasks="0:2", autoreset_mode=AutoresetMode.DISABLED) as vec:
        vec.reset(seed=0)
        _, _, terminated, _, _ = vec.step([SUBMIT, BUSY])
        np.testing.assert_array_equal(terminated, [True, False])
        running = ares_envs(vec)[1].episode
        with pytest.raises(ResetNeeded, match=r"\[0\].*reset_mask"):
            vec.step([BUSY, BUSY])
        assert running is not None and running.steps == 1  # nothing moved

        obs, _ = vec.reset(options={"reset_mask": terminated})
        assert is_first(obs[0]) and not is_first(obs[1])
        assert ares_envs(vec)[1].episode is running and running.status is EpisodeStatus.RUNNING
        vec.step([BUSY, BUSY])
        assert running.steps == 2


class RendezvousSandbox(LocalSandbox):
    """A real local sandbox whose ``rendezvous`` commands start only once all N are in flight at once.

    Sandboxes share no files, so the meeting point is on the host: an ``asyncio.Barrier`` on the
    vector env's loop. If sub-environments were stepped one after another, the first command would
    wait alone, time out, and crash its agent (the episode would end ERRORED).
    """

    def __init__(self, spec: SandboxSpec, barrier: asyncio.Barrier, met: list[int]) -> None:
        super().__init__(spec)
        self._barrier = barrier
        self._met = met

    async def exec(self, cmd: str, **kwargs: Any) -> ExecResult:
        if "rendezvous" in cmd:
            self._met.append(await asyncio.wait_for(self._barrier.wait(), timeout=60))
        return await super().exec(cmd, **kwargs)


def test_sub_environments_step_concurrently() -> None:
    barrier, met = asyncio.Barrier(8), []

    def sandbox(spec: SandboxSpec) -> RendezvousSandbox:
        return RendezvousSandbox(spec, barrier, met)

    with make_vector_env("humaneval", 8, tasks="0:8", sandbox_factory=sandbox) as vec:
        vec.reset(seed=0)
        obs, _, terminated, truncated, _ = vec.step([FMT.command(f"echo rendezvous {i}") for i in range(8)])
        assert sorted(met) == list(range(8))  # every command passed the 8-way barrier
        assert not (terminated | truncated).any()
        for i, request in enumerate(obs):
            assert f"rendezvous {i}" in request.messages[-1].text
        assert all(env.episode.status is EpisodeStatus.RUNNING for env in ares_envs(vec))  # type: ignore[union-attr]


def test_make_vec_through_the_gymnasium_registration() -> None:
    vec = gymnasium.make_vec("ares/humaneval", num_envs=8, tasks="0:8", step_limit=2, render_mode="ansi")
    try:
        assert isinstance(vec, AresVectorEnv) and vec.num_envs == 8 and vec.render_mode == "ansi"
        assert vec.spec is not None and vec.spec.id == "ares/humaneval"
        assert vec.spec.kwargs["vectorization_mode"] == "vector_entry_point"
        assert all(env.step_limit == 2 for env in ares_envs(vec))
        observations, _ = vec.reset(seed=0)
        assert len(observations) == 8 and all(is_first(o) for o in observations)
        assert all("[user]" in text for text in vec.render())
    finally:
        vec.close()
    assert all(env.closed for env in ares_envs(vec))

    # make_vec passes max_episode_steps through to a vector entry point: it becomes ARES's step_limit.
    explicit = gymnasium.make_vec(
        "ares/humaneval", 2, vectorization_mode="vector_entry_point", tasks="0:2", max_episode_steps=4
    )
    try:
        assert isinstance(explicit, AresVectorEnv) and explicit.num_envs == 2
        assert all(env.step_limit == 4 for env in ares_envs(explicit))
    finally:
        explicit.close()


async def test_make_vector_env_seeds_sub_environment_i_with_seed_plus_i() -> None:
    with make_vector_env("humaneval", 3, tasks="0:20", seed=5) as vec:
        vec.reset()  # no reset seed: each sub-environment draws from its own seeded generator
        drawn = [task.id for task in tasks_of(vec)]
    for i, task_id in enumerate(drawn):
        async with ares.make("humaneval", tasks="0:20", seed=5 + i) as single:
            await single.reset()
            assert single.task is not None and single.task.id == task_id


class ByteTokenizer:
    """A real (if tiny) tokenizer: one token per UTF-8 byte."""

    def __len__(self) -> int:
        return 256

    def encode(self, text: str) -> list[int]:
        return list(text.encode())

    def decode(self, ids: list[int]) -> str:
        return bytes(ids).decode(errors="replace")


def test_other_codecs_batch_as_gymnasium_batches_their_spaces() -> None:
    with make_vector_env("humaneval", 2, tasks="0:2", observation="messages", action="text") as vec:
        observations, _ = vec.reset(seed=0)
        assert isinstance(observations, tuple) and vec.observation_space.contains(observations)
        assert all(obs[0]["role"] == "system" for obs in observations)
        observations, *_ = vec.step(("```bash\necho left\n```", "```bash\necho right\n```"))
        assert "left" in observations[0][-1]["content"] and "right" in observations[1][-1]["content"]

    tokenizer = ByteTokenizer()
    with make_vector_env(
        "humaneval",
        2,
        tasks="0:2",
        observation="tokens",
        action="tokens",
        tokenizer=tokenizer,
        prompt_render="chatml",  # a byte tokenizer has no chat template of its own
    ) as vec:
        observations, _ = vec.reset(seed=0)
        assert vec.observation_space.contains(observations)
        assert all(isinstance(obs, np.ndarray) and obs.dtype == np.int64 for obs in observations)
        reply = np.array(tokenizer.encode("```bash\necho tokens\n```"), dtype=np.int64)
        observations, *_ = vec.step((reply, list(reply)))
        assert all("tokens" in tokenizer.decode(list(obs[-200:])) for obs in observations)
