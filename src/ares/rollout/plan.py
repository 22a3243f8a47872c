"""One ``run_episodes`` call's arguments, as the flat runner and shared-prefix groups read them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ares.core.environment import Environment
from ares.policies.base import PolicyFactory
from ares.records.collecting import TraceLevel
from ares.records.collectors import TrajectoryCollector
from ares.rollout.pause import PolicyGate
from ares.rollout.results import EpisodeResult
from ares.rollout.staleness import Staleness


@dataclass(frozen=True, slots=True)
class RunPlan:
    """One ``run_episodes`` call's arguments (``keep``: what becomes of each finished result)."""

    make_env: Callable[[], Environment[Any, Any]]
    policy_factory: PolicyFactory
    episodes: int
    concurrency: int
    seed: int
    keep: Callable[[EpisodeResult], EpisodeResult]
    collector: TrajectoryCollector | None
    trace: TraceLevel
    skip: frozenset[int]
    group_size: int
    policy_timeout_s: float | None
    num_tasks: int | None
    refills: int = 0
    before_episode: Callable[[int], Awaitable[None]] | None = None
    staleness: Staleness | None = None
    gate: PolicyGate | None = None
    #: Group g's task index (``run_episodes(group_tasks=...)``); None: round robin, g % tasks.
    group_tasks: Sequence[int] | None = None

    def task_of(self, group: int, count: int) -> int:
        """The index of the task group ``group`` plays, among ``count`` tasks."""
        if self.group_tasks is None:
            return group % count
        return self.group_tasks[group]


def check_group_tasks(group_tasks: Sequence[int], episodes: int, group_size: int) -> tuple[int, ...]:
    """``group_tasks`` as a tuple, refused unless it names a task (an index >= 0) for every group."""
    groups = -(-episodes // max(1, group_size))
    tasks = tuple(group_tasks)
    if len(tasks) < groups:
        raise ValueError(f"group_tasks names {len(tasks)} tasks for {groups} groups ({episodes} episodes)")
    bad = [t for t in tasks if not isinstance(t, int) or t < 0]
    if bad:
        raise ValueError(f"group_tasks holds task indices (ints >= 0), not {bad[:3]}")
    return tasks
