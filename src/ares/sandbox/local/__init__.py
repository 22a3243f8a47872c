"""The embedded local sandbox: Linux namespaces over overlayfs, no daemon needed.

Importing the package installs the image builder as the sandboxes' image hook (``image_hook.py``):
the builder runs its steps in local sandboxes, so the sandbox modules do not import it themselves.
"""

from ares.images.config import ImageConfig
from ares.images.identity import ImageIdentity
from ares.images.rootfs import OverlayMount, RootfsPlan
from ares.sandbox.base import ImageSpec
from ares.sandbox.local import image_hook
from ares.sandbox.local.sandbox import LocalSandbox

__all__ = ["LocalSandbox", "OverlayMount", "RootfsPlan"]


async def _build(image: ImageSpec) -> tuple[RootfsPlan, ImageConfig, ImageIdentity]:
    from ares.sandbox.local.images import identity_of, resolve_local_image  # builder code when needed

    built = await resolve_local_image(image)
    return built.plan, built.config, identity_of(image, built)


image_hook.install(_build)
