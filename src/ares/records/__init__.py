"""Episode records: trajectory collection, rollout traces, loaders and exports."""

from ares.records.collecting import TraceLevel, TrajectoryCollectingEnvironment
from ares.records.collectors import (
    JsonDirCollector,
    JsonlCollector,
    MemoryCollector,
    NullCollector,
    TrajectoryCollector,
)
from ares.records.loader import load_episodes
from ares.records.model import EpisodeRecord, ErrorRecord, StepRecord

__all__ = [
    "EpisodeRecord",
    "ErrorRecord",
    "JsonDirCollector",
    "JsonlCollector",
    "MemoryCollector",
    "NullCollector",
    "StepRecord",
    "TraceLevel",
    "TrajectoryCollectingEnvironment",
    "TrajectoryCollector",
    "load_episodes",
]
