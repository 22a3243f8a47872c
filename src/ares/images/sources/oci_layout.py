"""An image in an OCI image-layout directory (`oci:PATH[:TAG]`), for machines with no registry.

`skopeo copy … oci:DIR:TAG`, `podman save --format oci-dir`, `umoci` and BuildKit's OCI exporter all
write this layout: `oci-layout`, `index.json` and `blobs/<alg>/<hex>`. A layout is often handed over
from elsewhere, so it is read as untrusted input: every digest is checked against a strict pattern
before it becomes a path, a blob reached through a symlink must still lie inside the layout, and each
manifest, config and layer is verified against its digest (layers also against their diff_id).
"""

from __future__ import annotations

import os
from pathlib import Path

from ares.images.errors import ImageError
from ares.images.registry.manifest import Platform, host_platform
from ares.images.registry.mediatypes import layer_compression
from ares.images.sources import _oci
from ares.images.sources._local import ResolvedOnce
from ares.images.sources._stream import MAX_DOCUMENT, BlobFile, read_document, stream_layer
from ares.images.sources.base import ChunkSink, LayerProgress, SourceImage, SourceLayer

_LAYOUT_MAJOR = "1."


class OciLayoutSource(ResolvedOnce):
    """One image of an OCI layout: the manifest `tag` names (or the only one), for `platform`.

    `tag` matches the `org.opencontainers.image.ref.name` annotation of an `index.json` entry; without
    a tag the layout must hold exactly one entry (or one per platform). Nested indexes are followed
    and the entry for `platform` (default: this host's) is chosen.
    """

    def __init__(self, path: Path, tag: str | None = None, platform: Platform | None = None) -> None:
        self._path = Path(path)
        self._tag = tag
        self._platform = platform or host_platform()
        self.name = f"oci:{self._path}" + (f":{tag}" if tag else "")
        super().__init__()

    async def read_layer(
        self, layer: SourceLayer, sink: ChunkSink, progress: LayerProgress | None = None
    ) -> None:
        compression = layer_compression(layer.media_type)
        if compression is None:
            raise ImageError(f"{self.name}: layer {layer.digest} has media type {layer.media_type!r}")
        digest = _oci.check_digest(layer.digest, self.name)
        await stream_layer(lambda: self._open_blob(digest), layer, compression, sink, progress, self.name)

    def _resolve(self) -> SourceImage:
        root = self._root()
        if not (root / "oci-layout").is_file():
            raise ImageError(
                f"{self.name}: {self._path} is not an OCI image layout (no oci-layout file); "
                "write one with `skopeo copy … oci:DIR:TAG` or `podman save --format oci-dir`"
            )
        layout = _oci.parse_json(_read_small(root, "oci-layout", self.name), f"{self.name}: oci-layout")
        version = str(layout.get("imageLayoutVersion", ""))
        if not version.startswith(_LAYOUT_MAJOR):
            raise ImageError(f"{self.name}: image layout version {version!r} is not 1.x; ARES reads 1.x only")
        if not (root / "index.json").is_file():
            raise ImageError(f"{self.name}: the layout has no index.json")
        index = _oci.parse_json(_read_small(root, "index.json", self.name), f"{self.name}: index.json")
        return _oci.resolve_index(
            index,
            self._read_blob,
            tag=self._tag,
            platform=self._platform,
            name=self.name,
            transport="oci",
            where=self.name,
        )

    def _root(self) -> Path:
        if not self._path.is_dir():
            raise ImageError(f"{self.name}: {self._path} is not a directory")
        return Path(os.path.realpath(self._path))

    def _read_blob(self, digest: str, size: int | None, what: str) -> bytes:
        return read_document(lambda: self._open_blob(digest), digest, size, what)

    def _open_blob(self, digest: str) -> BlobFile:
        """Open `blobs/<alg>/<hex>`, refusing anything that resolves outside the layout."""
        root = self._root()
        algorithm, _, hexdigest = _oci.check_digest(digest, self.name).partition(":")
        path = root / "blobs" / algorithm / hexdigest
        real = Path(os.path.realpath(path))
        if not real.is_relative_to(root):
            raise ImageError(
                f"{self.name}: blob {digest} is a symlink to {real}, outside the layout; refusing it"
            )
        if not real.exists():
            raise ImageError(
                f"{self.name}: blob {digest} is missing from the layout (no {path}); the copy is "
                "incomplete — export the image again"
            )
        if not real.is_file():
            raise ImageError(f"{self.name}: blob {digest} is not a regular file; refusing it")
        # O_NOFOLLOW: a symlink swapped in after the check above is refused, not followed.
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        return os.fdopen(fd, "rb")


def _read_small(root: Path, name: str, where: str) -> bytes:
    """A top-level layout file, confined to the layout like the blobs."""
    real = Path(os.path.realpath(root / name))
    if not real.is_relative_to(root):
        raise ImageError(f"{where}: {name} is a symlink to {real}, outside the layout; refusing it")
    with real.open("rb") as handle:
        raw = handle.read(MAX_DOCUMENT + 1)
    if len(raw) > MAX_DOCUMENT:
        raise ImageError(f"{where}: {name} is larger than {MAX_DOCUMENT} bytes; refusing it")
    return raw
