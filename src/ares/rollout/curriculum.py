"""A run's curriculum: which task each group plays, and what its episodes teach the pass rates.

``Curriculum(sampler, store, path)`` draws every group's task when a run starts, with ``sampler``
(``ares.curriculum.samplers``) over the store's pass rates as they are then, from a generator seeded
by the run's seed: the same seed, tasks and store give the same groups whatever the concurrency.
A resumed run must play the groups it planned, not a new draw from a store that has learned since:
``plan`` (the task id of each group, as ``draw`` gave them) is then replayed instead. Drawing up
front keeps a run reproducible; the
store learns as results come in, and the next run (a trainer's next step) draws from what it
learned. Each episode a trainer keeps (not masked: an infrastructure or task failure says nothing
about the policy) counts as one outcome of its task (the verifier's pass/fail, ``passed``), at the
oldest policy version among its answers. ``path``, if given, holds the store between runs: loaded
by ``at(path)``, saved when a run ends, however it ends.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ares.curriculum import InOrder, PassRateStore, Sampler
from ares.rollout.results import EpisodeResult


@dataclass(frozen=True, slots=True)
class Curriculum:
    """How a run picks its groups' tasks (``sampler``) and the pass rates it reads and feeds (``store``,
    saved to ``path`` when a run ends)."""

    sampler: Sampler = field(default_factory=InOrder)
    store: PassRateStore = field(default_factory=PassRateStore)
    path: Path | None = None
    #: The task id of each group, replayed instead of a draw (a resumed run's earlier plan).
    plan: tuple[str, ...] | None = None

    @classmethod
    def at(cls, path: Path, sampler: Sampler | None = None, *, window: int = 4) -> Curriculum:
        """A curriculum whose store lives at ``path``: the one saved there, else a new one."""
        store = PassRateStore.load(path) if path.exists() else PassRateStore(window=window)
        return cls(sampler or InOrder(), store, path)

    def draw(self, task_ids: Sequence[str], groups: int, seed: int) -> list[int]:
        """The task index (into ``task_ids``) of each of ``groups`` groups: ``plan``'s, else drawn."""
        if self.plan is not None:
            return _replayed(self.plan, task_ids, groups)
        rng = random.Random(f"ares-curriculum-{seed}")  # a str seed is hashed the same in every process
        return [self.sampler.choose(group, rng, task_ids, self.store) for group in range(groups)]

    def observe(self, result: EpisodeResult) -> None:
        """Count ``result``'s outcome for its task, unless a trainer masks it."""
        if not result.masked:
            self.store.record(result.task_id, result.passed, result.policy_version)

    def save(self) -> None:
        """Write the store to ``path`` (blocking; nothing without a path)."""
        if self.path is not None:
            self.store.save(self.path)


def _replayed(plan: Sequence[str], task_ids: Sequence[str], groups: int) -> list[int]:
    """``plan``'s task ids as indices into ``task_ids``; refused unless it covers every group with
    tasks of this run."""
    where = {task_id: i for i, task_id in enumerate(task_ids)}
    unknown = sorted(set(plan) - set(where))
    if len(plan) < groups or unknown:
        raise ValueError(
            f"the curriculum's plan does not fit this run: {len(plan)} groups planned for {groups}"
            + (f", tasks not in the run: {unknown[:3]}" if unknown else "")
        )
    return [where[task_id] for task_id in plan[:groups]]
