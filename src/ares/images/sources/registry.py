"""An image in an OCI distribution registry, read through ``ares.images.registry``."""

from __future__ import annotations

from ares.images.registry import Layer, Platform, Reference, RegistryClient, fetch_layer, parse_reference
from ares.images.registry import resolve as resolve_manifest
from ares.images.sources.base import ChunkSink, LayerProgress, SourceImage, SourceLayer


class RegistrySource:
    """``ImageSource`` for ``[registry/]repository[:tag][@digest]``; pins the manifest digest on resolve."""

    def __init__(
        self, name: str | Reference, *, platform: Platform | None = None, client: RegistryClient | None = None
    ) -> None:
        self.reference = parse_reference(name) if isinstance(name, str) else name
        self.platform = platform
        self._client = client or RegistryClient()
        self._owns_client = client is None
        self._pinned: Reference | None = None

    async def resolve(self) -> SourceImage:
        image = await resolve_manifest(self._client, self.reference, self.platform)
        self._pinned = image.reference
        layers = tuple(
            SourceLayer(layer.digest, diff_id, layer.media_type, layer.size)
            for layer, diff_id in zip(image.layers, image.diff_ids, strict=True)
        )
        return SourceImage(
            name=str(self.reference),
            manifest_digest=image.manifest_digest,
            config_digest=image.config_digest,
            config=image.config,
            layers=layers,
            transport="registry",
        )

    async def read_layer(
        self, layer: SourceLayer, sink: ChunkSink, progress: LayerProgress | None = None
    ) -> None:
        reference = self._pinned or self.reference
        size = layer.size if layer.size is not None else -1
        report = None if progress is None else (lambda _digest, done, total: progress(done, total))
        await fetch_layer(
            self._client, reference, Layer(layer.digest, size, layer.media_type), layer.diff_id, sink,
            progress=report,
        )  # fmt: skip

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()
