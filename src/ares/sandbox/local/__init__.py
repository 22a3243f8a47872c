"""The embedded local sandbox: Linux namespaces over overlayfs, no daemon needed."""

from ares.images.rootfs import OverlayMount, RootfsPlan
from ares.sandbox.local.sandbox import LocalSandbox

__all__ = ["LocalSandbox", "OverlayMount", "RootfsPlan"]
