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
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ares import tracing
from ares.core.closing import AsyncClosable
from ares.core.environment import Environment
from ares.core.episodic import EpisodicEnvironment, episodic
from ares.core.status import EpisodeStatus
from ares.core.timestep import transition
from ares.envs.blame import Blame, blame_for, error_blame
from ares.envs.episode import ErrorInfo
from ares.errors import AresTimeoutError, PolicyTimeoutError
from ares.llm.token_versions import oldest_version
from ares.llm.types import LLMResponse
from ares.policies.base import PolicyFactory
from ares.policies.versions import version_of
from ares.records.collecting import PolicyCallSink, TraceLevel, TrajectoryCollectingEnvironment
from ares.records.collectors import TrajectoryCollector
from ares.records.policy_call import PolicyCall
from ares.rollout.pause import PolicyGate
from ares.rollout.preemption import answer
from ares.rollout.results import EpisodeResult
from ares.rollout.staleness import Staleness
from ares.rollout.token_counts import TokenCounts

#: How long one policy answer may take by default before its episode ends ``errored``.
DEFAULT_POLICY_TIMEOUT_S = 600.0


async def run_episode(
    env: Environment[Any, Any],
    policy_factory: PolicyFactory,
    *,
    index: int,
    task: Any,
    seed: int | None,
    driver: Environment[Any, Any] | None = None,
    group: int | None = None,
    policy_timeout_s: float | None = DEFAULT_POLICY_TIMEOUT_S,
    flows_in: Sequence[int] = (),
    flows_out: Sequence[int] = (),
    staleness: Staleness | None = None,
    gate: PolicyGate | None = None,
) -> EpisodeResult:
    """Play one episode of ``env`` to its end. An ``EpisodicEnvironment`` (a CodeEnvironment) hands
    its task and action format to the policy factory and its episode record to the result; a plain
    Environment is adapted (``ares.core.episodic``): no task, no record, the TimeSteps alone.
    A policy that raises or exceeds ``policy_timeout_s`` ends the episode ``errored`` (result,
    trajectory and episode record agree; the environment stays open, see ``abort``); cancellation
    ends it ``cancelled`` and propagates.

    ``driver`` is what reset/step/abort go through (e.g. a recording wrapper around ``env``).
    ``staleness`` ends the episode (``StaleEpisodeError``) once its oldest token is too far behind
    the trainer's current version (``ares.rollout.staleness``), checked at every step boundary;
    every policy call passes ``gate`` (``ares.rollout.pause``: a trainer pauses it to update weights;
    a preempted call is re-issued, and a long pause may release ``env``'s sandbox meanwhile).
    The episode is one span on its own trace track; ``flows_in``/``flows_out`` link it to the spans
    that dispatched it and take its result (another process's, on Ray).
    """
    with tracing.span(
        "episode", cat="episode", track=f"episode {index}", flows_in=flows_in, flows_out=flows_out,
        index=index, task=str(task), seed=seed,
    ) as span:  # fmt: skip
        seam = episodic(env)
        play = _Play(seam, seam if driver is None else episodic(driver), policy_timeout_s, staleness, gate)
        with _attached(gate, env):
            await play.play(lambda: play.drive.reset(seed=seed, task=task), policy_factory)
        result = play.result(index=index, task=task, group=group)
        span.set("status", str(result.status))
        span.set("reward", result.reward)
    return result


def _attached(gate: PolicyGate | None, env: Any) -> contextlib.AbstractContextManager[None]:
    """``env`` as what a long pause of ``gate`` may release while its episode waits there."""
    return contextlib.nullcontext() if gate is None else gate.attach(env)


class _Play:
    """One episode being played by a policy: its timings, tokens and outcome."""

    def __init__(
        self,
        env: EpisodicEnvironment[Any, Any],
        drive: EpisodicEnvironment[Any, Any],
        timeout_s: float | None,
        staleness: Staleness | None = None,
        gate: PolicyGate | None = None,
    ) -> None:
        self.env, self.drive, self.timeout_s, self.staleness = env, drive, timeout_s, staleness
        self.gate = gate
        self.oldest_version: int | None = None
        self.started = time.perf_counter()
        self.latencies: list[float] = []
        self.policy_latencies: list[float] = []
        self.tokens = TokenCounts()
        self.timestep: Any = None
        self.error: BaseException | None = None

    async def play(self, first: Callable[[], Awaitable[Any]], policy_factory: PolicyFactory) -> None:
        """Take the first TimeStep from ``first()`` (a reset, or where a fork left off), then step
        with a fresh policy to the end. A failure ends the episode ``errored`` (cancellation
        propagates); the policy is released either way."""
        policy = None
        try:
            timestep = await first()
            policy = _policy(policy_factory, self.env)
            await self.until(timestep, policy)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            await self.fail(exc)
        finally:
            await _close_policy(policy)

    async def until(self, timestep: Any, policy: Any, *, stop: Callable[[], bool] = lambda: False) -> Any:
        """Step with ``policy`` from ``timestep`` until LAST (or until ``stop()``); the last TimeStep."""
        self.timestep = timestep
        sink = self.drive if isinstance(self.drive, PolicyCallSink) else None
        while not timestep.last() and not stop():
            requested_at = time.time()
            if self.gate is not None:
                async with self.gate.call():  # a trainer's pause holds the call back, not the episode
                    action, latency, call = await self._ask(policy, timestep, requested_at)
            else:
                action, latency, call = await self._ask(policy, timestep, requested_at)
            self.policy_latencies.append(latency)
            self.tokens.add(action)
            if sink is not None:
                sink.record_call(call)
            self._check_version(action)
            t0 = time.perf_counter()
            timestep = self.timestep = await self.drive.step(action)
            self.latencies.append(time.perf_counter() - t0)
        return timestep

    async def _ask(self, policy: Any, timestep: Any, requested_at: float) -> tuple[Any, float, PolicyCall]:
        """The policy's answer to ``timestep`` (bounded by ``timeout_s``), how long the policy took
        (a preempted call's wait for resume() left out), and the call as recorded (``PolicyCall``:
        the version serving when asked is the policy's own report, else the trainer's current one);
        first, the staleness bound (the trainer may have moved on while the episode waited)."""
        if self.staleness is not None:
            self.staleness.check(self.oldest_version)
        requested_version = version_of(policy)
        if requested_version is None and self.staleness is not None:
            requested_version = self.staleness.current()
        asked_at = time.time()
        t0 = time.perf_counter()
        try:
            with tracing.span("policy", cat="policy", step=len(self.policy_latencies)):
                action = await answer(policy, timestep.observation, self.timeout_s, self.gate)
        except AresTimeoutError:
            raise  # the policy's own timeout (an LLM call's), with its own reason
        except TimeoutError as exc:
            raise PolicyTimeoutError(
                f"the policy did not answer within {self.timeout_s:g}s (policy_timeout_s)"
            ) from exc
        gate_call = None if self.gate is None else self.gate.current_call()
        latency = time.perf_counter() - t0 - (0.0 if gate_call is None else gate_call.parked_s)
        return action, latency, PolicyCall(requested_at, asked_at, time.time(), requested_version)

    def _check_version(self, action: Any) -> None:
        """Keep the oldest version the episode received; past the staleness bound, end it."""
        version = oldest_version(action) if isinstance(action, LLMResponse) else None
        if version is not None and (self.oldest_version is None or version < self.oldest_version):
            self.oldest_version = version
        if self.staleness is not None:
            self.staleness.check(self.oldest_version)

    async def fail(self, error: BaseException) -> None:
        self.error = error
        await asyncio.shield(self.drive.abort(error))  # the episode ends errored; the env stays open

    def result(self, *, index: int, task: Any, group: int | None) -> EpisodeResult:
        env, error, timestep = self.env, self.error, self.timestep
        episode = env.episode
        record = {} if episode is None else episode.to_dict()
        status = EpisodeStatus.RUNNING if episode is None else EpisodeStatus(episode.status)
        error_dict = record.get("error")
        if error is not None:
            status = EpisodeStatus.ERRORED
            if not error_dict:
                info = ErrorInfo.from_exception(error)
                error_dict = {"type": info.type, "message": info.message, "traceback": info.traceback}
                record["error"] = error_dict
        if status is EpisodeStatus.RUNNING:  # an environment without an episode record of its own
            ended = timestep is not None and timestep.last()
            status = EpisodeStatus.FINISHED if ended else EpisodeStatus.ERRORED
        reward = None if status is EpisodeStatus.ERRORED or episode is None else episode.reward
        if reward is None and status is not EpisodeStatus.ERRORED and timestep is not None:
            reward = timestep.reward
        return EpisodeResult(
            index=index,
            task_id=_task_id(env, task),
            status=status,
            reward=reward,
            steps=len(self.latencies) if episode is None else episode.steps,
            duration_s=time.perf_counter() - self.started,
            step_latencies_s=tuple(self.latencies),
            record=record,
            group=group,
            error=error_dict if status is EpisodeStatus.ERRORED else None,
            exit_reason=None if episode is None else episode.exit_reason,
            policy_latencies_s=tuple(self.policy_latencies),
            prompt_tokens=self.tokens.prompt,
            completion_tokens=self.tokens.completion,
            cost_usd=self.tokens.cost,
            outcome=None if episode is None else episode.outcome,
            blame=_blame(episode, status, error),
        )


def _blame(episode: Any, status: EpisodeStatus, error: BaseException | None) -> Blame | None:
    """The episode's own blame; for an error the runner saw (the policy's), or an environment
    without an episode record, the rules of ``ares.envs.blame`` applied here."""
    blame: Blame | None = getattr(episode, "blame", None)
    if blame is not None:
        return blame
    if status is EpisodeStatus.ERRORED:
        return error_blame(error)
    return blame_for(status, error, None)


def _policy(policy_factory: PolicyFactory, env: EpisodicEnvironment[Any, Any]) -> Any:
    return policy_factory(env.task, env.action_format)  # type: ignore[arg-type]


async def _close_policy(policy: Any) -> None:
    """Release what an episode's policy holds elsewhere (e.g. its session on a shared policy server)."""
    if isinstance(policy, AsyncClosable):
        with contextlib.suppress(Exception):
            await policy.aclose()


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
    prefix = _Play(env, driver, policy_timeout_s, staleness, gate)
    prefix_policy = None

    def prefix_done() -> bool:
        episode = env.episode
        return episode is not None and episode.steps >= branch_at

    try:
        timestep = await driver.reset(seed=seed, task=task)
        prefix_policy = _policy(policy_factory, env)
        with _attached(gate, env):
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
        await _close_policy(prefix_policy)
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
    prefix: _Play,
    *,
    index: int,
    branch: int,
    task: Any,
    group: int,
) -> EpisodeResult:
    """Play a fork from the step it was forked at to its end, with a fresh policy and the prefix's
    timeout, gate and staleness bound; then close it."""
    with tracing.span("episode", cat="episode", track=f"episode {index}", index=index, branch=branch) as span:
        play = _Play(env, env, prefix.timeout_s, prefix.staleness, prefix.gate)

        async def here() -> Any:  # a branch starts where the fork left it
            return transition(env.observation)

        with _attached(prefix.gate, env.unwrapped):
            await play.play(here, policy_factory)
        result = play.result(index=index, task=task, group=group)
        span.set("status", str(result.status))
        span.set("reward", result.reward)
    await env.close()
    return result


def _task_id(env: EpisodicEnvironment[Any, Any], task: Any) -> str:
    """The episode's task id: the environment's current task, else the one ``task`` indexes, else
    ``task`` itself (a plain environment's selector)."""
    if env.task is not None:
        return str(env.task.id)
    tasks = env.tasks
    if isinstance(task, int) and 0 <= task < len(tasks):
        return str(tasks[task].id)
    return str(task)


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
    trainer updates weights, ``gate.resume()`` goes on (``ares.rollout.pause``).
    """
    if refills < 0:
        raise ValueError(f"refills must be >= 0, got {refills}")
    if (refills or before_episode is not None) and branch_at is not None:
        raise ValueError("refills and streaming apply to independent episodes, not to shared-prefix groups")
    plan = _Plan(
        make_env, policy_factory, episodes=episodes, concurrency=concurrency, seed=seed,
        keep=_keeper(on_result, keep_records), collector=collector, trace=trace, skip=frozenset(skip),
        group_size=group_size, policy_timeout_s=policy_timeout_s, num_tasks=num_tasks, refills=refills,
        before_episode=before_episode, staleness=staleness, gate=gate,
    )  # fmt: skip
    if branch_at is not None:
        return await _run_branched(plan, branch_at)
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    return await _run_flat(plan)


@dataclass(frozen=True, slots=True)
class _Plan:
    """One ``run_episodes`` call's arguments, as the flat and the branched runs read them."""

    make_env: Callable[[], Environment[Any, Any]]
    policy_factory: PolicyFactory
    episodes: int
    concurrency: int
    seed: int
    keep: Callable[[EpisodeResult], EpisodeResult]
    collector: TrajectoryCollector | None
    trace: TraceLevel
    skip: frozenset[int]
    group_size: int
    policy_timeout_s: float | None
    num_tasks: int | None
    refills: int = 0
    before_episode: Callable[[int], Awaitable[None]] | None = None
    staleness: Staleness | None = None
    gate: PolicyGate | None = None


async def _run_flat(plan: _Plan) -> list[EpisodeResult]:
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
                        env, plan.policy_factory, index=index, task=group % count, seed=plan.seed + index,
                        driver=driver, group=None if k == 1 else group,
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


async def _run_branched(plan: _Plan, branch_at: int) -> list[EpisodeResult]:
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
                    first_index=group * k, task=group % count, seed=plan.seed + group * k,
                    collector=plan.collector, trace=plan.trace, policy_timeout_s=plan.policy_timeout_s,
                    staleness=plan.staleness, gate=plan.gate,
                )  # fmt: skip
        results.extend(plan.keep(result) for result in done)

    with tracing.span("run", cat="run", track="runner", episodes=plan.episodes, branch_at=branch_at):
        async with asyncio.TaskGroup() as tasks:
            for group in groups:
                tasks.create_task(one(group))
    return sorted(results, key=lambda r: r.index)
