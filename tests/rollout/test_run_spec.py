"""``RunSpec``: a run's tasks are loaded once, every environment gets that list, and ``play`` runs it
here (or on Ray) with the spec's plan: episodes, groups, concurrency, seed."""

from __future__ import annotations

import asyncio
import pickle
from typing import Any

import pytest

import ares.presets as registry
from ares.errors import TaskNotFoundError
from ares.policies import make_policy
from ares.rollout import RaySettings, RunSpec
from ares.rollout.results import EpisodeResult


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per parse of the HumanEval dataset."""
    parsed: list[int] = []
    real = registry.load_humaneval

    def counting(*args: Any, **kwargs: Any) -> Any:
        parsed.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(registry, "load_humaneval", counting)
    return parsed


def test_a_spec_loads_once_and_plays_every_episode_on_that_list(loads: list[int]) -> None:
    spec = RunSpec.load("humaneval", tasks="0:4", concurrency=4, group_size=2, seed=3)
    assert [t.id for t in spec.tasks] == [f"humaneval_{i}" for i in range(4)]
    assert spec.total_episodes == 8
    seen: list[EpisodeResult] = []
    results = asyncio.run(spec.play(make_policy("oracle"), on_result=seen.append))
    assert len(loads) == 1  # four workers, eight episodes: one parse
    assert [r.index for r in results] == list(range(8))
    assert [r.task_id for r in results] == [f"humaneval_{i // 2}" for i in range(8)]
    assert {r.group for r in results} == {0, 1, 2, 3}
    assert all(r.reward == 1.0 and r.status.value == "finished" for r in results)
    assert sorted(r.index for r in seen) == list(range(8))


def test_the_same_seed_plays_the_same_tasks() -> None:
    spec = RunSpec.load("humaneval", tasks="0:3", episodes=2, concurrency=1, seed=7)
    first = asyncio.run(spec.play(make_policy("null")))
    again = asyncio.run(spec.play(make_policy("null")))
    assert [(r.task_id, r.reward) for r in first] == [(r.task_id, r.reward) for r in again]


def test_a_bad_spec_is_refused_before_anything_plays() -> None:
    with pytest.raises(ValueError, match="not a multiple of the group size 4"):
        RunSpec.load("humaneval", tasks="0:2", episodes=6, group_size=4)
    with pytest.raises(ValueError, match="unknown environment limit"):
        RunSpec.load("humaneval", tasks="0:2", limits={"step_limt": 3})
    with pytest.raises(TaskNotFoundError, match="out of range"):
        RunSpec.load("humaneval", tasks="999")
    with pytest.raises(ValueError, match="at least one task"):
        RunSpec("humaneval", ())


def test_limits_reach_every_environment() -> None:
    spec = RunSpec.load("humaneval", tasks="0:1", limits={"step_limit": 1}, concurrency=1)
    env = spec.env_factory()()
    assert env.step_limit == 1
    assert [t.id for t in env.tasks] == ["humaneval_0"]
    asyncio.run(env.close())


def test_on_ray_the_factory_carries_the_list_not_a_loader(loads: list[int]) -> None:
    """A Ray actor gets the loaded tasks inside the pickled factory: it never parses again."""
    pytest.importorskip("ray")
    spec = RunSpec.load("humaneval", tasks="0:2", ray=RaySettings(actors=1))
    factory = pickle.loads(pickle.dumps(spec.env_factory()))
    env = factory()
    assert [t.id for t in env.tasks] == ["humaneval_0", "humaneval_1"]
    assert len(loads) == 1
    asyncio.run(env.close())
