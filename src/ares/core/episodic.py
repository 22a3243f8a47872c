"""The episodic seam: what a runner or a wrapper reads of an environment beyond reset/step/close.

A runner hands the policy factory the current task and the agent's action format, reads the
episode's record when it ends, counts an environment's tasks, ends an episode early when the
policy fails, and replaces an environment that closed. A ``CodeEnvironment`` declares all of that
(``EpisodicEnvironment``). A plain user ``Environment`` (reset/step/close only) is adapted once by
``episodic()``, which says plainly what it lacks, so no caller has to probe attributes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Generic, Protocol, Self, runtime_checkable

from ares.core.environment import ActT, ActT_contra, Environment, ObsT, ObsT_co
from ares.core.status import EpisodeStatus
from ares.core.timestep import TimeStep


class TaskView(Protocol):
    """A task as a runner sees it: something with an id (``ares.Task`` is one)."""

    @property
    def id(self) -> str: ...


class EpisodeView(Protocol):
    """An environment's record of its current (or last) episode, as readers see it (read-only)."""

    @property
    def id(self) -> str: ...

    @property
    def seed(self) -> int | None: ...

    @property
    def status(self) -> EpisodeStatus: ...

    @property
    def steps(self) -> int: ...

    @property
    def reward(self) -> float | None: ...

    @property
    def exit_reason(self) -> str | None: ...

    @property
    def truncation(self) -> str | None: ...

    @property
    def reward_terms(self) -> Mapping[str, float]: ...

    @property
    def parent_episode_id(self) -> str | None: ...

    @property
    def branch_step(self) -> int | None: ...

    def to_dict(self) -> dict[str, Any]: ...


@runtime_checkable
class EpisodicEnvironment(Environment[ObsT_co, ActT_contra], Protocol[ObsT_co, ActT_contra]):
    """An Environment that keeps a record of its episode and knows its tasks: what runners need.

    ``episode`` is None before the first reset; ``task`` is the current episode's task, ``tasks``
    the ones ``reset(task=i)`` indexes; ``action_format`` is how scripted policies talk to the
    agent (None when there is no such thing); ``observation`` is the one awaiting an action (None
    between episodes). ``abort`` ends the active episode now (``errored`` with ``error``, else
    ``aborted``) and leaves the environment open for the next reset.
    """

    @property
    def episode(self) -> EpisodeView | None: ...

    @property
    def task(self) -> TaskView | None: ...

    @property
    def tasks(self) -> Sequence[TaskView]: ...

    @property
    def action_format(self) -> Any | None: ...

    @property
    def observation(self) -> ObsT_co | None: ...

    @property
    def closed(self) -> bool: ...

    async def abort(self, error: BaseException | None = None) -> None: ...


class PlainEnvironment(Generic[ObsT, ActT]):
    """A plain Environment seen through the episodic seam: no episode record, no tasks, no action
    format. It follows what passes through it (the pending observation, whether it was closed);
    ``abort`` has nothing to end early, so the episode is simply left for the next reset."""

    def __init__(self, env: Environment[ObsT, ActT]) -> None:
        self.env = env
        self._observation: ObsT | None = None
        self._closed = False

    @property
    def episode(self) -> None:
        return None

    @property
    def task(self) -> None:
        return None

    @property
    def tasks(self) -> tuple[()]:
        return ()

    @property
    def action_format(self) -> None:
        return None

    @property
    def observation(self) -> ObsT | None:
        return self._observation

    @property
    def closed(self) -> bool:
        return self._closed

    async def reset(self, *, seed: int | None = None, task: Any | None = None) -> TimeStep[ObsT]:
        return self._follow(await self.env.reset(seed=seed, task=task))

    async def step(self, action: ActT) -> TimeStep[ObsT]:
        return self._follow(await self.env.step(action))

    async def abort(self, error: BaseException | None = None) -> None:
        self._observation = None

    async def close(self) -> None:
        self._closed, self._observation = True, None
        await self.env.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def _follow(self, timestep: TimeStep[ObsT]) -> TimeStep[ObsT]:
        self._observation = None if timestep.last() else timestep.observation
        return timestep


def episodic(env: Environment[ObsT, ActT]) -> EpisodicEnvironment[ObsT, ActT]:
    """``env`` itself when it declares the episodic seam, else ``env`` adapted (``PlainEnvironment``)."""
    if isinstance(env, EpisodicEnvironment):
        return env
    return PlainEnvironment(env)
