"""The RL API: TimeStep, StepType, EpisodeStatus, the async Environment protocol and its seams."""

from ares.core.closing import AsyncClosable
from ares.core.environment import Environment
from ares.core.episodic import EpisodeView, EpisodicEnvironment, PlainEnvironment, TaskView, episodic
from ares.core.snapshotting import SnapshottingEnvironment
from ares.core.status import EpisodeStatus
from ares.core.timestep import StepType, TimeStep, restart, termination, transition, truncation
from ares.core.wrapper import Wrapper

__all__ = [
    "AsyncClosable",
    "Environment",
    "EpisodeStatus",
    "EpisodeView",
    "EpisodicEnvironment",
    "PlainEnvironment",
    "SnapshottingEnvironment",
    "StepType",
    "TaskView",
    "TimeStep",
    "Wrapper",
    "episodic",
    "restart",
    "termination",
    "transition",
    "truncation",
]
