"""Which task an episode runs: the one ``reset`` names (a Task, an index or an id), or a drawn one.

The draw is uniform, or a curriculum's (``make(sampler=..., pass_rates=...)``: an
``ares.curriculum`` sampler over the store's pass rates, which every episode the environment ends
then feeds, unless a trainer would mask it; unversioned, since the environment does not know the
policy's version: a trainer that tracks versions counts in its run instead, ``RunSpec(curriculum=...)``,
and gives the store to one of the two, never both). It is seeded once with the environment's
``seed`` and reseeded by ``reset(seed=...)``; its state travels with environment snapshots, so a
restored environment draws what the original would.
"""

from __future__ import annotations

import random

from ares.core.status import EpisodeStatus
from ares.curriculum import PassRateStore, Sampler
from ares.envs.episode import Episode
from ares.errors import TaskNotFoundError
from ares.tasks.model import Task
from ares.tasks.selection import by_index

TaskSelector = Task | int | str


class TaskSampler:
    """An environment's tasks by position and id, and the seeded sampler that draws among them."""

    __slots__ = ("_draws", "_rng", "_seed", "by_id", "pass_rates", "sampler", "tasks")

    def __init__(
        self,
        tasks: tuple[Task, ...],
        seed: int | None,
        sampler: Sampler | None = None,
        pass_rates: PassRateStore | None = None,
    ) -> None:
        self.tasks = tasks
        self.by_id = {t.id: t for t in tasks}
        self._seed = seed
        self._rng: random.Random | None = None  # made on first use: its state is 2.5 KiB per env
        self.sampler, self.pass_rates = sampler, pass_rates
        self._draws = 0

    def random(self) -> random.Random:
        """The task sampler, seeded with the constructor's ``seed``."""
        if self._rng is None:
            self._rng = random.Random(self._seed)
        return self._rng

    def select(self, task: TaskSelector | None, seed: int | None, env_name: str) -> Task:
        """The task ``task`` names, or (None) one drawn; ``seed`` reseeds the draw first."""
        if seed is not None:
            self.random().seed(seed)
        if task is None and self.sampler is not None:
            ids = [t.id for t in self.tasks]
            index = self.sampler.choose(self._draws, self.random(), ids, self.pass_rates or PassRateStore())
            self._draws += 1
            return self.tasks[index]
        if task is None:  # one task: nothing to draw (the sampler is made when there is a choice)
            return self.tasks[0] if len(self.tasks) == 1 else self.random().choice(self.tasks)
        if isinstance(task, Task):
            return task
        if isinstance(task, int):
            return by_index(self.tasks, task)  # the same rule and message as every selection
        if task in self.by_id:
            return self.by_id[task]
        examples = ", ".join(list(self.by_id)[:5])
        raise TaskNotFoundError(f"no task with id {task!r} in {env_name} (ids look like: {examples})")

    def observe(self, episode: Episode) -> None:
        """An episode that just ended, into the pass rates (if any) unless a trainer masks it: its
        outcome, else (no verdict) a reward of at least 1 on a finished episode."""
        if self.pass_rates is None or episode.masked:
            return
        if episode.outcome is not None:
            passed = episode.outcome
        else:
            passed = episode.status is not EpisodeStatus.ERRORED and (episode.reward or 0.0) >= 1.0
        self.pass_rates.record(episode.task_id, passed)
