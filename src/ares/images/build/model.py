"""What a build produces: a ``LocalImage`` (mount plan, config, provenance) and its ``BuildStep``s."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ares.images.build.bases import Substitution
from ares.images.config import ImageConfig
from ares.images.rootfs import RootfsPlan


@dataclass(frozen=True, slots=True)
class BuildStep:
    """How one instruction was satisfied: from the cache or by running it."""

    index: int
    instruction: str
    key: str
    cached: bool
    duration_s: float


@dataclass(frozen=True, slots=True)
class LocalImage:
    """A built image: its mount plan (base + layers) and the defaults its sandboxes start with.

    ``base`` is the image the layers stand on, as it really ran: a stand-in name (``ares/host``,
    ``ares/host-python``, ``ares/debian:bookworm``), a digest-pinned reference of a pulled image, or
    ``scratch``. ``substitutions`` lists every named image a stand-in served instead (fallback on).
    """

    key: str
    base: str
    plan: RootfsPlan
    config: ImageConfig
    steps: tuple[BuildStep, ...] = ()
    log_path: Path | None = None
    substitutions: tuple[Substitution, ...] = ()

    @property
    def cached(self) -> bool:
        return all(step.cached for step in self.steps)

    @property
    def served_by(self) -> str | None:
        """The stand-in that served the named base image, if one did."""
        return self.substitutions[0].served_by if self.substitutions else None
