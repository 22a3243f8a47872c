"""The RL API: TimeStep, StepType, EpisodeStatus and the async Environment protocol."""

from ares.core.environment import Environment, Wrapper
from ares.core.status import EpisodeStatus
from ares.core.timestep import StepType, TimeStep, restart, termination, transition, truncation

__all__ = [
    "Environment",
    "EpisodeStatus",
    "StepType",
    "TimeStep",
    "Wrapper",
    "restart",
    "termination",
    "transition",
    "truncation",
]
