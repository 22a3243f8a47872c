"""Curriculum: per-task pass rates over recent policy versions, and seeded task samplers built on them.

A trainer records each verified outcome into a ``PassRateStore`` (saved beside the run, seeded from
earlier runs and validation reports) and asks a ``Sampler`` which task each rollout plays, so that
rollouts go where the policy can still learn: a GRPO group that all passes or all fails has zero
advantage.
"""

from __future__ import annotations

from ares.curriculum.pass_rates import PassRateStore, PassRateStoreError, TaskPassRate
from ares.curriculum.samplers import (
    SAMPLERS,
    FromCallable,
    Informative,
    InOrder,
    NothingToSampleError,
    Pools,
    Sampler,
    SkipSolved,
    Uniform,
    parse_sampler,
)
from ares.curriculum.seeding import seed_from_run, seed_from_validation

__all__ = [
    "SAMPLERS",
    "FromCallable",
    "InOrder",
    "Informative",
    "NothingToSampleError",
    "PassRateStore",
    "PassRateStoreError",
    "Pools",
    "Sampler",
    "SkipSolved",
    "TaskPassRate",
    "Uniform",
    "parse_sampler",
    "seed_from_run",
    "seed_from_validation",
]
