"""CodeEnvironment: task + sandbox + code agent, stepped by the policy one LLM call at a time.

``reset()`` starts a sandbox for a (seeded) task, starts the agent as an asyncio task and returns
its first LLM request. ``step(response)`` hands the response to the waiting agent and returns its
next request, or the verifier's reward once the agent is done. Sandbox lifecycle lives in
``ares.sandbox``, reward computation in ``ares.tasks.verifier``; this module owns the episode, and
leans on its neighbours for the task draw (``task_sampler.py``), the agent's run (``agent_run.py``),
the verdict's record (``verification.py``), what snapshots and forks need (``forking.py``) and what
a release during a long pause needs (``releasing.py``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
from collections.abc import Sequence
from types import TracebackType
from typing import Self, cast

from ares import tracing
from ares.agents.base import ActionFormat, AgentFactory
from ares.core.closing import AsyncClosable
from ares.core.status import EpisodeStatus
from ares.core.timestep import TimeStep, restart, termination, transition, truncation
from ares.curriculum import PassRateStore, Sampler
from ares.envs.agent_clock import AgentClock, TimeLimitClock
from ares.envs.agent_run import (
    agent_error,
    agent_report,
    agent_sandbox_spec,
    agent_turn,
    episode_error,
    load_agent_state,
    no_call_reason,
    policy_client,
    stop_agent,
)
from ares.envs.command_log import CommandLog, CommandRecord
from ares.envs.context_window import ContextWindow
from ares.envs.episode import Episode
from ares.envs.forking import check_reissued, restore_forks, restoring_factory, snapshot_source
from ares.envs.releasing import check_comes_back, note_release
from ares.envs.snapshots.model import EnvironmentSnapshot
from ares.envs.snapshots.restoring import carry_over, snapshot_sandbox
from ares.envs.task_sampler import TaskSampler
from ares.envs.task_sampler import TaskSelector as TaskSelector  # re-exported: moved there
from ares.envs.verification import BROKE_TESTS, record_verdict, tests_run_on_pristine, verify_traced
from ares.errors import AgentError, EnvironmentStateError, SnapshotError, TaskError, VerifierError
from ares.llm.interceptor import AgentFinished, InterceptedLLMClient
from ares.llm.tokens import TokenRenderer
from ares.llm.types import LLMRequest, LLMResponse
from ares.sandbox.base import IMAGE_WORKDIR, Sandbox, SandboxFactory, image_identity
from ares.sandbox.capabilities import Capability, SnapshottingSandbox, require
from ares.tasks.model import Task
from ares.tasks.verifier import Verdict
from ares.tracing import spans

#: How long a cancelled agent gets to unwind before its sandbox is stopped under it.
AGENT_STOP_GRACE_S = 5.0


class CodeEnvironment:
    """An async dm_env over code tasks. Observations are LLMRequests, actions LLMResponses."""

    # Slots: a run holds thousands of these, and an instance dict costs ~300 bytes each.
    __slots__ = (
        "_active",
        "_agent",
        "_agent_factory",
        "_agent_obj",
        "_boundary_waiters",
        "_client",
        "_clock",
        "_closed",
        "_closing",
        "_commands",
        "_observation",
        "_released",
        "_sampler",
        "_sandbox",
        "_sandbox_factory",
        "_stepping",
        "_time_limited",
        "context_window",
        "episode",
        "log_commands",
        "name",
        "step_limit",
        "task",
        "tasks",
        "token_renderer",
    )

    def __init__(
        self,
        tasks: Sequence[Task],
        *,
        agent_factory: AgentFactory,
        sandbox_factory: SandboxFactory,
        step_limit: int | None = 100,
        context_limit: int | ContextWindow | None = None,
        seed: int | None = None,
        name: str = "code",
        closing: Sequence[AsyncClosable] = (),
        time_limit_clock: TimeLimitClock = "agent",
        token_renderer: TokenRenderer | None = None,
        log_commands: bool = False,
        sampler: Sampler | None = None,
        pass_rates: PassRateStore | None = None,
    ) -> None:
        """``context_limit``: the policy's context window in prompt tokens (or a ``ContextWindow`` with
        a tokenizer's counter); a step whose prompt outgrows it ends the episode, truncated.
        ``closing``: resources made for this environment alone (a warm pool), closed by ``close()``.
        ``time_limit_clock``: whether a task's ``agent_timeout_s`` counts the policy's thinking time
        ("wall") or only the agent's and the sandbox's ("agent", the default: a slow inference server
        must not truncate episodes).
        ``token_renderer``: the policy model's chat template and tokenizer; the agent's requests then
        carry prompt ids that extend the previous prompt + completion token for token where the
        conversation allows (see ``ares.llm.tokens``).
        ``log_commands``: keep every command the agent runs for ``drain_commands()`` (rollout traces
        turn it on when they wrap the environment; off, an environment keeps nothing per command).
        ``sampler``/``pass_rates``: how ``reset()`` without a task draws one (``task_sampler.py``)."""
        self._clock = AgentClock(time_limit_clock, self._on_time_limit)
        if not tasks:
            raise TaskError("CodeEnvironment needs at least one task")
        if step_limit is not None and step_limit < 1:
            raise ValueError(f"step_limit must be >= 1 or None, got {step_limit}")
        self.tasks: tuple[Task, ...] = tuple(tasks)
        self.name = name
        self.step_limit = step_limit
        window = ContextWindow(context_limit) if isinstance(context_limit, int) else context_limit
        self.context_window: ContextWindow | None = window
        self._sampler = TaskSampler(self.tasks, seed, sampler, pass_rates)
        self._agent_factory = agent_factory
        self._sandbox_factory = sandbox_factory
        self._closing = tuple(closing)
        self.episode: Episode | None = None
        self.task: Task | None = None
        self._sandbox: Sandbox | None = None
        self._commands: list[CommandRecord] = []
        self.log_commands = log_commands
        self._client: InterceptedLLMClient | None = None
        self._agent: asyncio.Task[None] | None = None
        self.token_renderer = token_renderer
        self._observation: LLMRequest | None = None  # the one the policy is answering
        self._stepping = False
        self._boundary_waiters: list[asyncio.Future[None]] = []
        self._agent_obj: object | None = None
        self._released: EnvironmentSnapshot | None = None  # the sandbox, while a long pause freed it
        self._time_limited = False
        self._active = False
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def time_limit_clock(self) -> TimeLimitClock:
        """Whether a task's ``agent_timeout_s`` counts the policy's thinking time ("wall") or not."""
        return self._clock.kind

    def drain_commands(self) -> list[CommandRecord]:
        """The commands the agent ran since the last call (rollout traces read them once per step).
        Needs ``log_commands``; from the episode after it is turned on."""
        if not self.log_commands:
            raise EnvironmentStateError(
                "this environment does not log its agent's commands: pass log_commands=True (a"
                " TrajectoryCollectingEnvironment with traces turns it on)"
            )
        commands, self._commands[:] = list(self._commands), []
        return commands

    @property
    def sandbox(self) -> Sandbox | None:
        """The current episode's sandbox (None between episodes): for inspection and debugging."""
        return self._sandbox

    @property
    def action_format(self) -> ActionFormat:
        """How scripted policies (oracle, null) talk to this environment's agent."""
        return self._agent_factory.action_format

    # ------------------------------------------------------------------ API
    async def reset(
        self, *, seed: int | None = None, task: TaskSelector | None = None
    ) -> TimeStep[LLMRequest]:
        if self._closed:
            raise EnvironmentStateError("the environment is closed; create a new one")
        if self._active:
            await self._teardown(EpisodeStatus.ABANDONED)
        chosen = self._sampler.select(task, seed, self.name)
        episode = Episode(id=secrets.token_hex(8), task_id=chosen.id, seed=seed)
        self.episode, self.task = episode, chosen
        self._active, self._time_limited = True, False
        with (
            tracing.span("env.reset", cat="env", task=chosen.id, episode=episode.id, seed=seed)
            if spans.current_rank()
            else spans.NO_SPAN  # no span object, nor its attributes, while tracing is off
        ):
            try:
                request = await self._start(chosen)
                self._to_policy(request)
                return restart(request)
            except AgentFinished:
                error = agent_error(self._agent) or AgentError(no_call_reason(self._agent_obj))
                await self._teardown(EpisodeStatus.ERRORED, error)
                raise AgentError(
                    f"episode {episode.id} on task {chosen.id} failed at reset: {error}"
                ) from error
            except asyncio.CancelledError:
                await asyncio.shield(self._teardown(EpisodeStatus.CANCELLED))
                raise
            except BaseException as exc:
                await asyncio.shield(self._teardown(EpisodeStatus.ERRORED, exc))
                raise

    async def step(self, action: LLMResponse) -> TimeStep[LLMRequest]:
        if not self._active:
            raise EnvironmentStateError(
                "step() called before reset()" if self.episode is None
                else f"the episode has ended ({self.episode.status}); call reset() to start a new one"
            )  # fmt: skip
        if not isinstance(action, LLMResponse):
            raise TypeError(f"actions must be ares.LLMResponse, got {type(action).__name__}")
        if self._released is not None:
            raise EnvironmentStateError("the episode's sandbox is released (a long pause): reacquire() first")
        episode, client, agent = self.episode, self._client, self._agent
        assert episode is not None and client is not None and agent is not None
        # The hot path: one coroutine per step, and while tracing is off no span object nor even a
        # ``with`` (its enter and exit calls cost a tenth of a step); on, the span is closed below.
        level = spans.current_rank()
        span = tracing.span("env.step", cat="env", step=episode.steps + 1) if level else None
        if span is not None:
            span.__enter__()
        self._stepping = True
        try:
            # The policy answered: count its time, tokens and cost (never on the agent's clock).
            thought = self._clock.from_policy()
            if thought is not None:
                episode.policy_latency_s += thought
                if action.usage is not None or action.cost is not None:
                    episode.count_policy(0.0, action.usage, action.cost)
            episode.steps += 1
            try:
                if not agent.done():
                    client.respond(action)
                    traced = level >= spans.FULL
                    request = await (agent_turn(client) if traced else client.next_request())
                    if self.context_window is not None and self.context_window.overflows(request):
                        return await self._finish("context_limit")
                    if self.step_limit is None or episode.steps < self.step_limit:
                        self._observation = request  # as _to_policy, inlined
                        self._clock.to_policy()
                        return transition(request)
                    return await self._finish("step_limit")
            except AgentFinished:
                pass
            except asyncio.CancelledError:
                await asyncio.shield(self._teardown(EpisodeStatus.CANCELLED))
                raise
            return await self._finish(None)
        except BaseException as exc:
            if span is not None:  # the span ends errored, as a ``with`` would end it
                span, closing = None, span
                closing.__exit__(type(exc), exc, exc.__traceback__)
            raise
        finally:
            if span is not None:
                span.__exit__(None, None, None)
            self._stepping = False
            if self._boundary_waiters:
                waiters, self._boundary_waiters = self._boundary_waiters, []
                for waiter in waiters:
                    if not waiter.done():
                        waiter.set_result(None)

    async def abort(self, error: BaseException | None = None) -> None:
        """End the active episode now: ``errored`` with ``error`` (the policy failed or timed out),
        or ``aborted`` without one. The environment stays open for the next ``reset()``."""
        if self._active:
            if error is None:
                await self._teardown(EpisodeStatus.ABORTED)
            else:
                await self._teardown(EpisodeStatus.ERRORED, error, reason="policy_error")

    # ------------------------------------------------------------------ snapshots
    async def snapshot(self) -> EnvironmentSnapshot:
        """Freeze the active episode at its current step (FIRST or MID), waiting for a step in
        progress to return: the sandbox's files as a diff, the agent's state, the pending
        observation. The episode goes on; processes the agent left running in the background are
        not kept (see docs/snapshots.md)."""
        while self._stepping:  # a step in progress: wait for its boundary
            waiter = asyncio.get_running_loop().create_future()
            self._boundary_waiters.append(waiter)
            await waiter
        if self._released is not None:
            raise SnapshotError("the episode's sandbox is released (a long pause): reacquire() first")
        episode, task, sandbox, agent = snapshot_source(
            self._active, self.episode, self.task, self._sandbox, self._agent_obj
        )
        assert self._observation is not None
        agent_state = agent.state()
        filesystem = await require(sandbox, Capability.SNAPSHOT, SnapshottingSandbox).snapshot()
        factory = self._sandbox_factory
        return EnvironmentSnapshot(
            task=task, seed=episode.seed, step=episode.steps, episode_id=episode.id,
            observation=self._observation, agent_state=agent_state, filesystem=filesystem,
            rng_state=self._sampler.random().getstate(), episode=episode.to_dict(),
            agent_time_s=self._clock.agent_time_s,
            factory=restoring_factory(factory),
        )  # fmt: skip

    async def restore(self, snapshot: EnvironmentSnapshot) -> TimeStep[LLMRequest]:
        """Position this environment at ``snapshot``'s step (abandoning an active episode) and
        return that step's TimeStep: a new episode that records its parent and branch step."""
        if self._closed:
            raise EnvironmentStateError("the environment is closed; create a new one")
        if self._active:
            await self._teardown(EpisodeStatus.ABANDONED)
        task = self._sampler.by_id.get(snapshot.task.id, snapshot.task)
        episode = Episode(id=secrets.token_hex(8), task_id=task.id, seed=snapshot.seed)
        carry_over(episode, snapshot)
        self.episode, self.task = episode, task
        self._active, self._time_limited = True, False
        if snapshot.rng_state is not None:
            self._sampler.random().setstate(snapshot.rng_state)
        request = await self._resume(task, snapshot)
        self._to_policy(request)
        return restart(request) if snapshot.step == 0 else transition(request)

    async def fork(self, n: int) -> list[CodeEnvironment]:
        """``n`` independent environments continuing from this one's current step (this one goes on
        too), each on its own copy-on-write view of the files; see ``restore``."""
        if n < 1:
            raise ValueError(f"fork needs n >= 1, got {n}")
        snapshot = await self.snapshot()
        forks = [self._sibling() for _ in range(n)]
        await restore_forks(forks, snapshot)
        return forks

    # ------------------------------------------------------------------ long pauses
    async def release(self) -> None:
        """Free the sandbox of an episode waiting for the policy (a trainer's long pause): snapshot
        it, stop the agent and the sandbox. The episode stays at its step, its observation pending;
        ``reacquire()`` brings both back. SnapshotError, the sandbox kept, where the backend, its
        factory or the agent cannot snapshot; either way the episode's metadata notes it. As with
        ``snapshot()``, processes the agent left running in the background do not survive it."""
        if self._released is not None:
            return
        try:
            check_comes_back(self._sandbox_factory)
            snapshot = await self.snapshot()
        except SnapshotError as exc:
            note_release(self.episode, exc)
            raise
        self._released = snapshot  # from here on, a teardown discards it
        note_release(self.episode)
        self._clock.stop()  # the agent's time limit does not run while it is gone
        await self._free(report=False)

    async def reacquire(self) -> None:
        """Restore a released episode's sandbox and agent from its snapshot, at the same step: the
        agent re-issues the pending observation (SnapshotError, the episode errored, if it asks
        anything else). A no-op unless released."""
        snapshot = self._released
        if snapshot is None or not self._active:
            return
        assert self.task is not None
        request = await self._resume(self.task, snapshot)
        self._released = None
        await snapshot.discard()  # its files go with the restored sandbox
        self._to_policy(request)

    def _sibling(self) -> CodeEnvironment:
        """A new environment with this one's tasks, agent, sandbox backend and limits."""
        return CodeEnvironment(
            self.tasks, agent_factory=self._agent_factory, sandbox_factory=self._sandbox_factory,
            step_limit=self.step_limit, context_limit=self.context_window, name=self.name,
            time_limit_clock=self.time_limit_clock, token_renderer=self.token_renderer,
        )  # fmt: skip

    @property
    def observation(self) -> LLMRequest | None:
        """The observation the policy is answering now (None between episodes)."""
        return self._observation if self._active else None

    async def close(self) -> None:
        if self._active:
            await self._teardown(EpisodeStatus.ABORTED)
        self._closed = True
        closing, self._closing = self._closing, ()
        for resource in closing:
            await resource.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # ------------------------------------------------------------------ internals
    async def _start(self, task: Task, resume: EnvironmentSnapshot | None = None) -> LLMRequest:
        """Start the sandbox and the agent and return the agent's first request: of a fresh episode,
        or (``resume``) of one restored from a snapshot, whose sandbox holds the snapshot's files and
        whose agent re-issues the snapshot's pending request."""
        if resume is None:
            sandbox = self._sandbox_factory(agent_sandbox_spec(task, self._agent_factory))
        else:
            spec = agent_sandbox_spec(task, self._agent_factory)
            sandbox = await snapshot_sandbox(self._sandbox_factory, resume, task, spec)
        self._sandbox = sandbox
        await sandbox.start()
        if task.workdir == IMAGE_WORKDIR:  # the image's working dir, as the backend resolved it
            task = self.task = dataclasses.replace(task, workdir=sandbox.spec.workdir)
        identity = image_identity(sandbox)
        if self.episode is not None and identity is not None:
            self.episode.image = identity.to_dict()
        if task.workspace and resume is None:
            await sandbox.upload(task.workspace, task.workdir)
        client = InterceptedLLMClient()
        self._client = client
        llm = policy_client(client, self.token_renderer, resume)
        assert self.episode is not None
        self._commands = []
        log = self._commands if self.log_commands else None
        watched = CommandLog(sandbox, self.episode.limit_hits, log)
        # A span until the agent's first LLM request (no span object, nor its attributes, when off).
        with tracing.span("agent.start", cat="agent") if spans.current_rank() else spans.NO_SPAN as span:
            agent = self._agent_factory(sandbox=cast(Sandbox, watched), llm=llm, task=task)
            span.set("agent", type(agent).__name__)
            if resume is not None:
                load_agent_state(agent, resume)
            self._agent_obj = agent
            self._agent = asyncio.get_running_loop().create_task(agent.run(), name=f"ares-agent-{task.id}")
            client.watch(self._agent)
            used = 0.0 if resume is None else resume.agent_time_s  # of the time limit, before the snapshot
            self._clock.start(task.agent_timeout_s, used_s=used)
            request = await client.next_request()
        window = self.context_window
        if window is not None and window.overflows(request):
            raise TaskError(
                f"task {task.id}'s first prompt is {window.count(request)} tokens, over the context limit"
                f" of {window.limit}: no step fits; raise context_limit"
            )
        return request

    async def _resume(self, task: Task, snapshot: EnvironmentSnapshot) -> LLMRequest:
        """Start ``snapshot``'s sandbox and agent and return the request the agent re-issued; a
        failure (or a different request) ends the episode."""
        try:
            request = await self._start(task, resume=snapshot)
            check_reissued(request, snapshot)
        except asyncio.CancelledError:
            await asyncio.shield(self._teardown(EpisodeStatus.CANCELLED))
            raise
        except BaseException as exc:
            await asyncio.shield(self._teardown(EpisodeStatus.ERRORED, exc))
            if isinstance(exc, AgentFinished):
                raise SnapshotError(f"the restored agent ended before re-issuing its request: {exc}") from exc
            raise
        return request

    def _to_policy(self, request: LLMRequest) -> None:
        """``request`` goes to the policy as the observation it answers; its thinking time starts."""
        self._observation = request
        self._clock.to_policy()

    def _on_time_limit(self) -> None:
        """The agent clock ran out: cut the agent off (the episode ends truncated)."""
        if self._agent is not None and not self._agent.done():
            self._time_limited = True
            self._agent.cancel("agent time limit reached")

    async def _finish(self, limit: str | None) -> TimeStep[LLMRequest]:
        """The agent is done (or cut off): verify, record, clean up, and return LAST."""
        episode, task, sandbox = self.episode, self.task, self._sandbox
        assert episode is not None and task is not None and sandbox is not None
        if limit is None and self._time_limited:
            limit = "time_limit"
        try:
            await stop_agent(self._agent, AGENT_STOP_GRACE_S)
            error = episode_error(self._agent, episode, limit)
            if error is not None:
                await self._teardown(EpisodeStatus.ERRORED, error)
                return termination(0.0)
            reason = limit or getattr(self._agent_obj, "exit_status", None) or "agent_finished"
            verdict = await verify_traced(task, sandbox)
        except asyncio.CancelledError:
            await asyncio.shield(self._teardown(EpisodeStatus.CANCELLED))
            raise
        except Exception as exc:  # any failure to verify ends the episode as data, not a crash
            return await self._failed_verification(exc, limit)
        episode.reward, episode.reward_terms, episode.truncation = verdict.reward, verdict.terms, limit
        record_verdict(episode, verdict)
        await self._teardown(EpisodeStatus.TRUNCATED if limit else EpisodeStatus.FINISHED, reason=reason)
        return truncation(verdict.reward) if limit else termination(verdict.reward)

    async def _failed_verification(self, exc: Exception, limit: str | None) -> TimeStep[LLMRequest]:
        """The tests gave no reward. If they give one on a pristine tree, the agent's changes broke
        them: its zero (term ``verifier_failed``, blame ``policy``), never an errored episode a
        trainer would mask. Otherwise the task is to blame and the episode errors."""
        episode, task = self.episode, self.task
        assert episode is not None and task is not None
        if isinstance(exc, VerifierError) and isinstance(exc.evidence, Verdict):
            record_verdict(episode, exc.evidence)
        try:
            broken_by_agent = isinstance(exc, VerifierError) and await tests_run_on_pristine(
                task, self._sandbox_factory
            )
        except asyncio.CancelledError:
            await asyncio.shield(self._teardown(EpisodeStatus.CANCELLED))
            raise
        if not broken_by_agent:
            await self._teardown(EpisodeStatus.ERRORED, exc)
            return termination(0.0)
        episode.reward, episode.reward_terms, episode.truncation = 0.0, {BROKE_TESTS: 1.0}, limit
        episode.outcome, episode.blame = False, "policy"
        episode.metadata["verifier_error"] = f"{type(exc).__name__}: {exc}"
        await self._teardown(EpisodeStatus.TRUNCATED if limit else EpisodeStatus.FINISHED, reason=BROKE_TESTS)
        return truncation(0.0) if limit else termination(0.0)

    async def _teardown(
        self, status: EpisodeStatus, error: BaseException | None = None, *, reason: str | None = None
    ) -> None:
        """End the active episode with ``status`` and release everything it holds."""
        if self.episode is not None:
            ending = self.episode.status is EpisodeStatus.RUNNING
            if status is EpisodeStatus.ERRORED and self.episode.reward is None:
                self.episode.reward = 0.0
            self.episode.end(status, error, reason)
            if ending:
                self._sampler.observe(self.episode)  # a curriculum's pass rates (make(pass_rates=...))
        self._active = False
        self._clock.stop()
        self._observation = None
        try:
            await self._free(report=True)
        finally:
            released, self._released = self._released, None
            if released is not None:  # a long pause's snapshot: nothing else would free it
                await asyncio.shield(released.discard())

    async def _free(self, *, report: bool) -> None:
        """Stop the agent and the sandbox (``report``: keep the agent's report with the episode)."""
        if self._client is not None:
            self._client.close()
            self._client = None
        try:
            await stop_agent(self._agent, AGENT_STOP_GRACE_S)
        finally:
            if report:
                agent_report(self.episode, self._agent_obj)
            self._agent, self._agent_obj = None, None
            sandbox, self._sandbox = self._sandbox, None
            if sandbox is not None:  # even when cancelled meanwhile: never leak a sandbox
                await asyncio.shield(sandbox.stop())
