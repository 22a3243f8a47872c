"""Rollouts: run many episodes concurrently and summarize them; step many environments ready-first."""

from ares.rollout.pool import (
    EnvPool,
    EnvState,
    PoolClosedError,
    PoolCloseError,
    PoolError,
    PoolResult,
    PoolStateError,
)
from ares.rollout.results import EpisodeResult, RunSummary
from ares.rollout.runner import run_episode, run_episodes

__all__ = [
    "EnvPool",
    "EnvState",
    "EpisodeResult",
    "PoolCloseError",
    "PoolClosedError",
    "PoolError",
    "PoolResult",
    "PoolStateError",
    "RunSummary",
    "run_episode",
    "run_episodes",
]
