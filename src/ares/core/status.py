"""How an episode ended; recorded on every episode so trainers can mask bad groups."""

from __future__ import annotations

import enum


class EpisodeStatus(enum.StrEnum):
    RUNNING = "running"
    FINISHED = "finished"  # the agent finished and the verifier produced a reward
    TRUNCATED = "truncated"  # a step or time limit cut the episode
    ABANDONED = "abandoned"  # reset() was called while the episode was active
    ABORTED = "aborted"  # close() was called while the episode was active
    ERRORED = "errored"  # agent crash, sandbox crash, verifier failure
    CANCELLED = "cancelled"  # the asyncio task running the episode was cancelled

    @property
    def is_terminal(self) -> bool:
        return self is not EpisodeStatus.RUNNING
