"""``RayRunner`` and ``run_episodes_ray``: the local runner's call, played by Ray actors.

The driver numbers a run's episodes exactly as ``run_episodes`` does (episode ``i``: task
``(i // k) % num_tasks``, seed ``seed + i``), so both runners play the same episodes. Actors are
asyncio actors that each play up to ``concurrency`` episodes at once; results stream back as they
finish, and their record events are replayed into the driver's collector, once. An actor that dies
fails only the work it held (retried up to ``retries`` times, then ``errored``): a run always ends
with one result per episode. The local runner's asynchronous-RL options work the same here: the
driver refills episodes the infrastructure failed, awaits ``before_episode`` (``stream_groups``'s
backpressure) and pushes the gate's pauses and the trainer's version to the actors (``relay``).

``RayRunner`` keeps its actors between runs (a trainer calls ``run`` once per step, changing the
policy between calls); ``run_episodes_ray`` is one run on a fleet started for it.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from types import TracebackType
from typing import Any, Self

from ares import tracing
from ares.core.environment import Environment
from ares.policies.base import PolicyFactory
from ares.records.collecting import TraceLevel
from ares.records.collectors import TrajectoryCollector
from ares.rollout.pause import PolicyGate
from ares.rollout.plan import check_group_tasks
from ares.rollout.ray.delivery import Results
from ares.rollout.ray.dispatch import Replays, dispatch, plan
from ares.rollout.ray.fleet import Fleet, ray
from ares.rollout.ray.relay import Relay, initial_control
from ares.rollout.ray.work import RunConfig, tracing_level
from ares.rollout.results import EpisodeResult
from ares.rollout.runner import DEFAULT_POLICY_TIMEOUT_S
from ares.rollout.staleness import Staleness

#: How long a new actor may take to be placed and build its first environment.
DEFAULT_ACTOR_START_TIMEOUT_S = 300.0


class RayRunner:
    """A fleet of episode actors for ``make_env``, started once and used for many runs.

    ``actors`` defaults to the cluster's CPUs; each actor asks Ray for ``actor_options`` (default
    one CPU; e.g. ``{"resources": {"sandbox_host": 1}}`` to pin them, or a ``runtime_env``).
    ``max_actor_restarts`` (default: ``actors``) bounds how many dead actors are replaced over the
    runner's life. Connects to Ray first if needed (a local instance; ``ray.init(address=...)``
    beforehand for a cluster). ``make_env`` must be picklable (see ``PresetEnv``).
    """

    def __init__(
        self,
        make_env: Callable[[], Environment[Any, Any]],
        *,
        actors: int | None = None,
        actor_options: Mapping[str, Any] | None = None,
        max_actor_restarts: int | None = None,
        actor_start_timeout_s: float = DEFAULT_ACTOR_START_TIMEOUT_S,
    ) -> None:
        self._make_env = make_env
        self._actors = actors
        self._options = dict(actor_options or {"num_cpus": 1})
        self._max_restarts = max_actor_restarts
        self._start_timeout_s = actor_start_timeout_s
        self._fleet: Fleet | None = None

    async def start(self) -> None:
        """Start the actors (``run`` does it on first use); raises ``RayRunError`` if none can."""
        if self._fleet is not None:
            return
        if not ray.is_initialized():
            ray.init(log_to_driver=False)
        count = self._actors or max(1, int(ray.cluster_resources().get("CPU", 1)))
        fleet = Fleet(
            self._make_env, options=self._options, start_timeout_s=self._start_timeout_s,
            restarts=count if self._max_restarts is None else self._max_restarts,
            fleet_id=secrets.token_hex(6),
        )  # fmt: skip
        try:
            await fleet.start(count)
        except BaseException:
            await fleet.stop()
            raise
        self._fleet = fleet

    async def run(
        self,
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
        retries: int = 0,
        keep_records: bool = True,
        on_trace_events: Callable[[list[dict[str, Any]]], None] | None = None,
        refills: int = 0,
        before_episode: Callable[[int], Awaitable[None]] | None = None,
        staleness: Staleness | None = None,
        gate: PolicyGate | None = None,
        group_tasks: Sequence[int] | None = None,
    ) -> list[EpisodeResult]:
        """One run, with ``run_episodes``' arguments and results (in episode order).

        ``policy_factory`` goes to every actor once for this run (cloudpickle): a scripted policy,
        an OpenAI-compatible one (each actor opens its own connection pool), or ``shared_policy``.
        ``concurrency`` is per actor. ``retries``: how many times a unit lost with its actor is
        played again elsewhere (0: it ends ``errored`` at once). With span tracing on in this
        process, actors trace at the same level, flows link each dispatch to its episode and back,
        and at the end the actors' (and a shared policy server's) events go to ``on_trace_events``.

        ``refills``, ``before_episode``, ``staleness``, ``gate`` and ``group_tasks`` are
        ``run_episodes``': an
        episode blamed ``infra`` (its actor lost, once the ``retries`` are spent, included) is
        played again with the same index, task and seed; ``before_episode(index)`` is awaited here
        before an episode is first sent; ``staleness.current`` is read here and pushed to the
        actors, and ``gate.pause()`` returns once no actor has a policy call in flight (``relay``).
        """
        if group_size < 1:
            raise ValueError(f"group_size must be >= 1, got {group_size}")
        if branch_at is not None and branch_at < 0:
            raise ValueError(f"branch_at must be >= 0, got {branch_at}")
        if concurrency < 1 or retries < 0 or refills < 0:
            raise ValueError("concurrency must be >= 1, retries and refills >= 0")
        if (refills or before_episode is not None) and branch_at is not None:
            raise ValueError(
                "refills and streaming apply to independent episodes, not to shared-prefix groups"
            )
        await self.start()
        fleet = self._fleet
        assert fleet is not None and fleet.info is not None
        config = RunConfig(
            run_id=secrets.token_hex(6), policy_factory=policy_factory, record=collector is not None,
            trace=trace, branch_at=branch_at, policy_timeout_s=policy_timeout_s, tracing=tracing_level(),
            control=initial_control(gate, staleness),
        )  # fmt: skip
        results = Results(collector, on_result, keep_records)
        if group_tasks is not None:
            group_tasks = check_group_tasks(group_tasks, episodes, group_size)
        work = plan(
            episodes,
            skip,
            group_size,
            branch_at,
            num_tasks or fleet.info.num_tasks,
            seed,
            config.run_id,
            group_tasks,
        )
        slots = concurrency if branch_at is None else max(1, concurrency // group_size)
        with tracing.span("run", cat="run", track="driver", episodes=episodes, actors=len(fleet.live)):
            async with Relay(fleet, config, gate, staleness):  # begins and ends the run on the actors
                await dispatch(fleet, work, slots, results, Replays(retries, refills), before_episode)
        if on_trace_events is not None and config.tracing != "off":
            await fleet.collect_traces(on_trace_events, policy_factory)
        return sorted(results.results, key=lambda r: r.index)

    async def stats(self) -> list[dict[str, Any]]:
        """Each live actor's pid, RSS/peak (KiB), fds, threads, idle environments, and each run's
        gate and version there (``runs``: run id -> paused, in flight, version)."""
        return [] if self._fleet is None else await self._fleet.stats()

    async def close(self) -> None:
        fleet, self._fleet = self._fleet, None
        if fleet is not None:
            await fleet.stop()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


async def run_episodes_ray(
    make_env: Callable[[], Environment[Any, Any]],
    policy_factory: PolicyFactory,
    *,
    episodes: int,
    actors: int | None = None,
    actor_options: Mapping[str, Any] | None = None,
    max_actor_restarts: int | None = None,
    actor_start_timeout_s: float = DEFAULT_ACTOR_START_TIMEOUT_S,
    **run_options: Any,
) -> list[EpisodeResult]:
    """``run_episodes`` on Ray: one ``RayRunner.run`` on actors started for it and stopped after.

    Takes ``run_episodes``' arguments (``concurrency`` is then per actor) plus the runner's
    (``actors``, ``actor_options``, ...) and ``RayRunner.run``'s (``retries``, ``on_trace_events``).
    """
    async with RayRunner(
        make_env, actors=actors, actor_options=actor_options, max_actor_restarts=max_actor_restarts,
        actor_start_timeout_s=actor_start_timeout_s,
    ) as runner:  # fmt: skip
        return await runner.run(policy_factory, episodes=episodes, **run_options)
