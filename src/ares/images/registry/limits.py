"""Caps on what a registry may make the client read or write: documents, blobs and decompressed layers."""

from __future__ import annotations

from dataclasses import dataclass

MiB = 1024 * 1024
GiB = 1024 * MiB


@dataclass(frozen=True)
class Limits:
    """Manifests and configs are small; a layer may inflate `layer_ratio` times (at least `layer_floor`,
    at most `layer_bytes`) before it is treated as a decompression bomb."""

    manifest_bytes: int = 4 * MiB
    config_bytes: int = 8 * MiB
    layer_ratio: int = 100
    layer_floor: int = 1 * GiB
    layer_bytes: int = 64 * GiB

    def uncompressed_cap(self, stored_size: int) -> int:
        """The most uncompressed bytes a layer of `stored_size` compressed bytes may produce."""
        return min(self.layer_bytes, max(self.layer_floor, self.layer_ratio * stored_size))
