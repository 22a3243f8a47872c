"""Shared-prefix groups (``branch_at``): one episode played to step t, forked k ways
(``CodeEnvironment.fork``), each branch played to its end, so the k rollouts of a group differ only
after t (``run_episodes(branch_at=t)``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from ares import tracing
from ares.core.environment import Environment
from ares.core.episodic import episodic
from ares.core.timestep import transition
from ares.policies.base import PolicyFactory
from ares.records.collecting import TraceLevel, TrajectoryCollectingEnvironment
from ares.records.collectors import TrajectoryCollector
from ares.rollout.episode_play import (
    DEFAULT_POLICY_TIMEOUT_S,
    EpisodePlay,
    attached,
    close_policy,
    policy_for,
)
from ares.rollout.pause import PolicyGate
from ares.rollout.plan import RunPlan
from ares.rollout.results import EpisodeResult
from ares.rollout.staleness import Staleness


async def run_branched_group(
    make_env: Callable[[], Environment[Any, Any]],
    policy_factory: PolicyFactory,
    *,
    group: int,
    size: int,
    branch_at: int,
    first_index: int,
    task: Any,
    seed: int | None,
    collector: TrajectoryCollector | None = None,
    trace: TraceLevel = "basic",
    policy_timeout_s: float | None = DEFAULT_POLICY_TIMEOUT_S,
    staleness: Staleness | None = None,
    gate: PolicyGate | None = None,
) -> list[EpisodeResult]:
    """A group of ``size`` rollouts that share their first ``branch_at`` steps: one episode is played
    to that step, forked (``CodeEnvironment.fork``), and each branch is played to its end with a
    fresh policy from ``policy_factory`` (stateless policies such as an LLM's see exactly the shared
    prefix). The prefix episode is recorded as the branches' parent; one result per branch (or the
    prefix's own result, if it ended before ``branch_at``). Every policy call, the prefix's and the
    branches', passes ``gate``; ``staleness`` judges the prefix and each branch by their own answers
    (a branch's record starts at the fork: the prefix's answers are its prompt, not its tokens)."""
    env = episodic(make_env())
    level: TraceLevel = trace if collector is not None else "off"
    driver = TrajectoryCollectingEnvironment(env, collector, trace=level)
    driver.group_id = f"g{group}"
    prefix = EpisodePlay(env, driver, policy_timeout_s, staleness, gate)
    prefix_policy = None

    def prefix_done() -> bool:
        episode = env.episode
        return episode is not None and episode.steps >= branch_at

    try:
        timestep = await driver.reset(seed=seed, task=task)
        prefix_policy = policy_for(policy_factory, env)
        with attached(gate, env):
            timestep = await prefix.until(timestep, prefix_policy, stop=prefix_done)
        if timestep.last():
            result = prefix.result(index=first_index, task=task, group=group)
            await driver.close()
            return [result]
        branches = await driver.fork(size)
    except asyncio.CancelledError:
        await asyncio.shield(driver.close())
        raise
    except Exception as exc:
        await prefix.fail(exc)
        result = prefix.result(index=first_index, task=task, group=group)
        await driver.close()
        return [result]
    finally:
        await close_policy(prefix_policy)
    await driver.abort()  # the prefix is the branches' parent, not a rollout of its own
    await driver.close()

    plays = (
        _play_branch(b, policy_factory, prefix, index=first_index + i, branch=i, task=task, group=group)
        for i, b in enumerate(branches)
    )
    return list(await asyncio.gather(*plays))


async def _play_branch(
    env: TrajectoryCollectingEnvironment,
    policy_factory: PolicyFactory,
    prefix: EpisodePlay,
    *,
    index: int,
    branch: int,
    task: Any,
    group: int,
) -> EpisodeResult:
    """Play a fork from the step it was forked at to its end, with a fresh policy and the prefix's
    timeout, gate and staleness bound; then close it."""
    with tracing.span("episode", cat="episode", track=f"episode {index}", index=index, branch=branch) as span:
        play = EpisodePlay(env, env, prefix.timeout_s, prefix.staleness, prefix.gate)

        async def here() -> Any:  # a branch starts where the fork left it
            return transition(env.observation)

        with attached(prefix.gate, env.unwrapped):
            await play.play(here, policy_factory)
        result = play.result(index=index, task=task, group=group)
        span.set("status", str(result.status))
        span.set("reward", result.reward)
    await env.close()
    return result


async def run_branched(plan: RunPlan, branch_at: int) -> list[EpisodeResult]:
    """``run_episodes`` with shared-prefix groups: about ``concurrency`` episodes at once."""
    if branch_at < 0:
        raise ValueError(f"branch_at must be >= 0, got {branch_at}")
    probe = episodic(plan.make_env())
    count = plan.num_tasks or len(probe.tasks) or 1
    await probe.close()
    k = plan.group_size
    groups = [g for g in range((plan.episodes + k - 1) // k) if g * k not in plan.skip]
    limit = asyncio.Semaphore(max(1, plan.concurrency // k))
    results: list[EpisodeResult] = []

    async def one(group: int) -> None:
        async with limit:
            size = min(k, plan.episodes - group * k)
            with tracing.span("group", cat="episode", track=f"group {group}", group=group):
                done = await run_branched_group(
                    plan.make_env, plan.policy_factory, group=group, size=size, branch_at=branch_at,
                    first_index=group * k, task=plan.task_of(group, count), seed=plan.seed + group * k,
                    collector=plan.collector, trace=plan.trace, policy_timeout_s=plan.policy_timeout_s,
                    staleness=plan.staleness, gate=plan.gate,
                )  # fmt: skip
        results.extend(plan.keep(result) for result in done)

    with tracing.span("run", cat="run", track="runner", episodes=plan.episodes, branch_at=branch_at):
        async with asyncio.TaskGroup() as tasks:
            for group in groups:
                tasks.create_task(one(group))
    return sorted(results, key=lambda r: r.index)
