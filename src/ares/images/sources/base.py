"""Where an image's bytes come from: a registry, an OCI layout dir or a ``docker save`` archive.

Every source answers the same two questions: what the image is (manifest digest, config, layers)
and what one layer's uncompressed tar bytes are. The layer store and the pull driver use only
this, so a layer from an archive and the same layer from a registry land in one store entry.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

#: Receives a layer's uncompressed tar bytes, in order.
ChunkSink = Callable[[bytes], Awaitable[None]]
#: Told how many of a layer's stored (compressed) bytes were read so far, and the total if known.
LayerProgress = Callable[[int, int | None], None]


@dataclass(frozen=True, slots=True)
class SourceLayer:
    """One layer: the digest of its stored blob, the digest of its uncompressed tar, how it is stored."""

    digest: str
    diff_id: str
    media_type: str
    size: int | None = None


@dataclass(frozen=True, slots=True)
class SourceImage:
    """An image as a source describes it; ``config`` is the OCI image config document."""

    name: str
    manifest_digest: str
    config_digest: str
    config: Mapping[str, Any] = field(hash=False, compare=False)
    layers: tuple[SourceLayer, ...]
    transport: str  # "registry" | "oci" | "docker-archive"


class ImageSource(Protocol):
    """An image that can be read, layer by layer, with every digest checked by the source."""

    async def resolve(self) -> SourceImage:
        """The image's manifest, config and layers (for a registry: after platform selection)."""
        ...

    async def read_layer(
        self, layer: SourceLayer, sink: ChunkSink, progress: LayerProgress | None = None
    ) -> None:
        """Deliver ``layer``'s uncompressed tar to ``sink``; ``ImageError`` if a digest does not match."""
        ...

    async def aclose(self) -> None: ...
