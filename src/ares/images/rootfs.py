"""Root filesystems as mount plans: ordered overlay mounts, each a stack of read-only layer dirs.

An image is a plan; a sandbox mounts it with a fresh upper dir per mount, so its filesystem diff
against the image is exactly its upper dirs. Plans are plain values shared by the image code (which
makes them) and the local sandbox (which mounts them).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: Marks a dir whose lower content is hidden; ``user.`` so unprivileged overlays (``userxattr``) honour it.
OPAQUE_XATTR = "user.overlay.opaque"


@dataclass(frozen=True, slots=True)
class OverlayMount:
    """One overlay in a sandbox root: ``target`` inside the sandbox, ``lower`` from top to bottom."""

    target: str
    lower: tuple[str, ...]

    @property
    def key(self) -> str:
        """A directory name for this mount's upper/work dirs."""
        return "_root" if self.target == "/" else self.target.strip("/").replace("/", "_")


@dataclass(frozen=True, slots=True)
class RootfsPlan:
    """The ordered mounts that make up a sandbox root (parents before children)."""

    mounts: tuple[OverlayMount, ...]

    def stacked_on(self, diff_dir: Path) -> RootfsPlan:
        """This image plus a frozen sandbox diff (its upper dirs) as the topmost read-only layers."""
        return RootfsPlan(
            tuple(
                OverlayMount(m.target, (str(diff_dir / m.key), *m.lower))
                if (diff_dir / m.key).is_dir()
                else m
                for m in self.mounts
            )
        )
