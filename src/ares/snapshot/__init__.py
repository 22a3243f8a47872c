"""Snapshots and forks of environments: save an episode at any step, restore it, branch it.

    snapshot = await env.snapshot()          # at FIRST or any MID step
    await snapshot.save("snap/")             # versioned directory: snapshot.json + fs/
    env2 = await restore(EnvironmentSnapshot.load("snap/"))   # here or in another process
    branches = await env.fork(4)             # 4 environments continuing from this step

See docs/snapshots.md for what is and is not captured.
"""

from __future__ import annotations

from ares.envs.snapshots.model import FORMAT, EnvironmentSnapshot
from ares.snapshot.restore import restore

__all__ = ["FORMAT", "EnvironmentSnapshot", "restore"]
