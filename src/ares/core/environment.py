"""The async Environment protocol and a forwarding Wrapper base."""

from __future__ import annotations

from types import TracebackType
from typing import Any, Generic, Protocol, Self, TypeVar, runtime_checkable

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


class Wrapper(Generic[ObsT, ActT]):
    """Forwards everything to the wrapped environment; subclasses override what they change."""

    def __init__(self, env: Environment[ObsT, ActT]) -> None:
        self.env = env

    async def reset(self, *, seed: int | None = None, task: Any | None = None) -> TimeStep[ObsT]:
        return await self.env.reset(seed=seed, task=task)

    async def step(self, action: ActT) -> TimeStep[ObsT]:
        return await self.env.step(action)

    async def close(self) -> None:
        await self.env.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def unwrapped(self) -> Environment[Any, Any]:
        env: Any = self.env
        return env.unwrapped if isinstance(env, Wrapper) else env

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.env, name)
