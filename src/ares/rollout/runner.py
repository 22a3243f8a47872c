"""Run many episodes concurrently in one event loop and collect one result per episode.

Each worker owns one environment and pulls episode numbers from a shared counter; episode ``i``
runs task ``i % len(tasks)`` with seed ``seed + i``. A failing policy or environment never stops
the run: the episode is returned with status ``errored`` and its error.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ares.core.status import EpisodeStatus
from ares.envs.code_env import CodeEnvironment
from ares.envs.episode import ErrorInfo
from ares.policies.base import PolicyFactory


@dataclass(frozen=True, slots=True)
class EpisodeResult:
    """One finished episode: the environment's record plus the runner's timings."""

    index: int
    task_id: str
    status: EpisodeStatus
    reward: float | None
    steps: int
    duration_s: float
    step_latencies_s: tuple[float, ...]
    record: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.status is EpisodeStatus.FINISHED and (self.reward or 0.0) >= 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.record,
            "index": self.index,
            "task_id": self.task_id,
            "status": str(self.status),
            "reward": self.reward,
            "steps": self.steps,
            "passed": self.passed,
            "runner_duration_s": self.duration_s,
            "step_latencies_s": list(self.step_latencies_s),
        }


@dataclass(frozen=True, slots=True)
class RunSummary:
    episodes: int
    mean_reward: float
    pass_rate: float
    statuses: dict[str, int]
    mean_steps: float
    wall_time_s: float
    p50_step_latency_s: float | None

    @classmethod
    def of(cls, results: Sequence[EpisodeResult], wall_time_s: float) -> RunSummary:
        n = len(results)
        latencies = [x for r in results for x in r.step_latencies_s]
        return cls(
            episodes=n,
            mean_reward=statistics.fmean(r.reward or 0.0 for r in results) if n else 0.0,
            pass_rate=sum(r.passed for r in results) / n if n else 0.0,
            statuses=dict(Counter(str(r.status) for r in results)),
            mean_steps=statistics.fmean(r.steps for r in results) if n else 0.0,
            wall_time_s=wall_time_s,
            p50_step_latency_s=statistics.median(latencies) if latencies else None,
        )


async def run_episode(
    env: CodeEnvironment, policy_factory: PolicyFactory, *, index: int, task: int, seed: int | None
) -> EpisodeResult:
    """Play one episode to its end; policy errors end it as ``errored`` instead of raising."""
    start = time.perf_counter()
    latencies: list[float] = []
    error: BaseException | None = None
    try:
        timestep = await env.reset(seed=seed, task=task)
        assert env.task is not None
        policy = policy_factory(env.task, env.action_format)
        while not timestep.last():
            action = await policy.act(timestep.observation)  # type: ignore[arg-type]
            t0 = time.perf_counter()
            timestep = await env.step(action)
            latencies.append(time.perf_counter() - t0)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        error = exc
        await env.close()
    episode = env.episode
    record = episode.to_dict() if episode is not None else {}
    status = episode.status if episode is not None else EpisodeStatus.ERRORED
    if error is not None:
        status = EpisodeStatus.ERRORED
        info = ErrorInfo.from_exception(error)
        record["error"] = {"type": info.type, "message": info.message, "traceback": info.traceback}
    return EpisodeResult(
        index=index,
        task_id=env.tasks[task].id,
        status=status,
        reward=episode.reward if episode is not None and error is None else 0.0,
        steps=episode.steps if episode is not None else 0,
        duration_s=time.perf_counter() - start,
        step_latencies_s=tuple(latencies),
        record=record,
    )


async def run_episodes(
    make_env: Callable[[], CodeEnvironment],
    policy_factory: PolicyFactory,
    *,
    episodes: int,
    concurrency: int = 8,
    seed: int = 0,
    on_result: Callable[[EpisodeResult], None] | None = None,
) -> list[EpisodeResult]:
    """Run ``episodes`` episodes with at most ``concurrency`` at once; results in episode order."""
    counter = itertools.count()
    results: list[EpisodeResult] = []

    async def worker() -> None:
        env = make_env()
        try:
            while (index := next(counter)) < episodes:
                result = await run_episode(
                    env, policy_factory, index=index, task=index % len(env.tasks), seed=seed + index
                )
                results.append(result)
                if on_result is not None:
                    on_result(result)
                if env.closed:  # a policy error closed it; keep going with a fresh one
                    env = make_env()
        finally:
            with contextlib.suppress(Exception):
                await env.close()

    async with asyncio.TaskGroup() as group:
        for _ in range(max(1, min(concurrency, episodes))):
            group.create_task(worker())
    return sorted(results, key=lambda r: r.index)
