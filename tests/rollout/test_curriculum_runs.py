"""Curricula and dynamic sampling in real runs (HumanEval on the local sandbox): a sampler decides
each group's task from the pass rates, the run's outcomes feed the store (saved beside the run), and
a batch keeps only the groups whose outcomes disagree, counting the rest by why."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ares.core.status import EpisodeStatus
from ares.curriculum import Informative, PassRateStore, SkipSolved, Uniform
from ares.policies import make_policy
from ares.presets import make
from ares.rollout import Curriculum, GroupFilter, RunSpec, RunSummary
from ares.rollout.results import EpisodeResult, group_agreement
from ares.rollout.runner import run_episodes

ORACLE, NULL = make_policy("oracle"), make_policy("null")


def test_group_tasks_choose_each_groups_task() -> None:
    results = asyncio.run(
        run_episodes(
            lambda: make("humaneval", tasks="0:3"), ORACLE, episodes=4, group_size=2, concurrency=2,
            group_tasks=[2, 0],
        )
    )  # fmt: skip
    assert [r.task_id for r in results] == ["humaneval_2", "humaneval_2", "humaneval_0", "humaneval_0"]
    with pytest.raises(ValueError, match="names 1 tasks for 2 groups"):
        asyncio.run(run_episodes(lambda: make("humaneval", tasks="0:3"), ORACLE, episodes=4, group_size=2,
                                 group_tasks=[1]))  # fmt: skip


def test_a_curriculum_draws_reproducibly_and_learns_from_the_run(tmp_path: Path) -> None:
    """Uniform draws depend on the seed alone; every kept episode becomes one outcome of its task,
    and the store is saved at the run's end where the next run loads it."""
    path = tmp_path / "pass_rates.json"
    spec = RunSpec.load(
        "humaneval", tasks="0:6", episodes=8, group_size=2, curriculum=Curriculum.at(path, Uniform())
    )
    again = RunSpec.load("humaneval", tasks="0:6", episodes=8, group_size=2, curriculum=Curriculum(Uniform()))
    other_seed = RunSpec.load(
        "humaneval", tasks="0:6", episodes=40, group_size=2, seed=7, curriculum=Curriculum(Uniform())
    )
    assert spec.group_tasks() == again.group_tasks() != other_seed.group_tasks()[:4]
    results = asyncio.run(spec.play(ORACLE))
    drawn = [spec.tasks[i].id for i in spec.group_tasks() or []]
    assert [r.task_id for r in results] == [task for task in drawn for _ in range(2)]
    saved = PassRateStore.load(path)
    counts = Counter(r.task_id for r in results)
    assert {task: rate.samples for task, rate in saved.rates().items()} == dict(counts)
    assert all(rate.rate == 1.0 for rate in saved.rates().values())


def test_skip_solved_leaves_out_what_the_store_says_is_solved(tmp_path: Path) -> None:
    store = PassRateStore()
    for task in ("humaneval_0", "humaneval_1"):
        for _ in range(4):
            store.record(task, True)
    spec = RunSpec.load(
        "humaneval", tasks="0:3", episodes=6, group_size=2, curriculum=Curriculum(SkipSolved(0.9, 4), store)
    )
    results = asyncio.run(spec.play(NULL))
    assert {r.task_id for r in results} == {"humaneval_2"}  # the only one left to learn
    assert store.get("humaneval_2").samples == 6 and store.get("humaneval_2").rate == 0.0


def test_the_informative_sampler_prefers_tasks_near_half() -> None:
    store = PassRateStore()
    for outcome in (True, False, True, False):  # humaneval_1: p = 0.5, weight 0.25
        store.record("humaneval_1", outcome)
    for task, outcome in (("humaneval_0", True), ("humaneval_2", False)):  # p = 1 and p = 0: weight 0
        for _ in range(4):
            store.record(task, outcome)
    spec = RunSpec.load("humaneval", tasks="0:3", episodes=20, curriculum=Curriculum(Informative(), store))
    assert set(spec.group_tasks() or []) == {1}


class _Alternating:
    """Episodes in play order: the oracle for calls in ``passing``, else the null policy."""

    def __init__(self, passing: set[int]) -> None:
        self.passing, self.calls = passing, 0

    def __call__(self, task: Any, action_format: Any) -> Any:
        self.calls += 1
        chosen = ORACLE if self.calls - 1 in self.passing else NULL
        return chosen(task, action_format)


def test_a_batch_keeps_groups_whose_outcomes_disagree_and_counts_the_rest() -> None:
    """Groups of two, played one episode at a time: all pass, all fail, mixed, mixed. A batch of one
    informative group stops after the third; the fourth group never finishes."""
    spec = RunSpec.load("humaneval", tasks="0:4", group_size=2, concurrency=1)
    policy = _Alternating({0, 1, 4, 6})
    batch = asyncio.run(spec.batch(policy, 1, buffer=1))
    assert batch.full and batch.seen == 3 and batch.dropped == {"all_passed": 1, "all_failed": 1}
    ((first, second),) = batch.groups
    assert (first.group, first.passed, second.passed) == (2, True, False)
    assert batch.to_dict() == {
        "groups_kept": 1, "groups_seen": 3, "groups_dropped": 2, "groups_dropped_all_failed": 1,
        "groups_dropped_all_passed": 1,
    }  # fmt: skip
    assert policy.calls <= 8


def test_a_batch_that_runs_out_says_so() -> None:
    spec = RunSpec.load("humaneval", tasks="0:2", group_size=2, concurrency=2)
    batch = asyncio.run(spec.batch(ORACLE, 2))
    assert not batch.full and batch.groups == () and batch.dropped == {"all_passed": 2}


def _result(
    index: int, passed: bool, *, blame: str | None = None, reward: float | None = None
) -> EpisodeResult:
    status = EpisodeStatus.ERRORED if blame in ("infra", "task") else EpisodeStatus.FINISHED
    value = reward if reward is not None else float(passed)
    return EpisodeResult(
        index, "t", status, None if status is EpisodeStatus.ERRORED else value, 1, 0.0, (), group=0,
        outcome=passed if status is EpisodeStatus.FINISHED else None, blame=blame,  # type: ignore[arg-type]
    )  # fmt: skip


def test_group_agreement_reads_outcomes_of_the_kept_members() -> None:
    assert group_agreement([_result(0, True), _result(1, False)]) is None
    assert group_agreement([_result(0, True), _result(1, True)]) == "all_passed"
    assert group_agreement([_result(0, False), _result(1, False, reward=0.7)]) == "all_failed"  # shaped
    assert group_agreement([_result(0, True), _result(1, False, blame="infra")]) == "too_few"  # masked
    keep = GroupFilter(min_reward_std=0.3)
    assert keep.drop_reason([_result(0, True, reward=0.6), _result(1, False, reward=0.4)]) == "low_reward_std"
    summary = RunSummary.of([_result(0, True), _result(1, True)], 1.0)
    assert summary.uninformative == {"all_passed": 1}
