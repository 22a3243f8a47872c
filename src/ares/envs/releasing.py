"""What releasing an episode's sandbox during a long pause needs besides the environment itself.

A release is a snapshot the environment keeps for itself: it may be taken only where the episode
can come back from it, so the sandbox factory must restore snapshots too (a backend that snapshots
but whose factory cannot restore would lose the episode). Every release, and every refusal, is
noted in the episode's metadata (``sandbox_releases``), so the record shows it.
"""

from __future__ import annotations

from ares.envs.episode import Episode
from ares.envs.forking import restoring_factory
from ares.errors import SnapshotError
from ares.sandbox.base import SandboxFactory

#: The episode metadata key listing the episode's releases: ``{"step", "released", "reason"?}``.
RELEASES_KEY = "sandbox_releases"


def check_comes_back(factory: SandboxFactory) -> None:
    """SnapshotError unless ``factory`` can restore what a release takes."""
    if restoring_factory(factory) is None:
        name = factory.__name__ if isinstance(factory, type) else type(factory).__name__
        raise SnapshotError(f"the sandbox factory {name} cannot restore snapshots: the sandbox is kept")


def note_release(episode: Episode | None, refused: SnapshotError | None = None) -> None:
    """Keep a release (or, with ``refused``, why the sandbox was kept) in ``episode``'s metadata."""
    if episode is None:
        return
    entry: dict[str, object] = {"step": episode.steps, "released": refused is None}
    if refused is not None:
        entry["reason"] = str(refused)
    episode.metadata.setdefault(RELEASES_KEY, []).append(entry)
