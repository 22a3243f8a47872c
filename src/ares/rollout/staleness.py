"""A bound on how far behind the trainer an episode's tokens may be (asynchronous RL).

An asynchronous trainer samples with weights that are a few updates old; past a bound the samples
hurt more than they help. ``Staleness`` holds the trainer's current version (a callable, read at
every step boundary) and ``max_staleness``: an episode whose oldest token (the oldest
``LLMResponse.policy_version`` it received) is more than ``max_staleness`` versions behind is ended
with a ``StaleEpisodeError``, blame ``infra``: masked for training and refilled where the run
refills (``run_episodes(refills=...)``), never silently kept.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ares.errors import StaleEpisodeError


@dataclass(frozen=True, slots=True)
class Staleness:
    """The trainer's current version and how many versions behind an episode's tokens may be."""

    current: Callable[[], int | None]
    max_staleness: int

    def __post_init__(self) -> None:
        if self.max_staleness < 0:
            raise ValueError(f"max_staleness must be >= 0, got {self.max_staleness}")

    def check(self, oldest: int | None) -> None:
        """Raise ``StaleEpisodeError`` if ``oldest`` is too far behind (None: nothing to judge)."""
        current = self.current()
        if oldest is None or current is None:
            return
        if current - oldest > self.max_staleness:
            raise StaleEpisodeError(
                f"the episode's oldest token is of version {oldest}, {current - oldest} behind the "
                f"current {current} (max_staleness {self.max_staleness})"
            )
