"""TrajectoryCollectingEnvironment: records any Environment's episodes, whatever ends them.

End cases, each stored as the episode's status:
  LAST timestep              -> "finished" ("truncated" when the discount is 1.0, e.g. a step limit)
  reset() while active       -> "abandoned"
  close() / context exit     -> "aborted"
  step()/reset() raising     -> "errored", with the error
  task cancellation          -> "cancelled" (the CancelledError still propagates)
Every step is handed to the collector as it happens, so whatever was recorded survives these paths.

The record and the episode it embeds (``metadata["episode"]``) are taken after the environment has
ended the episode, so both say the same status, reward and error. A caller mistake (a wrong action
type, a step the environment refuses while its episode goes on) raises without touching the record.
``abort(error)`` ends the episode ``errored`` with the error in both (a policy that failed).

Rollout traces (``trace="basic"|"full"``) add to each step the prompt the policy answered (the
previous observation) and its response as OpenAI messages, what the answer cost (latency, tokens,
money when known), the reward as raw numbers, and the environment's state for that step when it
offers one (a CodeEnvironment's commands with exit codes and durations; outputs too at "full").
"""

from __future__ import annotations

import asyncio
import copy
import secrets
import time
import traceback
from collections.abc import Mapping
from typing import Any, Literal, Protocol, runtime_checkable

from ares.core.environment import Environment
from ares.core.episodic import EpisodeView
from ares.core.snapshotting import SnapshottingEnvironment
from ares.core.status import EpisodeStatus
from ares.core.timestep import StepType, TimeStep, restart, transition
from ares.core.wrapper import Wrapper
from ares.errors import EnvironmentStateError, SnapshotError
from ares.llm.types import LLMRequest, LLMResponse
from ares.records.collectors import NullCollector, TrajectoryCollector
from ares.records.model import EpisodeRecord, ErrorRecord, StepRecord, jsonable
from ares.records.policy_call import PolicyCall
from ares.records.rollout_trace import StepTrace

TraceLevel = Literal["off", "basic", "full"]


@runtime_checkable
class CommandSource(Protocol):
    """An environment that can log its agent's commands (a CodeEnvironment): traces turn the log on
    and take each step's."""

    log_commands: bool

    def drain_commands(self) -> list[Any]: ...


@runtime_checkable
class PolicyCallSink(Protocol):
    """Takes the policy call behind the action of the next ``step`` (the runner hands it over)."""

    def record_call(self, call: PolicyCall) -> None: ...


class TrajectoryCollectingEnvironment(Wrapper[Any, Any]):
    """Wraps ``env`` without changing its signatures; records through ``collector``."""

    def __init__(
        self,
        env: Environment[Any, Any],
        collector: TrajectoryCollector | None = None,
        *,
        trace: TraceLevel = "basic",
        env_info: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(env)
        if trace not in ("off", "basic", "full"):
            raise ValueError(f"trace must be 'off', 'basic' or 'full', not {trace!r}")
        self.collector: TrajectoryCollector = collector or NullCollector()
        self.trace_level: TraceLevel = trace
        self._env_info = dict(env_info or {})
        # Nothing to record and no traces: forward untouched, so "off" costs what a plain wrapper does.
        self._passthrough = isinstance(self.collector, NullCollector) and trace == "off"
        # Looked up once: the hot path only follows references.
        self._inner = self.unwrapped
        self._drain_commands = None
        if trace != "off" and isinstance(self._inner, CommandSource):
            self._inner.log_commands = True  # only traces read them: a bare environment keeps none
            self._drain_commands = self._inner.drain_commands
        self._episode_id: str | None = None
        self._index = 0
        self._total = 0.0
        self._any_reward = False
        self._previous: Any = None  # the observation the next action answers
        self._returned_at: float | None = None  # when it was handed out
        self._call: PolicyCall | None = None  # the policy call behind the next step's action
        #: Recorded with the next episode when set (by a runner, before reset()): its group of k
        #: rollouts of one task, and its episode number in the run (re-runs of it supersede it).
        self.group_id: str | None = None
        self.episode_index: int | None = None

    @property
    def episode_id(self) -> str | None:
        """The id of the episode being recorded (None between episodes)."""
        return self._episode_id

    def record_call(self, call: PolicyCall) -> None:
        """Record ``call`` with the next step (``PolicyCallSink``): the runner's view of the answer."""
        self._call = call

    # ------------------------------------------------------------------ protocol
    async def reset(self, *, seed: int | None = None, task: Any | None = None) -> TimeStep[Any]:
        if self._passthrough:
            return await self._seam.reset(seed=seed, task=task)
        # The environment abandons an active episode itself; the record follows once it has.
        abandoned = self._seam.episode if self._episode_id is not None else None
        started = time.time()
        try:
            ts = await self._seam.reset(seed=seed, task=task)
        except asyncio.CancelledError:
            self._end("abandoned", episode=abandoned)
            self._begin(seed, started)
            self._end("cancelled")
            raise
        except Exception as exc:
            self._end("abandoned", episode=abandoned)
            self._begin(seed, started)
            self._end("errored", exc)
            raise
        self._end("abandoned", episode=abandoned)
        self._begin(seed, started)
        self._record(ts, None, started)
        return ts

    async def step(self, action: Any) -> TimeStep[Any]:
        if self._passthrough:
            return await self._seam.step(action)
        started = time.time()
        try:
            ts = await self._seam.step(action)
        except asyncio.CancelledError:
            self._record_failed(action, started)
            self._end("cancelled")
            raise
        except Exception as exc:
            if self._caller_mistake(exc):
                raise  # the environment refused the call and carries on: nothing happened
            self._record_failed(action, started)
            self._end("errored", exc)
            raise
        self._record(ts, action, started)
        if ts.step_type is StepType.LAST and self._episode_id is not None:
            # The environment's own verdict (e.g. a CodeEnvironment's "errored" after an agent crash)
            # wins; otherwise the discount tells a cut (1.0) from a natural end.
            episode = self._seam.episode
            inner_status = "" if episode is None else str(episode.status)
            natural = "truncated" if ts.discount == 1.0 else "finished"
            self._end(inner_status if inner_status not in ("", "running") else natural)
        return ts

    async def abort(self, error: BaseException | None = None) -> None:
        """End the active episode: ``errored`` with ``error`` (e.g. the policy raised or timed out),
        or ``aborted``; the environment stays open. Forwarded to the environment first (a
        CodeEnvironment ends its episode the same way; a plain one has nothing to end early)."""
        await self._seam.abort(error)
        if self._episode_id is not None:
            self._end("aborted" if error is None else "errored", error)

    async def restore(self, snapshot: Any) -> TimeStep[Any]:
        """Restore the environment at a snapshot's step (see ``CodeEnvironment.restore``): a new
        record begins with that step's observation and names the episode it branched from."""
        env = self._snapshotting()
        abandoned = self._seam.episode if self._episode_id is not None else None
        started = time.time()
        ts = await env.restore(snapshot)
        self._end("abandoned", episode=abandoned)
        self._begin(getattr(snapshot, "seed", None), started)
        self._record(ts, None, started)
        return ts

    async def fork(self, n: int) -> list[TrajectoryCollectingEnvironment]:
        """``n`` environments continuing from the current step (see ``CodeEnvironment.fork``), each
        recorded by this collector as a branch of the current episode."""
        env = self._snapshotting()
        started = time.time()
        forks = await env.fork(n)
        wrapped = []
        for fork in forks:
            branch = TrajectoryCollectingEnvironment(
                fork, self.collector, trace=self.trace_level, env_info=self._env_info
            )
            branch.group_id = self.group_id
            episode = fork.episode
            branch._begin(None if episode is None else episode.seed, started)
            first = episode is None or episode.steps == 0
            branch._record(
                restart(fork.observation) if first else transition(fork.observation), None, started
            )
            wrapped.append(branch)
        return wrapped

    def _snapshotting(self) -> SnapshottingEnvironment:
        if not isinstance(self.env, SnapshottingEnvironment):
            raise SnapshotError(f"{type(self._inner).__name__} cannot snapshot, restore or fork")
        return self.env

    def _caller_mistake(self, exc: Exception) -> bool:
        """A refused call that did not end the episode: a wrong action type, or a step the
        environment rejects (before reset, after LAST) while its episode (if any) goes on."""
        if not isinstance(exc, TypeError | EnvironmentStateError):
            return False
        episode = self._seam.episode
        return episode is None or episode.status is EpisodeStatus.RUNNING

    async def close(self) -> None:
        try:
            await self._seam.close()
        finally:
            if self._episode_id is not None:  # after the environment ended it: both say aborted
                self._end("aborted")
            # Closing the environment makes its records durable (the collector may be shared, so it
            # is flushed, not closed); in a thread, because a flush waits on disk writes.
            await asyncio.to_thread(self.collector.flush)

    # ------------------------------------------------------------------ recording
    def _begin(self, seed: int | None, started: float) -> None:
        inner, episode, task = self._inner, self._seam.episode, self._seam.task
        self._episode_id = (None if episode is None else episode.id) or secrets.token_hex(8)
        self._index, self._total, self._any_reward = 0, 0.0, False
        self._previous, self._returned_at = None, None
        env_info = {"class": type(inner).__name__, "name": getattr(inner, "name", None), **self._env_info}
        metadata: dict[str, Any] = {"trace": self.trace_level}
        if self.group_id is not None:
            metadata["group_id"] = self.group_id
        if self.episode_index is not None:
            metadata["episode_index"] = self.episode_index
        if episode is not None and episode.parent_episode_id is not None:  # a branch of a snapshot
            metadata["parent_episode_id"] = episode.parent_episode_id
            metadata["branch_step"] = episode.branch_step
        record = EpisodeRecord(
            episode_id=self._episode_id,
            task_id=getattr(task, "id", None),
            seed=seed if episode is None else episode.seed,
            env=env_info,
            started_at=started,
            metadata=metadata,
        )
        self.collector.begin_episode(record)

    def _record(self, ts: TimeStep[Any], action: Any, started: float) -> None:
        # The hot path: only references and numbers; rendering and encoding happen in the collector.
        if self._episode_id is None:
            return
        reward = ts.reward
        if reward is not None:
            self._total += reward
            self._any_reward = True
        observation = _snapshot(ts.observation)
        trace = None
        if self.trace_level != "off":
            trace = self._trace(
                self._previous if action is not None else None, action, reward, ts.discount, started
            )
        kind, discount, ended = ts.step_type.name, ts.discount, time.time()
        call, self._call = (self._call if action is not None else None), None
        step = StepRecord(
            self._index, kind, observation, action, reward, discount, started, ended, trace, call
        )
        self._index += 1
        self._previous, self._returned_at = observation, ended
        self.collector.record_step(self._episode_id, step)

    def _record_failed(self, action: Any, started: float) -> None:
        """The step that raised: its action and trace are kept, with no observation."""
        if self._episode_id is None:
            return
        trace = (
            None if self.trace_level == "off" else self._trace(self._previous, action, None, None, started)
        )
        call, self._call = self._call, None
        step = StepRecord(self._index, "LAST", None, action, None, None, started, time.time(), trace, call)
        self._index += 1
        self.collector.record_step(self._episode_id, step)

    def _trace(
        self, prompt: Any, action: Any, reward: float | None, discount: float | None, started: float
    ) -> Any:
        # Reward terms come with a reward (the verifier's breakdown); other steps have none.
        episode = None if reward is None else self._seam.episode
        terms = None if episode is None else episode.reward_terms
        commands = None if self._drain_commands is None else self._drain_commands()
        extra = None
        if action is not None:
            latency = None if self._returned_at is None else max(0.0, started - self._returned_at)
            extra = {"policy": _policy_cost(action, latency)}
        return StepTrace(
            self.trace_level, prompt, action, reward, discount, terms, commands, extra,
            previous_observation=prompt is not None,
        )  # fmt: skip

    def _end(self, status: str, error: BaseException | None = None, *, episode: Any = None) -> None:
        episode_id, self._episode_id = self._episode_id, None
        if episode_id is None:
            return
        env_episode: EpisodeView | None = episode if episode is not None else self._seam.episode
        summary = None if env_episode is None else env_episode.to_dict()
        error_record = None
        if error is not None:
            tb = "".join(traceback.format_exception(type(error), error, error.__traceback__))
            error_record = ErrorRecord(type(error).__name__, str(error), tb)
        elif summary is not None and summary.get("error"):
            error_record = ErrorRecord(**summary["error"])
        self.collector.end_episode(
            episode_id,
            status=status,
            ended_at=time.time(),
            total_reward=self._total if self._any_reward else None,
            error=error_record,
            truncation=None if env_episode is None else env_episode.truncation,
            metadata={"episode": jsonable(summary)} if summary is not None else {},
        )


_IMMUTABLE = (LLMRequest, LLMResponse, str, int, float, bool, bytes, type(None))


def _policy_cost(action: Any, latency_s: float | None) -> dict[str, Any]:
    """What one policy answer cost: time to answer (as the environment saw it), tokens, money."""
    usage = action.usage if isinstance(action, LLMResponse) else None
    return {
        "latency_s": latency_s,
        "prompt_tokens": None if usage is None else usage.prompt_tokens,
        "completion_tokens": None if usage is None else usage.completion_tokens,
        "cost_usd": action.cost if isinstance(action, LLMResponse) else None,
    }


def _snapshot(observation: Any) -> Any:
    """The observation as of now: immutable ones by reference, others copied (writers run later)."""
    if isinstance(observation, _IMMUTABLE):
        return observation
    return copy.deepcopy(observation)
