"""What a restore needs besides the environment: the snapshot's sandbox, and its episode so far."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ares.envs.episode import Episode
from ares.envs.snapshots.model import EnvironmentSnapshot
from ares.errors import SnapshotError
from ares.sandbox.base import Sandbox, SandboxFactory, SandboxSpec
from ares.sandbox.capabilities import Capability, SnapshotRestoringFactory, require, supports
from ares.sandbox.snapshots import FilesystemSnapshot
from ares.tasks.model import Task


async def snapshot_sandbox(
    factory: SandboxFactory, snapshot: EnvironmentSnapshot, task: Task, spec: SandboxSpec | None = None
) -> Sandbox:
    """An unstarted sandbox of ``task`` (``spec``: its sandbox spec, default ``task.sandbox_spec()``)
    holding the snapshot's files (imported from its archive on first use in this process, then
    reused by every later restore of the same snapshot object)."""
    if not supports(factory, Capability.RESTORE):
        raise SnapshotError(
            f"the sandbox factory {_name(factory)} cannot restore snapshots "
            "(the local and docker backends can)"
        )
    restoring = require(factory, Capability.RESTORE, SnapshotRestoringFactory)
    spec = spec or task.sandbox_spec()
    return restoring.from_snapshot(await _filesystem(restoring, snapshot, task), spec)


def _name(factory: object) -> str:
    return factory.__name__ if isinstance(factory, type) else type(factory).__name__


async def _filesystem(
    factory: SnapshotRestoringFactory, snapshot: EnvironmentSnapshot, task: Task
) -> FilesystemSnapshot:
    if snapshot.archive is None:
        return snapshot.filesystem
    imported = _IMPORTED.get(id(snapshot))
    if imported is None or imported[0] is not snapshot:
        filesystem = await factory.import_snapshot(snapshot.archive, task.sandbox_spec())
        _IMPORTED[id(snapshot)] = (snapshot, filesystem)
        return filesystem
    return imported[1]


#: Snapshots loaded from disk whose files were imported in this process (by object identity).
_IMPORTED: dict[int, tuple[EnvironmentSnapshot, FilesystemSnapshot]] = {}


def carry_over(episode: Episode, snapshot: EnvironmentSnapshot) -> None:
    """The new episode continues the snapshot's: its parent, branch step, step count, limit hits
    and policy cost so far."""
    before: dict[str, Any] = snapshot.episode
    episode.parent_episode_id, episode.branch_step = snapshot.episode_id, snapshot.step
    episode.steps = snapshot.step
    episode.limit_hits = Counter(before.get("limit_hits") or {})
    episode.policy_latency_s = float(before.get("policy_latency_s") or 0.0)
    episode.prompt_tokens = before.get("prompt_tokens")
    episode.completion_tokens = before.get("completion_tokens")
    episode.cost_usd = before.get("cost_usd")
