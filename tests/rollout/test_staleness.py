"""The staleness bound: an episode whose oldest token falls more than ``max_staleness`` versions
behind the trainer is ended with a recorded reason (blame infra, masked), and a run that refills
plays it again with the current weights; within the bound nothing changes."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from ares.errors import StaleEpisodeError
from ares.policies import make_policy
from ares.rollout import RunSpec
from ares.rollout.staleness import Staleness


class _Trainer:
    """A trainer's version counter and a policy whose answers carry the version serving them; the
    trainer jumps ``jump`` versions after the first answer it sees (an update mid-episode)."""

    def __init__(self, jump: int) -> None:
        self.version, self.jump, self.answers = 0, jump, 0

    def factory(self, task: Any, action_format: Any) -> Any:
        oracle = make_policy("oracle")(task, action_format)
        trainer = self

        class Versioned:
            async def act(self, observation: Any) -> Any:
                answer = replace(await oracle.act(observation), policy_version=trainer.version)
                trainer.answers += 1
                if trainer.answers == 1:
                    trainer.version += trainer.jump
                return answer

        return Versioned()


def _play(jump: int, max_staleness: int, refills: int = 0) -> Any:
    trainer = _Trainer(jump)
    staleness = Staleness(lambda: trainer.version, max_staleness)
    spec = RunSpec.load("humaneval", tasks="0", concurrency=1, staleness=staleness, refills=refills)
    (result,) = asyncio.run(spec.play(trainer.factory))
    return result


def test_within_the_bound_the_episode_is_untouched() -> None:
    result = _play(jump=2, max_staleness=2)
    assert (result.status.value, result.reward, result.blame) == ("finished", 1.0, None)


def test_past_the_bound_the_episode_ends_with_its_reason_and_is_masked() -> None:
    result = _play(jump=3, max_staleness=2)
    assert (result.status.value, result.blame, result.masked) == ("errored", "infra", True)
    assert result.error["type"] == "StaleEpisodeError"
    assert "version 0, 3 behind the current 3 (max_staleness 2)" in result.error["message"]


def test_a_stale_episode_is_refilled_with_the_current_weights() -> None:
    result = _play(jump=3, max_staleness=2, refills=1)
    assert (result.status.value, result.reward, result.refills, result.masked) == ("finished", 1.0, 1, False)


def test_a_bound_needs_a_version_to_judge() -> None:
    Staleness(lambda: None, 0).check(0)  # no current version: nothing to judge
    Staleness(lambda: 5, 0).check(None)  # no version received yet
    with pytest.raises(StaleEpisodeError):
        Staleness(lambda: 1, 0).check(0)
    with pytest.raises(ValueError, match="max_staleness"):
        Staleness(lambda: 0, -1)
