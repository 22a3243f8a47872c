"""An image in a `docker save` / `podman save` / `skopeo copy … docker-archive:` tarball.

Air-gapped machines receive images as archives. Members are read in place, by byte range of the
uncompressed tar, so a multi-GB archive is never extracted to disk; each read opens its own handle,
so layers can be read concurrently. A compressed outer archive (`docker save | gzip`) has no random
access and is refused with the command that decompresses it; one pass of decompression is cheap next
to the pull it replaces, and it keeps this reader simple.

Two layouts are read:
- `manifest.json` (`Config`, `RepoTags`, `Layers`): what every Docker, Podman and skopeo writes,
  Docker ≥ 25 pointing it into `blobs/sha256/`. Layer tars may be uncompressed or gzip/zstd
  compressed (sniffed, since this format has no media types); legacy `<id>/layer.tar` symlinks are
  followed inside the archive only.
- `index.json` + `oci-layout` with no `manifest.json` (`podman save --format oci-archive`): read like
  an OCI layout directory.

A `manifest.json` image has no registry manifest, so its `manifest_digest` is synthesized: the sha256
of the canonical JSON `{"config": <config digest>, "diff_ids": [...]}` (sorted keys, no spaces). It
is stable across tools (the same image saved by Docker, Podman or skopeo gets the same digest) but is
not pullable from a registry.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ares.images.compression import sniff_compression
from ares.images.errors import ImageError
from ares.images.registry.manifest import Platform, host_platform
from ares.images.registry.mediatypes import Compression, layer_compression
from ares.images.sources import _oci
from ares.images.sources._local import ResolvedOnce
from ares.images.sources._stream import CHUNK, read_document, sha256_digest, stream_layer
from ares.images.sources._tar import TarIndex
from ares.images.sources.base import ChunkSink, LayerProgress, SourceImage, SourceLayer

_SNIFFED_TYPES: dict[Compression, str] = {
    "none": "application/vnd.docker.image.rootfs.diff.tar",
    "gzip": "application/vnd.docker.image.rootfs.diff.tar.gzip",
    "zstd": "application/vnd.oci.image.layer.v1.tar+zstd",
}
# A member named by its content digest (Docker >= 25 `blobs/sha256/<hex>`, skopeo's `<hex>.json`).
_DIGEST_NAME = re.compile(r"(?:^|/)(?:blobs/sha256/)?([0-9a-f]{64})(?:\.json)?$")


@dataclass(frozen=True, slots=True)
class _Stored:
    """Where a layer's blob sits in the archive and how it is compressed."""

    member: str
    compression: Compression


class DockerArchiveSource(ResolvedOnce):
    """One image of a `docker save`-style archive: the one whose `RepoTags` has `name`, or the only one.

    For an OCI archive, `name` matches the `org.opencontainers.image.ref.name` annotation instead,
    and `platform` (default: this host's) selects from a multi-platform index.
    """

    def __init__(self, path: Path, name: str | None = None, platform: Platform | None = None) -> None:
        self._path = Path(path)
        self._wanted = name
        self._platform = platform or host_platform()
        self.name = f"docker-archive:{self._path}" + (f":{name}" if name else "")
        self._tar: TarIndex | None = None
        self._stored: dict[tuple[str, str], _Stored] = {}
        super().__init__()

    async def read_layer(
        self, layer: SourceLayer, sink: ChunkSink, progress: LayerProgress | None = None
    ) -> None:
        await self.resolve()
        stored = self._stored.get((layer.digest, layer.diff_id))
        if stored is None or self._tar is None:
            raise ImageError(f"{self.name}: layer {layer.digest} (diff {layer.diff_id}) is not in this image")
        tar = self._tar
        await stream_layer(
            lambda: tar.open(stored.member), layer, stored.compression, sink, progress, self.name
        )

    def _resolve(self) -> SourceImage:
        self._tar = tar = TarIndex.build(self._path, self.name)
        if tar.has("manifest.json"):
            return self._from_manifest_json(tar)
        if tar.has("index.json") and tar.has("oci-layout"):
            return self._from_oci(tar)
        raise ImageError(
            f"{self.name}: the archive has neither manifest.json nor index.json; it is not an image "
            "saved by `docker save`, `podman save` or `skopeo copy`"
        )

    def _from_manifest_json(self, tar: TarIndex) -> SourceImage:
        entries = _manifest_entries(tar.read_small("manifest.json"), f"{self.name}: manifest.json")
        entry = self._choose(entries)
        config_member = _member_name(entry.get("Config"), "Config", self.name)
        config_raw = tar.read_small(config_member)
        config_digest = sha256_digest(config_raw)
        claimed = _claimed_digest(tar.target(config_member))
        if claimed is not None and claimed != config_digest:
            raise ImageError(
                f"{self.name}: image config {config_member} hashes to {config_digest}, not the digest its "
                "name claims; the archive is corrupt or was tampered with"
            )
        config = _oci.parse_json(config_raw, f"{self.name}: image config {config_member}")
        raw_layers = entry.get("Layers")
        if not isinstance(raw_layers, list):
            raise ImageError(f"{self.name}: manifest.json has no Layers list")
        members = [_member_name(m, "Layers entry", self.name) for m in raw_layers]
        diff_ids = _oci.config_diff_ids(config, len(members), f"{self.name}: image config {config_digest}")
        layers = []
        for member, diff_id in zip(members, diff_ids, strict=True):
            target = tar.target(member)
            compression = sniff_compression(tar.head(target, 4))
            digest = _claimed_digest(target)
            if digest is None:
                # Uncompressed, the stored blob is the tar itself; compressed, hash what is stored.
                digest = diff_id if compression == "none" else self._hash_member(tar, target)
            layer = SourceLayer(digest, diff_id, _SNIFFED_TYPES[compression], tar.size(target))
            self._stored[(digest, diff_id)] = _Stored(target, compression)
            layers.append(layer)
        tags = _repo_tags(entry)
        canonical = {"config": config_digest, "diff_ids": list(diff_ids)}
        synthesized = json.dumps(canonical, sort_keys=True, separators=(",", ":")).encode()
        return SourceImage(
            name=f"docker-archive:{self._path}" + (f":{self._wanted or tags[0]}" if tags else ""),
            manifest_digest=sha256_digest(synthesized),
            config_digest=config_digest,
            config=MappingProxyType(config),
            layers=tuple(layers),
            transport="docker-archive",
        )

    def _from_oci(self, tar: TarIndex) -> SourceImage:
        def read_blob(digest: str, size: int | None, what: str) -> bytes:
            member = "blobs/" + digest.replace(":", "/", 1)
            return read_document(lambda: tar.open(member), digest, size, what)

        index = _oci.parse_json(tar.read_small("index.json"), f"{self.name}: index.json")
        image = _oci.resolve_index(
            index,
            read_blob,
            tag=self._wanted,
            platform=self._platform,
            name=self.name,
            transport="docker-archive",
            where=self.name,
        )
        for layer in image.layers:
            compression = layer_compression(layer.media_type) or "none"
            member = "blobs/" + layer.digest.replace(":", "/", 1)
            self._stored[(layer.digest, layer.diff_id)] = _Stored(tar.target(member), compression)
        return image

    def _choose(self, entries: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
        available = ", ".join(repr(t) for e in entries for t in _repo_tags(e)) or "untagged images only"
        if self._wanted is None:
            if len(entries) != 1:
                raise ImageError(
                    f"{self.name}: the archive holds {len(entries)} images; name one of: {available}"
                )
            return entries[0]
        wanted = _normal_tag(self._wanted)
        chosen = [e for e in entries if any(_normal_tag(t) == wanted for t in _repo_tags(e))]
        if not chosen:
            raise ImageError(f"{self.name}: no image here is tagged {self._wanted!r}; it has: {available}")
        return chosen[0]

    def _hash_member(self, tar: TarIndex, member: str) -> str:
        digest = hashlib.sha256()
        handle = tar.open(member)
        try:
            while chunk := handle.read(CHUNK):
                digest.update(chunk)
        finally:
            handle.close()
        return "sha256:" + digest.hexdigest()


def _manifest_entries(raw: bytes, what: str) -> list[Mapping[str, Any]]:
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise ImageError(f"{what} is not valid JSON ({exc})") from exc
    if not isinstance(doc, list) or not doc or not all(isinstance(e, Mapping) for e in doc):
        raise ImageError(f"{what} is not a non-empty list of image entries")
    return doc


def _repo_tags(entry: Mapping[str, Any]) -> list[str]:
    raw = entry.get("RepoTags") or []
    return [str(t) for t in raw] if isinstance(raw, list) else []


def _member_name(value: Any, what: str, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ImageError(f"{where}: manifest.json has a malformed {what}: {value!r}")
    return value


def _claimed_digest(member: str) -> str | None:
    match = _DIGEST_NAME.search(member)
    if match is None or ("/" in member and not member.startswith("blobs/sha256/")):
        return None
    return "sha256:" + match.group(1)


def _normal_tag(ref: str) -> str:
    """`docker.io/library/x` and `x`, and `x` and `x:latest`, name the same image."""
    ref = ref.removeprefix("docker.io/").removeprefix("library/")
    if "@" not in ref and ":" not in ref.rsplit("/", 1)[-1]:
        ref += ":latest"
    return ref
