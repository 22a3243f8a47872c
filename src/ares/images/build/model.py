"""What a build produces: a ``LocalImage`` (mount plan, config, provenance) and its ``BuildStep``s."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ares.images.build.bases import BaseResolver, Substitution
from ares.images.build.steps import StepRunner
from ares.images.cache import ImageCache
from ares.images.config import ImageConfig
from ares.images.progress import BuildListener
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


class BuildSettings(Protocol):
    """What a build session reads from the builder that started it (``ImageBuilder`` is one); the
    session depends on this, not on the builder, so the two modules do not import each other."""

    cache: ImageCache
    runner: StepRunner
    build_env: Mapping[str, str]
    step_timeout_s: float
    on_log: Callable[[str], None] | None
    on_event: BuildListener | None

    def resolver(
        self, on_debootstrap: Callable[[], None] | None = None, image_dirs: tuple[Path, ...] = ()
    ) -> BaseResolver: ...
