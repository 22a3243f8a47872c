"""What an environment's snapshots and forks need besides the environment itself.

A snapshot is taken only of an active episode, on a backend that snapshots its files, with an agent
that saves its state; it names the factory that can restore it when that factory declares it can.
A restored agent must re-issue the snapshot's pending request. ``n`` forks are ``n`` environments
restored from one snapshot, all closed again if any of them fails.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from typing import Protocol

from ares.agents.base import StatefulAgent
from ares.envs.episode import Episode
from ares.envs.snapshots.model import EnvironmentSnapshot
from ares.errors import SnapshotError
from ares.llm.types import LLMRequest
from ares.sandbox.base import Sandbox, SandboxFactory
from ares.sandbox.capabilities import Capability, SnapshotRestoringFactory, require, supports
from ares.tasks.model import Task


class Restorable(Protocol):
    """An environment as its forks are made: restored from a snapshot, closed on failure."""

    def restore(self, snapshot: EnvironmentSnapshot) -> Awaitable[object]: ...

    def close(self) -> Awaitable[None]: ...


def snapshot_source(
    active: bool, episode: Episode | None, task: Task | None, sandbox: Sandbox | None, agent: object
) -> tuple[Episode, Task, Sandbox, StatefulAgent]:
    """The episode, task, sandbox and agent a snapshot is taken of; SnapshotError if one cannot be."""
    if not active or episode is None or task is None or sandbox is None:
        why = "no episode was started" if episode is None else f"the episode has ended ({episode.status})"
        raise SnapshotError(f"nothing to snapshot: {why}; snapshot between reset() and LAST")
    if not supports(sandbox, Capability.SNAPSHOT):
        raise SnapshotError(f"the {type(sandbox).__name__} backend cannot snapshot its filesystem")
    if not isinstance(agent, StatefulAgent):
        raise SnapshotError(f"the agent {type(agent).__name__} cannot save its state (no state())")
    return episode, task, sandbox, agent


def restoring_factory(factory: SandboxFactory) -> SnapshotRestoringFactory | None:
    """The factory as a snapshot restorer when it declares it can restore (it exports the files)."""
    if not supports(factory, Capability.RESTORE):
        return None
    return require(factory, Capability.RESTORE, SnapshotRestoringFactory)


def check_reissued(request: LLMRequest, snapshot: EnvironmentSnapshot) -> None:
    """A restored agent's first request must be the snapshot's observation, or the episode differs."""
    if request != snapshot.observation:
        raise SnapshotError(
            "the restored agent asked for a different request than the snapshot's observation "
            f"(step {snapshot.step} of episode {snapshot.episode_id}): the agent or its templates "
            "changed since the snapshot was taken"
        )


async def restore_forks(forks: Sequence[Restorable], snapshot: EnvironmentSnapshot) -> None:
    """Restore each of ``forks`` from ``snapshot``, then discard it; if one fails, close them all and
    raise its error."""
    try:
        results = await asyncio.gather(*(f.restore(snapshot) for f in forks), return_exceptions=True)
    finally:
        await snapshot.discard()  # its files go with the last sandbox that stacks them
    failed = [r for r in results if isinstance(r, BaseException)]
    if failed:
        await asyncio.gather(*(f.close() for f in forks), return_exceptions=True)
        raise failed[0]
