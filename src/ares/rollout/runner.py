"""Run many episodes concurrently in one event loop and collect one result per episode.

Each worker owns one environment and pulls episode numbers from a shared queue; with ``group_size``
k, episodes ``g*k .. g*k+k-1`` form group ``g`` and all run task ``g % len(tasks)`` (k rollouts of
one task, as GRPO needs), each with its own seed ``seed + i``. A failing or slow policy never stops
the run: the episode ends ``errored`` with its error, the same in the result, the trajectory record
and the episode record, and errored episodes are counted apart from the scored ones.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import replace
from typing import Any

from ares import tracing
from ares.core.environment import Environment
from ares.core.episodic import EpisodicEnvironment, episodic
from ares.policies.base import PolicyFactory
from ares.records.collecting import TraceLevel, TrajectoryCollectingEnvironment
from ares.records.collectors import TrajectoryCollector
from ares.rollout.branched import run_branched, run_branched_group
from ares.rollout.episode_play import DEFAULT_POLICY_TIMEOUT_S, run_episode
from ares.rollout.pause import PolicyGate
from ares.rollout.plan import RunPlan, check_group_tasks
from ares.rollout.results import EpisodeResult
from ares.rollout.staleness import Staleness

__all__ = ["DEFAULT_POLICY_TIMEOUT_S", "run_branched_group", "run_episode", "run_episodes"]


async def run_episodes(
    make_env: Callable[[], Environment[Any, Any]],
    policy_factory: PolicyFactory,
    *,
    episodes: int,
    concurrency: int = 8,
    seed: int = 0,
    on_result: Callable[[EpisodeResult], None] | None = None,
    collector: TrajectoryCollector | None = None,
    trace: TraceLevel = "basic",
    skip: Collection[int] = (),
    group_size: int = 1,
    policy_timeout_s: float | None = DEFAULT_POLICY_TIMEOUT_S,
    num_tasks: int | None = None,
    branch_at: int | None = None,
    keep_records: bool = True,
    refills: int = 0,
    before_episode: Callable[[int], Awaitable[None]] | None = None,
    staleness: Staleness | None = None,
    gate: PolicyGate | None = None,
    group_tasks: Sequence[int] | None = None,
) -> list[EpisodeResult]:
    """Run ``episodes`` episodes with at most ``concurrency`` at once; results in episode order.

    ``group_size`` k runs k rollouts of each task in turn (episode ``i`` is in group ``i // k`` and
    runs task ``(i // k) % num_tasks``); each result and trajectory carries its group. With a
    ``collector`` every episode is recorded (with rollout traces at ``trace``), including episodes
    cut by errors or cancellation. Episode numbers in ``skip`` are not run (``--resume``).
    ``num_tasks`` defaults to ``len(env.tasks)`` of the first environment (1 if it has none).
    ``branch_at`` t makes each group share its first t steps (``run_branched_group``: one prefix,
    forked k ways); ``skip`` then skips whole groups whose first episode number it holds.
    ``keep_records=False`` returns each result without its ``record`` (``on_result`` still gets it
    whole): a long run then holds a few hundred bytes per episode, not its episode dict (verifier
    output, tracebacks) — for callers that store or stream each result as it comes.
    ``refills`` n plays an episode whose failure was the infrastructure's (blame ``infra``,
    ``ares.envs.blame``) again, up to n times, with the same index, task and seed, so groups stay
    whole; the result counts its ``refills`` and the trajectory of the last attempt supersedes the
    failed ones (``ares.records.loader``). A policy's own failure is never refilled.
    ``before_episode(index)`` is awaited before each episode starts: a consumer's backpressure
    (``ares.rollout.stream``). ``staleness`` bounds how old an episode's tokens may get (see
    ``run_episode``); a stale episode is blamed ``infra`` and so refilled with ``refills``. Every
    policy call passes ``gate``: ``gate.pause()`` holds the run at its step boundaries while a
    trainer updates weights, ``gate.resume()`` goes on (``ares.rollout.pause``). ``group_tasks``
    gives each group's task index instead of the round robin (one per group: a curriculum's draw,
    ``ares.rollout.curriculum``).
    """
    if refills < 0:
        raise ValueError(f"refills must be >= 0, got {refills}")
    if (refills or before_episode is not None) and branch_at is not None:
        raise ValueError("refills and streaming apply to independent episodes, not to shared-prefix groups")
    plan = RunPlan(
        make_env, policy_factory, episodes=episodes, concurrency=concurrency, seed=seed,
        keep=_keeper(on_result, keep_records), collector=collector, trace=trace, skip=frozenset(skip),
        group_size=group_size, policy_timeout_s=policy_timeout_s, num_tasks=num_tasks, refills=refills,
        before_episode=before_episode, staleness=staleness, gate=gate,
        group_tasks=None if group_tasks is None else check_group_tasks(group_tasks, episodes, group_size),
    )  # fmt: skip
    if branch_at is not None:
        return await run_branched(plan, branch_at)
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    return await _run_flat(plan)


async def _run_flat(plan: RunPlan) -> list[EpisodeResult]:
    """``run_episodes`` one episode at a time per worker: each worker keeps its environment (and its
    recording wrapper) from one episode to the next, and takes a fresh one when a failure closed it."""
    pending = iter([i for i in range(plan.episodes) if i not in plan.skip])
    results: list[EpisodeResult] = []
    to_run = plan.episodes - len(plan.skip & set(range(plan.episodes)))
    k = plan.group_size

    def fresh() -> tuple[EpisodicEnvironment[Any, Any], TrajectoryCollectingEnvironment]:
        env = episodic(plan.make_env())
        level: TraceLevel = plan.trace if plan.collector is not None else "off"  # no traces to keep
        return env, TrajectoryCollectingEnvironment(env, plan.collector, trace=level)

    async def worker() -> None:
        env, driver = fresh()
        count = plan.num_tasks or len(env.tasks) or 1
        try:
            for index in pending:
                if plan.before_episode is not None:
                    await plan.before_episode(index)
                group, refilled = index // k, 0
                while True:  # once, and again while the infrastructure fails it (``refills``)
                    driver.group_id = None if k == 1 else f"g{group}"
                    driver.episode_index = index
                    result = await run_episode(
                        env, plan.policy_factory, index=index, task=plan.task_of(group, count),
                        seed=plan.seed + index, driver=driver, group=None if k == 1 else group,
                        policy_timeout_s=plan.policy_timeout_s, staleness=plan.staleness, gate=plan.gate,
                    )  # fmt: skip
                    if env.closed:  # a failure closed it; keep going with a fresh one
                        env, driver = fresh()
                    if result.blame != "infra" or refilled == plan.refills:
                        break
                    refilled += 1
                results.append(plan.keep(replace(result, refills=refilled)))
        finally:
            with contextlib.suppress(Exception):
                await driver.close()

    with tracing.span("run", cat="run", track="runner", episodes=plan.episodes, concurrency=plan.concurrency):
        async with asyncio.TaskGroup() as group_tasks:
            for _ in range(max(1, min(plan.concurrency, to_run))):
                group_tasks.create_task(worker())
    return sorted(results, key=lambda r: r.index)


def _keeper(
    on_result: Callable[[EpisodeResult], None] | None, keep_records: bool
) -> Callable[[EpisodeResult], EpisodeResult]:
    """What the runner does with each finished result: hand it to ``on_result``, then return what
    it keeps of it (the result itself, or it without its record)."""

    def keep(result: EpisodeResult) -> EpisodeResult:
        if on_result is not None:
            on_result(result)
        return result if keep_records else replace(result, record={})

    return keep
