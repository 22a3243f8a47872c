"""One episode played by a policy: its policy calls (through a trainer's gate, under its staleness
bound), its timings and tokens, and the one result that agrees with its records.

``run_episode`` plays one to its end; ``EpisodePlay`` is the state the flat runner
(``ares.rollout.runner``) and shared-prefix groups (``ares.rollout.branched``) both drive.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ares import tracing
from ares.core.closing import AsyncClosable
from ares.core.environment import Environment
from ares.core.episodic import EpisodicEnvironment, episodic
from ares.core.status import EpisodeStatus
from ares.envs.blame import Blame, blame_for, error_blame
from ares.envs.episode import ErrorInfo
from ares.errors import AresTimeoutError, PolicyTimeoutError
from ares.llm.token_versions import oldest_version
from ares.llm.types import LLMResponse
from ares.policies.base import PolicyFactory
from ares.policies.versions import version_of
from ares.records.collecting import PolicyCallSink
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
        play = EpisodePlay(
            seam, seam if driver is None else episodic(driver), policy_timeout_s, staleness, gate
        )
        with attached(gate, env):
            await play.play(lambda: play.drive.reset(seed=seed, task=task), policy_factory)
        result = play.result(index=index, task=task, group=group)
        span.set("status", str(result.status))
        span.set("reward", result.reward)
    return result


def attached(gate: PolicyGate | None, env: Any) -> contextlib.AbstractContextManager[None]:
    """``env`` as what a long pause of ``gate`` may release while its episode waits there."""
    return contextlib.nullcontext() if gate is None else gate.attach(env)


class EpisodePlay:
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
            policy = policy_for(policy_factory, self.env)
            await self.until(timestep, policy)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            await self.fail(exc)
        finally:
            await close_policy(policy)

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
            task_id=task_id_of(env, task),
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
            blame=blame_of(episode, status, error),
            policy_version=self.oldest_version,
        )


def blame_of(episode: Any, status: EpisodeStatus, error: BaseException | None) -> Blame | None:
    """The episode's own blame; for an error the runner saw (the policy's), or an environment
    without an episode record, the rules of ``ares.envs.blame`` applied here."""
    blame: Blame | None = getattr(episode, "blame", None)
    if blame is not None:
        return blame
    if status is EpisodeStatus.ERRORED:
        return error_blame(error)
    return blame_for(status, error, None)


def policy_for(policy_factory: PolicyFactory, env: EpisodicEnvironment[Any, Any]) -> Any:
    return policy_factory(env.task, env.action_format)  # type: ignore[arg-type]


async def close_policy(policy: Any) -> None:
    """Release what an episode's policy holds elsewhere (e.g. its session on a shared policy server)."""
    if isinstance(policy, AsyncClosable):
        with contextlib.suppress(Exception):
            await policy.aclose()


def task_id_of(env: EpisodicEnvironment[Any, Any], task: Any) -> str:
    """The episode's task id: the environment's current task, else the one ``task`` indexes, else
    ``task`` itself (a plain environment's selector)."""
    if env.task is not None:
        return str(env.task.id)
    tasks = env.tasks
    if isinstance(task, int) and 0 <= task < len(tasks):
        return str(tasks[task].id)
    return str(task)
