"""``RunSpec``: one rollout run as the library sees it, loaded once and played anywhere.

A run is a preset's tasks, loaded and selected once (``RunSpec.load``), the limits every
environment gets, the sandbox backend, and how episodes are played (how many, in groups of how
many, how many at once, the seed, the policy's time per answer, the trace level, here or on Ray).
Every environment of the run, in this process or in a Ray actor, is built from the same task list,
so the dataset is parsed once whatever the concurrency. ``ares run`` only turns its flags into a
spec; a script builds one the same way:

    spec = RunSpec.load("humaneval", tasks="0:8", concurrency=4)
    results = await spec.play(make_policy("oracle"))
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ares.core.closing import Closable
from ares.core.environment import Environment
from ares.llm.tokens import TokenRenderer
from ares.policies.base import PolicyFactory
from ares.presets import load_tasks, make
from ares.records.collecting import TraceLevel
from ares.records.collectors import TrajectoryCollector
from ares.rollout.curriculum import Curriculum
from ares.rollout.dynamic import Batch, GroupFilter, informative_batch
from ares.rollout.pause import PolicyGate
from ares.rollout.results import EpisodeResult
from ares.rollout.runner import DEFAULT_POLICY_TIMEOUT_S, run_episodes
from ares.rollout.staleness import Staleness
from ares.rollout.stream import Runner, stream_groups
from ares.sandbox.backends import make_sandbox_factory
from ares.sandbox.base import SandboxFactory
from ares.tasks.model import Task, VerifierMode
from ares.tasks.selection import TaskSelection

#: The environment limits a spec passes to ``make`` (the preset's own options go to ``load``).
LIMITS = ("step_limit", "context_limit", "context_budget", "warm_pool")


@dataclass(frozen=True, slots=True)
class RaySettings:
    """Play on Ray actors: how many (None: one per CPU) and how often a lost unit is retried."""

    actors: int | None = None
    retries: int = 0


@dataclass(frozen=True, slots=True)
class RunSpec:
    """What to play and how; ``tasks`` is the run's one task list, shared by every environment."""

    preset: str
    tasks: tuple[Task, ...]
    #: ``make`` keywords for every environment: the limits (``LIMITS``) and, e.g., a token renderer.
    env_options: Mapping[str, Any] = field(default_factory=dict)
    #: The sandbox backend's name (``ares.sandbox.backends``): actors build their own factory from it.
    sandbox: str = "local"
    #: Episodes to play; None plays one group per task.
    episodes: int | None = None
    group_size: int = 1
    concurrency: int = 8
    seed: int = 0
    trace: TraceLevel = "basic"
    policy_timeout_s: float | None = DEFAULT_POLICY_TIMEOUT_S
    ray: RaySettings | None = None
    #: Play an episode the infrastructure failed (blame ``infra``) again, up to this many times.
    refills: int = 0
    #: How far behind the trainer an episode's tokens may be (``ares.rollout.staleness``).
    staleness: Staleness | None = None
    #: What every policy call passes: a trainer pauses it to update weights (``ares.rollout.pause``).
    gate: PolicyGate | None = None
    #: Which task each group plays, and the pass rates its episodes feed (``ares.rollout.curriculum``);
    #: None: group g plays task g % len(tasks).
    curriculum: Curriculum | None = None

    def __post_init__(self) -> None:
        if not self.tasks:
            raise ValueError("a run needs at least one task")
        if self.group_size < 1 or self.concurrency < 1:
            raise ValueError(
                f"group_size and concurrency must be >= 1, got {self.group_size}, {self.concurrency}"
            )
        if self.episodes is not None and self.episodes % self.group_size:
            raise ValueError(
                f"{self.episodes} episodes are not a multiple of the group size {self.group_size} "
                "(groups are whole)"
            )

    @classmethod
    def load(
        cls,
        preset: str,
        *,
        tasks: TaskSelection | None = None,
        shard: str | tuple[int, int] | None = None,
        verifier_mode: VerifierMode | None = None,
        preset_options: Mapping[str, Any] | None = None,
        limits: Mapping[str, Any] | None = None,
        **how: Any,
    ) -> RunSpec:
        """Load and select the preset's tasks (once) and build the spec. ``preset_options`` are the
        preset's own (``path``, ``dataset``...), ``limits`` the environments' (``LIMITS``); ``how``
        are the spec's other fields (``episodes``, ``concurrency``, ``seed``, ``sandbox``...)."""
        unknown = sorted(set(limits or {}) - set(LIMITS))
        if unknown:
            raise ValueError(f"unknown environment limit(s) {unknown}; limits: {', '.join(LIMITS)}")
        task_list = load_tasks(
            preset, tasks=tasks, shard=shard, verifier_mode=verifier_mode, **dict(preset_options or {})
        )
        return cls(preset, tuple(task_list), env_options=dict(limits or {}), **how)

    @property
    def total_episodes(self) -> int:
        """``episodes``, or one group per task."""
        return self.episodes if self.episodes is not None else len(self.tasks) * self.group_size

    def with_renderer(self, renderer: TokenRenderer | None) -> RunSpec:
        """The same run made token exact with ``renderer`` (a local policy's template and tokenizer)."""
        if renderer is None:
            return self
        return replace(self, env_options={**self.env_options, "token_renderer": renderer})

    def env_factory(
        self, sandbox_factory: SandboxFactory | None = None
    ) -> Callable[[], Environment[Any, Any]]:
        """What builds each environment of the run: on ``sandbox_factory`` here (default: a new factory
        of the backend ``sandbox`` names, the caller's to close), or a picklable ``PresetEnv`` with
        which each Ray actor builds its own."""
        options = {**self.env_options, "task_list": list(self.tasks)}
        if self.ray is not None:
            from ares.rollout.ray import PresetEnv  # Ray is an extra: imported only to play on it

            return PresetEnv(self.preset, self.sandbox, options)
        if sandbox_factory is None:
            sandbox_factory = make_sandbox_factory(self.sandbox)
        return functools.partial(make, self.preset, sandbox_factory=sandbox_factory, **options)

    async def play(
        self,
        policy_factory: PolicyFactory,
        *,
        sandbox_factory: SandboxFactory | None = None,
        on_result: Callable[[EpisodeResult], None] | None = None,
        collector: TrajectoryCollector | None = None,
        skip: Collection[int] = (),
        keep_records: bool = True,
        on_trace_events: Callable[[list[dict[str, Any]]], None] | None = None,
    ) -> list[EpisodeResult]:
        """Play the run (``run_episodes``, or ``run_episodes_ray`` with ``ray``); results in order."""
        shared: dict[str, Any] = {
            "episodes": self.total_episodes, "concurrency": self.concurrency, "seed": self.seed,
            "on_result": self._observed(on_result), "collector": collector, "trace": self.trace,
            "skip": skip, "group_size": self.group_size, "policy_timeout_s": self.policy_timeout_s,
            "num_tasks": len(self.tasks), "keep_records": keep_records, "refills": self.refills,
            "staleness": self.staleness, "gate": self.gate, "group_tasks": self.group_tasks(),
        }  # fmt: skip
        try:
            if self.ray is not None:
                runner = self._ray_runner(on_trace_events=on_trace_events)
                return await runner(self.env_factory(), policy_factory, **shared)
            owned = sandbox_factory is None  # made here for this run: closed here too
            factory = make_sandbox_factory(self.sandbox) if sandbox_factory is None else sandbox_factory
            try:
                return await run_episodes(self.env_factory(factory), policy_factory, **shared)
            finally:
                if owned and isinstance(factory, Closable):
                    await asyncio.to_thread(factory.close)  # a client's close may block
        finally:
            await self._save_curriculum()

    def group_tasks(self) -> list[int] | None:
        """Each group's task index as the curriculum draws them (None without one: round robin)."""
        if self.curriculum is None:
            return None
        groups = -(-self.total_episodes // self.group_size)
        return self.curriculum.draw([task.id for task in self.tasks], groups, self.seed)

    def _observed(
        self, on_result: Callable[[EpisodeResult], None] | None
    ) -> Callable[[EpisodeResult], None] | None:
        """``on_result``, after each result is counted in the curriculum's pass rates."""
        curriculum = self.curriculum
        if curriculum is None:
            return on_result

        def observe(result: EpisodeResult) -> None:
            curriculum.observe(result)
            if on_result is not None:
                on_result(result)

        return observe

    async def _save_curriculum(self) -> None:
        if self.curriculum is not None and self.curriculum.path is not None:
            await asyncio.shield(asyncio.to_thread(self.curriculum.save))

    def _ray_runner(self, **options: Any) -> Runner:
        """``run_episodes_ray`` with this spec's Ray settings (and ``options``)."""
        assert self.ray is not None
        from ares.rollout.ray import run_episodes_ray  # Ray is an extra: imported only to play on it

        return functools.partial(
            run_episodes_ray, actors=self.ray.actors, retries=self.ray.retries, **options
        )

    async def stream(
        self,
        policy_factory: PolicyFactory,
        *,
        buffer: int = 4,
        sandbox_factory: SandboxFactory | None = None,
        on_result: Callable[[EpisodeResult], None] | None = None,
        collector: TrajectoryCollector | None = None,
        keep_records: bool = True,
    ) -> AsyncIterator[list[EpisodeResult]]:
        """The run's groups as they finish, through a buffer of ``buffer`` groups with backpressure
        (``ares.rollout.stream``), here or on Ray."""
        owned = sandbox_factory is None and self.ray is None
        factory = make_sandbox_factory(self.sandbox) if owned else sandbox_factory
        runner = run_episodes if self.ray is None else self._ray_runner()
        try:
            groups = stream_groups(
                self.env_factory(factory), policy_factory, episodes=self.total_episodes,
                group_size=self.group_size, buffer=buffer, runner=runner, concurrency=self.concurrency,
                seed=self.seed, on_result=self._observed(on_result), collector=collector, trace=self.trace,
                policy_timeout_s=self.policy_timeout_s, num_tasks=len(self.tasks), keep_records=keep_records,
                refills=self.refills, staleness=self.staleness, gate=self.gate,
                group_tasks=self.group_tasks(),
            )  # fmt: skip
            async with contextlib.aclosing(groups):  # leaving early stops the run before the factory closes
                async for group in groups:
                    yield group
        finally:
            if owned and isinstance(factory, Closable):
                await asyncio.to_thread(factory.close)
            await self._save_curriculum()

    async def batch(
        self,
        policy_factory: PolicyFactory,
        groups: int,
        *,
        keep: GroupFilter | None = None,
        buffer: int = 4,
        sandbox_factory: SandboxFactory | None = None,
        on_result: Callable[[EpisodeResult], None] | None = None,
        collector: TrajectoryCollector | None = None,
    ) -> Batch:
        """Dynamic sampling (``ares.rollout.dynamic``): ``groups`` groups that carry signal, out of at
        most this spec's episodes (its cap); the groups whose outcomes all agree are dropped and
        counted. Once the batch is full the episodes still running are stopped."""
        stream = self.stream(
            policy_factory, buffer=buffer, sandbox_factory=sandbox_factory, on_result=on_result,
            collector=collector,
        )  # fmt: skip
        return await informative_batch(stream, groups, keep)
