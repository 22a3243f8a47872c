"""The Ray actor that plays episodes: one asyncio event loop running up to its concurrency at once.

An actor outlives runs: the driver announces each run (``begin_run``: its policy and settings) and
then sends its work. Idle environments are kept between episodes (as a local runner's worker
does), per recording setting; each records into its own ``BufferCollector`` and the events go back
with the result, so the driver alone writes records. Each run has a gate and a trainer version of
its own here (``control.RunControl``), which the driver sets (``control``). A plain class here; the
fleet wraps it with ``ray.remote``.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any

from ares import tracing
from ares.core.closing import AsyncClosable
from ares.core.environment import Environment
from ares.core.episodic import EpisodicEnvironment, episodic
from ares.records.collecting import TrajectoryCollectingEnvironment
from ares.rollout.branched import run_branched_group
from ares.rollout.episode_play import run_episode
from ares.rollout.ray.buffer import BufferCollector
from ares.rollout.ray.control import Control, RunControl
from ares.rollout.ray.work import Played, RunConfig, Work


@dataclass(slots=True)
class _Slot:
    env: EpisodicEnvironment[Any, Any]
    driver: TrajectoryCollectingEnvironment
    buffer: BufferCollector


@dataclass(frozen=True, slots=True)
class ActorInfo:
    name: str
    pid: int
    node: str
    num_tasks: int


class EpisodeActor:
    """Plays ``Work`` with environments from ``make_env`` and the policy of the work's run."""

    def __init__(self, make_env: Any, name: str) -> None:
        self._make_env = make_env
        self._name = name
        self._runs: dict[str, RunConfig] = {}
        self._controls: dict[str, RunControl] = {}
        self._idle: dict[tuple[bool, str], list[_Slot]] = {}
        self._spare: EpisodicEnvironment[Any, Any] | None = None

    async def ready(self) -> ActorInfo:
        """Build a first environment (kept for the first episode) and say who and where we are."""
        self._spare = spare = episodic(self._make_env())
        node = ""
        with contextlib.suppress(Exception):
            import ray

            node = ray.get_runtime_context().get_node_id()
        return ActorInfo(self._name, os.getpid(), node, len(spare.tasks) or 1)

    async def begin_run(self, config: RunConfig) -> None:
        """Take the run's policy and settings; told again (a newer ``control``), only the control."""
        if config.run_id not in self._runs and config.tracing != "off":
            tracing.configure(config.tracing, process=f"{self._name} (pid {os.getpid()})")  # type: ignore[arg-type]
        self._runs[config.run_id] = config
        run = self._controls.setdefault(config.run_id, RunControl(config.control))
        await run.apply(config.control)

    async def control(self, run_id: str, control: Control) -> None:
        """The driver's gate and version for run ``run_id``; a pause returns once none of this
        actor's episodes of the run is in a policy call."""
        run = self._controls.get(run_id)
        if run is not None:
            await run.apply(control)

    async def end_run(self, run_id: str) -> None:
        """Forget the run and release what its policy factory holds (e.g. an HTTP pool)."""
        run = self._controls.pop(run_id, None)
        if run is not None:
            run.release()
        config = self._runs.pop(run_id, None)
        if config is not None and isinstance(config.policy_factory, AsyncClosable):
            with contextlib.suppress(Exception):
                await config.policy_factory.aclose()

    async def play(self, work: Work) -> Played:
        config = self._runs.get(work.run_id)
        if config is None:
            raise LookupError(f"{self._name} was not told about run {work.run_id} (begin_run)")
        if work.size > 1 or config.branch_at is not None:
            return await self._play_group(work, config)
        run = self._controls[work.run_id]
        key = (config.record, config.trace)
        idle = self._idle.setdefault(key, [])
        slot = idle.pop() if idle else self._fresh(config)
        slot.driver.group_id = None if work.group is None else f"g{work.group}"
        slot.driver.episode_index = work.index
        try:
            result = await run_episode(
                slot.env, config.policy_factory, index=work.index, task=work.task, seed=work.seed,
                driver=slot.driver, group=work.group, policy_timeout_s=config.policy_timeout_s,
                flows_in=(work.dispatch_flow,), flows_out=(work.result_flow,), staleness=run.staleness,
                gate=run.gate,
            )  # fmt: skip
        except BaseException:
            await _close_quietly(slot.driver)
            raise
        events = tuple(slot.buffer.take())
        if slot.env.closed:  # a failure closed it; the next episode gets a fresh one
            await _close_quietly(slot.driver)
        else:
            idle.append(slot)
        return Played((result,), events, self._name)

    async def _play_group(self, work: Work, config: RunConfig) -> Played:
        buffer = BufferCollector()
        run = self._controls[work.run_id]
        with tracing.span(
            "group", cat="episode", track=f"group {work.group}", group=work.group,
            flows_in=(work.dispatch_flow,), flows_out=(work.result_flow,),
        ):  # fmt: skip
            results = await run_branched_group(
                self._make_env, config.policy_factory, group=work.group or 0, size=work.size,
                branch_at=config.branch_at or 0, first_index=work.index, task=work.task, seed=work.seed,
                collector=buffer if config.record else None, trace=config.trace,
                policy_timeout_s=config.policy_timeout_s, staleness=run.staleness, gate=run.gate,
            )  # fmt: skip
        return Played(tuple(results), tuple(buffer.take()), self._name)

    async def stats(self) -> dict[str, Any]:
        """This process's memory, fds and threads, and its idle environments: what a soak watches;
        and each run's gate and version here (``RunControl.stats``)."""
        idle = sum(map(len, self._idle.values()))
        runs = {run_id: control.stats() for run_id, control in self._controls.items()}
        return {"name": self._name, **process_stats(), "idle_envs": idle, "runs": runs}

    async def trace_events(self) -> list[dict[str, Any]]:
        """The span events this actor recorded since the last call (tracing on), for the driver."""
        return tracing.drain()

    async def close(self) -> None:
        """Close idle environments, the runs' policy factories and what ``make_env`` holds."""
        idle, self._idle = self._idle, {}
        for slot in (s for slots in idle.values() for s in slots):
            await _close_quietly(slot.driver)
        spare, self._spare = self._spare, None
        if spare is not None:
            with contextlib.suppress(Exception):
                await spare.close()
        for run_id in list(self._runs):
            await self.end_run(run_id)
        env_closer = getattr(self._make_env, "close", None)  # e.g. PresetEnv's sandbox factories
        if callable(env_closer):
            with contextlib.suppress(Exception):
                env_closer()

    def _fresh(self, config: RunConfig) -> _Slot:
        env, self._spare = (
            (self._spare, None) if self._spare is not None else (episodic(self._make_env()), None)
        )
        buffer = BufferCollector()
        collector = buffer if config.record else None
        level = config.trace if config.record else "off"
        return _Slot(env, TrajectoryCollectingEnvironment(env, collector, trace=level), buffer)


def process_stats() -> dict[str, int]:
    """This process's resident and peak memory (KiB), open fds and threads, from procfs."""
    wanted = {"VmRSS": "rss_kib", "VmHWM": "hwm_kib"}
    stats = {"pid": os.getpid()}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in wanted:
                stats[wanted[key]] = int(value.split()[0])
    stats["fds"] = len(os.listdir("/proc/self/fd"))
    stats["threads"] = len(os.listdir("/proc/self/task"))
    return stats


async def _close_quietly(driver: Environment[Any, Any]) -> None:
    with contextlib.suppress(Exception):
        await driver.close()
