"""The Wrapper base: forwards the declared seams of the environment it wraps, and nothing else.

A wrapper is always an ``EpisodicEnvironment`` (a plain wrapped environment is adapted by
``episodic()``, so ``episode`` is None and ``tasks`` empty rather than missing). It is a
``SnapshottingEnvironment`` (a ``ReleasingEnvironment``) only when the wrapped environment is one:
those members are forwarded per instance, so neither ``hasattr`` nor ``isinstance`` (static lookup
on Python 3.12+) sees snapshots (releases) a wrapper cannot take. Anything else of the wrapped
environment is reached through ``env`` or ``unwrapped``, by name, so what a wrapper can do is
written down here.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Any, Generic, Self

from ares.core.environment import ActT, Environment, ObsT
from ares.core.episodic import EpisodeView, EpisodicEnvironment, TaskView, episodic
from ares.core.releasing import RELEASE_MEMBERS, ReleasingEnvironment
from ares.core.snapshotting import SNAPSHOT_MEMBERS, SnapshottingEnvironment
from ares.core.timestep import TimeStep


class Wrapper(Generic[ObsT, ActT]):
    """Forwards reset/step/close, the episodic seam and (when ``env`` has them) the snapshot and
    release seams to ``env``; subclasses override what they change and call ``super()`` for the rest."""

    def __init__(self, env: Environment[ObsT, ActT]) -> None:
        self.env = env
        self._seam: EpisodicEnvironment[ObsT, ActT] = episodic(env)
        forwarded = (SNAPSHOT_MEMBERS if isinstance(env, SnapshottingEnvironment) else ()) + (
            RELEASE_MEMBERS if isinstance(env, ReleasingEnvironment) else ()
        )
        cls = type(self)
        for name in forwarded:
            if not hasattr(cls, name):  # a subclass that changes the member keeps its own
                setattr(self, name, getattr(env, name))

    # ------------------------------------------------------------------ Environment
    async def reset(self, *, seed: int | None = None, task: Any | None = None) -> TimeStep[ObsT]:
        return await self._seam.reset(seed=seed, task=task)

    async def step(self, action: ActT) -> TimeStep[ObsT]:
        return await self._seam.step(action)

    async def close(self) -> None:
        await self._seam.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # ------------------------------------------------------------------ episodic seam
    @property
    def episode(self) -> EpisodeView | None:
        return self._seam.episode

    @property
    def task(self) -> TaskView | None:
        return self._seam.task

    @property
    def tasks(self) -> Sequence[TaskView]:
        return self._seam.tasks

    @property
    def action_format(self) -> Any | None:
        return self._seam.action_format

    @property
    def observation(self) -> ObsT | None:
        return self._seam.observation

    @property
    def closed(self) -> bool:
        return self._seam.closed

    async def abort(self, error: BaseException | None = None) -> None:
        await self._seam.abort(error)

    # ------------------------------------------------------------------ the chain
    @property
    def unwrapped(self) -> Environment[Any, Any]:
        """The innermost environment, under every wrapper."""
        env: Any = self.env
        return env.unwrapped if isinstance(env, Wrapper) else env
