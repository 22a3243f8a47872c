"""Add-on layers: files an agent needs (a CLI and its runtime) laid over a task's image, read-only.

An ``AddonLayer`` names what goes where (``mount``, an absolute dir inside the sandbox) and how to
make it (``source``, filled once into a host dir and cached by ``key``). Backends put it on top of
the task's image without touching the image's own layers: the local sandbox stacks the cached dir as
one more read-only overlay layer, the Docker backend builds a derived image once. Neither the
verifier's view of the agent's changes nor snapshots include it: it is part of the "image" below
the sandbox's writable layer, like the image itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable


@runtime_checkable
class LayerSource(Protocol):
    """Fills a host dir with an add-on's files (run once per cache key; may use the network)."""

    async def populate(self, dest: Path) -> None: ...


@dataclass(frozen=True, slots=True)
class AddonLayer:
    """``source``'s files, shown read-only at ``mount`` in the sandbox; ``key`` names the cached copy
    (it must change whenever the files would: include the name and version)."""

    key: str
    mount: str
    source: LayerSource

    def __post_init__(self) -> None:
        if not self.mount.startswith("/") or ".." in self.mount.split("/") or self.mount.rstrip("/") == "":
            raise ValueError(f"an add-on layer mounts at an absolute dir below /, got {self.mount!r}")
        if not self.key or "/" in self.key or self.key.startswith("."):
            raise ValueError(f"an add-on layer's key is a plain file name, got {self.key!r}")
