"""The async Environment protocol: reset, step, close (the Wrapper base is in ``ares.core.wrapper``)."""

from __future__ import annotations

from types import TracebackType
from typing import Any, Protocol, Self, TypeVar, runtime_checkable

from ares.core.timestep import TimeStep

ObsT = TypeVar("ObsT")
ActT = TypeVar("ActT")
ObsT_co = TypeVar("ObsT_co", covariant=True)
ActT_contra = TypeVar("ActT_contra", contravariant=True)


@runtime_checkable
class Environment(Protocol[ObsT_co, ActT_contra]):
    """An async dm_env: reset() -> FIRST, step(action) -> MID... LAST, close()."""

    async def reset(self, *, seed: int | None = None, task: Any | None = None) -> TimeStep[ObsT_co]: ...

    async def step(self, action: ActT_contra) -> TimeStep[ObsT_co]: ...

    async def close(self) -> None: ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...
