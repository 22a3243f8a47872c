"""The TimeStep -> (reward, terminated, truncated, info) mapping, for CodeEnvironment, ARES wrappers and
an environment that keeps no episode record at all."""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import Self

import pytest

import ares
from ares.agents.bash import BashActionFormat
from ares.core.timestep import StepType, TimeStep, restart, termination, truncation
from ares.llm.types import LLMRequest, LLMResponse, Message
from ares.policies.scripted import oracle_command
from ares.records.collecting import TrajectoryCollectingEnvironment
from ares.records.collectors import JsonDirCollector
from ares.records.loader import load_episodes
from ares.wrappers.gym import AresGymEnv, AsyncAresGymEnv

FMT = BashActionFormat()


def left(n: int) -> LLMRequest:
    return LLMRequest(messages=(Message("user", f"{n} turns left"),))


class CountdownEnv:
    """A complete ARES Environment without ``episode``/``task`` attributes: ``steps`` turns, then LAST
    by termination or truncation. Its MID steps carry no reward, as the protocol allows."""

    def __init__(self, steps: int, *, truncate: bool) -> None:
        self.steps, self.truncate, self.turns = steps, truncate, 0

    async def reset(self, *, seed: int | None = None, task: object | None = None) -> TimeStep[LLMRequest]:
        self.turns = self.steps
        return restart(left(self.turns))

    async def step(self, action: LLMResponse) -> TimeStep[LLMRequest]:
        self.turns -= 1
        if self.turns > 0:
            return TimeStep(StepType.MID, None, 1.0, left(self.turns))
        return truncation(0.5) if self.truncate else termination(2.0)

    async def close(self) -> None:
        return None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


@pytest.mark.parametrize(
    ("truncate", "reward", "status"), [(False, 2.0, "finished"), (True, 0.5, "truncated")]
)
async def test_any_environment_maps_by_step_type_and_discount(
    truncate: bool, reward: float, status: str
) -> None:
    async with AsyncAresGymEnv(CountdownEnv(2, truncate=truncate)) as env:
        _, info = await env.reset()
        assert info["status"] == "running" and info["episode_id"] is None and info["task_id"] is None
        obs, got, terminated, truncated, info = await env.step(LLMResponse(content="go"))
        assert (obs, got, terminated, truncated) == (left(1), 0.0, False, False)  # MID reward None -> 0.0
        assert info == {
            "timestep": TimeStep(StepType.MID, None, 1.0, left(1)),
            "status": "running",
            "task_id": None,
        }
        obs, got, terminated, truncated, info = await env.step(LLMResponse(content="go"))
        assert (got, terminated, truncated) == (reward, not truncate, truncate)
        assert info["status"] == status and info["truncation"] is None and info["reward_terms"] == {}
        assert obs == left(1)  # no observation at LAST: the last request stands in


class ByteTokenizer:
    def encode(self, text: str) -> list[int]:
        return list(text.encode())

    def decode(self, ids: list[int]) -> str:
        return bytes(ids).decode(errors="replace")

    def __len__(self) -> int:
        return 256


def test_through_a_trajectory_wrapper_with_token_actions(tmp_path: Path) -> None:
    """Status and ids come from the CodeEnvironment under the ARES wrapper; the token ids of each
    action reach the recorded trajectory."""
    collector = JsonDirCollector(tmp_path)
    recorded = TrajectoryCollectingEnvironment(ares.make("humaneval", tasks="0:1"), collector)
    with AresGymEnv(recorded, action="tokens", tokenizer=ByteTokenizer()) as env:
        _, info = env.reset(seed=4)
        episode_id = info["episode_id"]
        assert episode_id == recorded.episode_id and info["task_id"] == "humaneval_0"
        task = recorded.unwrapped.task  # type: ignore[attr-defined]
        command = ByteTokenizer().encode(FMT.command(oracle_command(task)).content or "")
        env.step(command)
        _, reward, terminated, truncated, info = env.step(ByteTokenizer().encode(FMT.submit().content or ""))
        assert (reward, terminated, truncated, info["status"]) == (1.0, True, False, "finished")
        assert info["episode_id"] == episode_id
    collector.close()
    (episode,) = load_episodes(tmp_path)
    assert episode.episode_id == episode_id and episode.status == "finished"
    actions = [step.action for step in episode.steps[1:]]
    assert (
        actions[0].token_ids == tuple(command)
        and actions[0].content == FMT.command(oracle_command(task)).content
    )
