"""The episode actors of a ``RayRunner``: started together, told about runs, replaced when they die."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ares.errors import AresError
from ares.rollout.ray.actor import ActorInfo, EpisodeActor
from ares.rollout.ray.control import Control
from ares.rollout.ray.work import RunConfig

try:
    import ray
    from ray.exceptions import RayTaskError
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError("the Ray runner needs Ray: pip install 'ares[ray]'") from exc

#: Episode actors are named ``<prefix><fleet id>-<n>`` in the driver's Ray namespace.
ACTOR_NAME_PREFIX = "ares-episodes-"


class RayRunError(AresError):
    """The run could not start: no actor could be placed or started."""


class Fleet:
    """Live actors by name. A replacement is told about every run in progress (with the run's
    latest ``Control``) before it plays."""

    def __init__(
        self, make_env: Any, *, options: dict[str, Any], restarts: int, start_timeout_s: float, fleet_id: str
    ) -> None:
        self._cls = ray.remote(EpisodeActor)
        self._make_env, self._options, self._start_timeout_s = make_env, options, start_timeout_s
        self._fleet_id = fleet_id
        self.restarts_left = restarts
        self.live: dict[str, Any] = {}
        self.runs: dict[str, RunConfig] = {}
        self.info: ActorInfo | None = None
        self._started = 0

    async def start(self, count: int) -> ActorInfo:
        """Start ``count`` actors; the first to be ready describes the environment (its task count)."""
        results = await asyncio.gather(*(self.spawn() for _ in range(count)), return_exceptions=True)
        ready = [r for r in results if isinstance(r, tuple)]
        if not ready:
            error = cause(next(r for r in results if isinstance(r, BaseException)))
            raise RayRunError(
                f"no Ray actor could start: {type(error).__name__}: {first_line(error)}"
            ) from error
        self.info = ready[0][1]
        return self.info

    async def spawn(self) -> tuple[str, ActorInfo]:
        self._started += 1
        # Named (ray.get_actor(name)) so that tools can find a run's actors.
        name = f"{ACTOR_NAME_PREFIX}{self._fleet_id}-{self._started}"
        handle = self._cls.options(name=name, max_concurrency=1_000, **self._options).remote(
            self._make_env, name
        )
        try:
            info = await asyncio.wait_for(_await(handle.ready.remote()), self._start_timeout_s)
            await self._catch_up(handle)
        except BaseException:
            ray.kill(handle, no_restart=True)
            raise
        self.live[name] = handle
        return name, info

    async def replace(self, name: str) -> str | None:
        """Forget dead actor ``name``; a replacement's name, or None when none may or can start."""
        self.live.pop(name, None)
        if self.restarts_left <= 0:
            return None
        self.restarts_left -= 1
        try:
            new, _ = await self.spawn()
        except Exception:
            return None
        return new

    async def _catch_up(self, handle: Any) -> None:
        """Tell a new actor about every run in progress, again about one whose control changed
        meanwhile: once this returns (until the next await) the actor is in step with them all."""
        sent: dict[str, RunConfig] = {}
        while behind := [c for run_id, c in self.runs.items() if sent.get(run_id) is not c]:
            for config in behind:
                await _await(handle.begin_run.remote(config))
                sent[config.run_id] = config

    async def begin_run(self, config: RunConfig) -> None:
        self.runs[config.run_id] = config
        await self._each(lambda handle: handle.begin_run.remote(config))

    async def control(self, run_id: str, control: Control) -> None:
        """Set run ``run_id``'s gate and version on every live actor, and on replacements to come;
        returns once every actor has applied it (a pause: once none has a policy call in flight).
        An actor that dies meanwhile has nothing in flight any more."""
        config = self.runs.get(run_id)
        if config is None:
            return
        self.runs[run_id] = replace(config, control=control)
        await self._each(lambda handle: handle.control.remote(run_id, control), timeout_s=None)

    async def end_run(self, run_id: str) -> None:
        self.runs.pop(run_id, None)
        await self._each(lambda handle: handle.end_run.remote(run_id))

    async def stats(self) -> list[dict[str, Any]]:
        """Each live actor's process figures (``EpisodeActor.stats``)."""
        return [s for s in await self._each(lambda handle: handle.stats.remote()) if isinstance(s, dict)]

    async def collect_traces(self, sink: Callable[[list[dict[str, Any]]], None], policy_factory: Any) -> None:
        """Hand each live actor's span events (and a shared policy server's) to ``sink``."""
        batches = await self._each(lambda handle: handle.trace_events.remote())
        server = getattr(policy_factory, "server", None)
        if server is not None and hasattr(server, "trace_events"):
            with contextlib.suppress(Exception):
                batches.append(await asyncio.wait_for(_await(server.trace_events.remote()), 60))
        for batch in batches:
            if isinstance(batch, list):
                sink(batch)

    async def stop(self) -> None:
        await self._each(lambda handle: handle.close.remote(), timeout_s=30)
        for handle in self.live.values():
            with contextlib.suppress(Exception):
                ray.kill(handle, no_restart=True)
        self.live.clear()

    async def _each(self, call: Callable[[Any], Any], timeout_s: float | None = 60) -> list[Any]:
        """``call`` on every live actor at once; an actor that fails or dies gives its exception."""

        async def one(handle: Any) -> Any:
            return await asyncio.wait_for(_await(call(handle)), timeout_s)

        return list(await asyncio.gather(*(one(h) for h in self.live.values()), return_exceptions=True))


async def _await(ref: Any) -> Any:
    """Await a Ray ObjectRef on this event loop (never ``ray.get``, which would block it)."""
    return await ref


def cause(error: BaseException) -> BaseException:
    """What an actor raised, out of Ray's wrapper (which names the actor, not the problem)."""
    inner = getattr(error, "cause", None) if isinstance(error, RayTaskError) else None
    return inner if isinstance(inner, BaseException) else error


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
