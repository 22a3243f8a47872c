"""What a local sandbox's root is made of, below its writable upper dirs.

Bottom up: the image's mount plan, then snapshot layers (read-only dirs of upper-dir diffs, kept in
``snapshot.py``'s registry), and the plan of both together that the next start mounts. The stack
only keeps these consistent; ``snapshot.py`` decides which layers to push or attach, and the
sandbox pins the image (``resolve_image``) at its first start and resets the stack when it stops.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from ares.errors import SandboxError
from ares.images.config import ImageConfig
from ares.images.identity import ImageIdentity
from ares.images.rootfs import RootfsPlan
from ares.sandbox.addon_cache import ensure_addon, largest_program_mib
from ares.sandbox.addons import AddonLayer
from ares.sandbox.base import ImageSpec
from ares.sandbox.local import image_hook, workspace
from ares.sandbox.snapshots import FilesystemSnapshot

HOST_IMAGE = ImageIdentity(requested=None, source="host")


async def resolve_image(
    image: ImageSpec, addons: Sequence[AddonLayer] = ()
) -> tuple[RootfsPlan, ImageConfig, ImageIdentity]:
    """The mount plan, defaults and identity of ``image`` (the host base, or a built or pulled image),
    with ``addons`` (filled into the host cache on first use) on top as read-only layers."""
    if image.name is None and image.dockerfile_dir is None:
        plan, config, identity = await workspace.host_base_plan_async(), ImageConfig(), HOST_IMAGE
    else:
        plan, config, identity = await image_hook.build_image(image)  # the builder, installed by the package
    for addon in addons:
        _check_addon_mount(plan, addon)
        plan = plan.stacked_on(await ensure_addon(addon))
    return plan, config, identity


async def addon_program_mib(addons: Sequence[AddonLayer]) -> int:
    """The largest program any of ``addons`` brings (MiB), for the address-space limit."""
    sizes = [await asyncio.to_thread(largest_program_mib, await ensure_addon(a)) for a in addons]
    return max(sizes, default=0)


def _check_addon_mount(plan: RootfsPlan, addon: AddonLayer) -> None:
    """Add-on files live in the root mount: refuse a mount point under another mount of the plan."""
    inside = [
        m.target for m in plan.mounts if m.target != "/" and f"{addon.mount}/".startswith(f"{m.target}/")
    ]
    if inside or not any(m.target == "/" for m in plan.mounts):
        raise SandboxError(
            f"add-on {addon.key} mounts at {addon.mount}, which this image keeps in a separate mount "
            f"({', '.join(inside) or 'no root mount'}); mount it elsewhere (e.g. under /opt)"
        )


def stacked(plan: RootfsPlan, layer_dirs: Sequence[Path]) -> RootfsPlan:
    """``plan`` with ``layer_dirs`` (topmost first) on top."""
    for layer in reversed(layer_dirs):
        plan = plan.stacked_on(layer)
    return plan


class LayerStack:
    """A sandbox's image plan, its snapshot layers (topmost first) and the plan they make together."""

    def __init__(
        self, plan: RootfsPlan | None, *, restore: FilesystemSnapshot | None = None, sealed: str | None = None
    ) -> None:
        """``plan`` pins the image (else the sandbox resolves it at start); ``restore`` is the
        snapshot every start stacks; ``sealed`` says why this stack takes no snapshot layers."""
        self._plan = plan
        self._image: RootfsPlan | None = None
        self._layers: tuple[Path, ...] = ()
        self.restore = restore
        self.sealed = sealed

    @property
    def plan(self) -> RootfsPlan | None:
        """What the next start mounts (None until the image is known)."""
        return self._plan

    @property
    def image(self) -> RootfsPlan | None:
        """The image's own plan, without snapshot layers (None before the first start)."""
        return self._image

    @property
    def layers(self) -> tuple[Path, ...]:
        return self._layers

    @property
    def owner(self) -> int:
        """How the layer registry tells this stack from others that hold the same layers."""
        return id(self)

    def pin(self, resolved: RootfsPlan | None = None) -> RootfsPlan:
        """At a start: the image is the plan given, else ``resolved``; returns it."""
        if self._plan is None:
            if resolved is None:
                raise SandboxError("the sandbox's image is not resolved")
            self._plan = resolved
        self._image = self._image or self._plan
        return self._image

    def push(self, layer: Path) -> None:
        """A new snapshot layer on top (the sandbox's diff so far, frozen)."""
        self._set((layer, *self._layers))

    def attach(self, chain: tuple[Path, ...]) -> None:
        """A restored snapshot's layers, topmost first, on the bare image."""
        self._set(chain)

    def reset(self) -> tuple[Path, ...]:
        """The sandbox stopped: back to the bare image; returns the layers it let go of."""
        held, self._layers = self._layers, ()
        if self._image is not None:
            self._plan = self._image
        return held

    def _set(self, layers: tuple[Path, ...]) -> None:
        if self._image is None:
            raise SandboxError("the sandbox has not been started")
        self._layers = layers
        self._plan = stacked(self._image, layers)
