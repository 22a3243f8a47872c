"""Which task an episode runs: the one ``reset`` names (a Task, an index or an id), or a random one.

The draw is seeded once with the environment's ``seed`` and reseeded by ``reset(seed=...)``; its
state travels with environment snapshots, so a restored environment draws what the original would.
"""

from __future__ import annotations

import random

from ares.errors import TaskNotFoundError
from ares.tasks.model import Task
from ares.tasks.selection import by_index

TaskSelector = Task | int | str


class TaskSampler:
    """An environment's tasks by position and id, and the seeded sampler that draws among them."""

    def __init__(self, tasks: tuple[Task, ...], seed: int | None) -> None:
        self.tasks = tasks
        self.by_id = {t.id: t for t in tasks}
        self._seed = seed
        self._rng: random.Random | None = None  # made on first use: its state is 2.5 KiB per env

    def random(self) -> random.Random:
        """The task sampler, seeded with the constructor's ``seed``."""
        if self._rng is None:
            self._rng = random.Random(self._seed)
        return self._rng

    def select(self, task: TaskSelector | None, seed: int | None, env_name: str) -> Task:
        """The task ``task`` names, or (None) one drawn; ``seed`` reseeds the draw first."""
        if seed is not None:
            self.random().seed(seed)
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
