"""Where pulled images live: a content-addressed layer store and the image records that use it.

``layers`` keeps one read-only dir per diff_id (an overlay lower), ``extract`` turns a tar stream into
one safely, ``images`` records pulled images and their references, ``prune`` frees what nothing uses.
"""

from ares.images.store.extract import LayerLimits
from ares.images.store.images import ImageStore, PulledRecord
from ares.images.store.layers import LayerInfo, LayerStore
from ares.images.store.prune import BuildCacheRoots, ImageUsage, PruneReport, RootsInUse, prune, usage

__all__ = [
    "BuildCacheRoots",
    "ImageStore",
    "ImageUsage",
    "LayerInfo",
    "LayerLimits",
    "LayerStore",
    "PruneReport",
    "PulledRecord",
    "RootsInUse",
    "prune",
    "usage",
]
