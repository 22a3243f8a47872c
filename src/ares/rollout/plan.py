"""One ``run_episodes`` call's arguments, as the flat runner and shared-prefix groups read them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ares.core.environment import Environment
from ares.policies.base import PolicyFactory
from ares.records.collecting import TraceLevel
from ares.records.collectors import TrajectoryCollector
from ares.rollout.pause import PolicyGate
from ares.rollout.results import EpisodeResult
from ares.rollout.staleness import Staleness


@dataclass(frozen=True, slots=True)
class RunPlan:
    """One ``run_episodes`` call's arguments (``keep``: what becomes of each finished result)."""

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
