"""How a local sandbox gets an image it was not handed a mount plan for: through a hook.

Building or pulling an image runs build steps in local sandboxes (``images.py``, ``build_steps.py``),
so the builder sits above the sandbox and the sandbox cannot import it. The package
(``ares.sandbox.local``) installs the builder here when it is imported, and ``stack.resolve_image``
calls what is installed: the builder is loaded only when a sandbox first needs an image.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ares.errors import SandboxError
from ares.images.config import ImageConfig
from ares.images.identity import ImageIdentity
from ares.images.rootfs import RootfsPlan
from ares.sandbox.base import ImageSpec

#: Builds (or fetches) an image: its mount plan, its config defaults and what it really is.
Resolved = tuple[RootfsPlan, ImageConfig, ImageIdentity]
ImageResolver = Callable[[ImageSpec], Awaitable[Resolved]]

_resolver: ImageResolver | None = None


def install(resolver: ImageResolver) -> None:
    """Resolve images with ``resolver`` from now on."""
    global _resolver
    _resolver = resolver


async def build_image(image: ImageSpec) -> Resolved:
    """Plan, defaults and identity of ``image`` (a Dockerfile dir or a name), from the installed builder."""
    if _resolver is None:
        raise SandboxError("no image builder is installed; import ares.sandbox.local to install it")
    return await _resolver(image)
