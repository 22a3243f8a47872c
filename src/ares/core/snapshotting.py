"""The snapshot seam: environments that can freeze an episode at a step, restore it and fork it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from ares.core.episodic import EpisodicEnvironment
from ares.core.timestep import TimeStep


@runtime_checkable
class SnapshottingEnvironment(Protocol):
    """``snapshot()`` freezes the active episode at its current step; ``restore(snapshot)`` positions
    the environment there (a new episode that names its parent) and returns that step's TimeStep;
    ``fork(n)`` makes n independent environments continuing from the current step, each with its
    ``observation`` pending. A ``CodeEnvironment`` offers them (see ``ares.snapshot``)."""

    async def snapshot(self) -> Any: ...

    async def restore(self, snapshot: Any) -> TimeStep[Any]: ...

    async def fork(self, n: int) -> Sequence[EpisodicEnvironment[Any, Any]]: ...


#: The members of the snapshot seam, which a ``Wrapper`` forwards by name when its environment has them.
SNAPSHOT_MEMBERS = ("snapshot", "restore", "fork")
