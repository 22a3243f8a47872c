"""Rollouts: a runs spec (``RunSpec``), many episodes run concurrently and summarized; many
environments stepped ready-first."""

from ares.rollout.curriculum import Curriculum
from ares.rollout.dynamic import Batch, GroupFilter, informative_batch
from ares.rollout.env_pool import (
    EnvPool,
    EnvState,
    PoolClosedError,
    PoolCloseError,
    PoolError,
    PoolResult,
    PoolStateError,
)
from ares.rollout.pause import PolicyGate
from ares.rollout.results import EpisodeResult, RunSummary
from ares.rollout.runner import run_episode, run_episodes
from ares.rollout.spec import RaySettings, RunSpec
from ares.rollout.staleness import Staleness
from ares.rollout.stream import stream_groups

__all__ = [
    "Batch",
    "Curriculum",
    "EnvPool",
    "EnvState",
    "EpisodeResult",
    "GroupFilter",
    "PolicyGate",
    "PoolCloseError",
    "PoolClosedError",
    "PoolError",
    "PoolResult",
    "PoolStateError",
    "RaySettings",
    "RunSpec",
    "RunSummary",
    "Staleness",
    "informative_batch",
    "run_episode",
    "run_episodes",
    "stream_groups",
]
