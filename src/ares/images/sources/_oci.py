"""The OCI image-layout walk, shared by layout directories and archives that hold a layout.

`index.json` → (tag) → nested indexes (platform) → manifest → config → layers, every document checked
against its descriptor's digest and size before it is parsed. The walk only needs "read the blob with
this digest", so an `oci:` directory, an `oci-archive` and a Docker ≥ 25 `docker save` tarball share
it. Blocking: run it in a worker thread.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from ares.images.errors import ImageError
from ares.images.registry import mediatypes
from ares.images.registry.manifest import Platform
from ares.images.registry.reference import validate_digest
from ares.images.sources.base import SourceImage, SourceLayer

REF_NAME = "org.opencontainers.image.ref.name"
_MAX_DEPTH = 4

ReadBlob = Callable[[str, int | None, str], bytes]
"""(digest, declared size, what it is) → the verified bytes of that blob."""


def parse_json(raw: bytes, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise ImageError(f"{what} is not valid JSON ({exc})") from exc
    if not isinstance(doc, dict):
        raise ImageError(f"{what} is not a JSON object")
    return doc


def check_digest(digest: Any, where: str) -> str:
    """A descriptor's digest, strictly `sha256:<64 hex>`; it becomes a file or member name after this."""
    try:
        return validate_digest(str(digest))
    except ImageError as exc:
        raise ImageError(f"{where}: {exc}; refusing the image") from None


def resolve_index(
    index: Mapping[str, Any],
    read_blob: ReadBlob,
    *,
    tag: str | None,
    platform: Platform,
    name: str,
    transport: str,
    where: str,
) -> SourceImage:
    """Pick the manifest `tag` names in a layout's top index, then read it into a SourceImage."""
    entries = _entries(index, f"{where}: index.json")
    if tag is not None:
        chosen = [e for e in entries if (e.get("annotations") or {}).get(REF_NAME) == tag]
        if not chosen:
            raise ImageError(f"{where} has no image tagged {tag!r}; it has: {_names(entries)}")
    else:
        chosen = entries
        if not chosen:
            raise ImageError(f"{where}: index.json lists no images")
    if len(chosen) > 1 and not all(isinstance(e.get("platform"), Mapping) for e in chosen):
        what = f"several images are tagged {tag!r}" if tag else "it holds several images"
        raise ImageError(f"{where}: {what}; name one of: {_names(entries)}")
    # Several entries, each with a platform, under one tag: select among them like an index.
    desc = _select({"manifests": chosen}, platform, where) if len(chosen) > 1 else chosen[0]
    return _follow(desc, read_blob, platform, name, transport, where)


def _follow(
    desc: Mapping[str, Any],
    read_blob: ReadBlob,
    platform: Platform,
    name: str,
    transport: str,
    where: str,
) -> SourceImage:
    for _ in range(_MAX_DEPTH):
        digest = check_digest(desc.get("digest"), where)
        raw = read_blob(digest, _size(desc, where), f"{where}: manifest")
        doc = parse_json(raw, f"{where}: manifest {digest}")
        kind = str(doc.get("mediaType") or desc.get("mediaType") or "")
        if kind in mediatypes.INDEXES or (not kind and "manifests" in doc):
            desc = _select(doc, platform, f"{where} (index {digest})")
            continue
        if kind not in mediatypes.IMAGE_MANIFESTS and (kind or "layers" not in doc):
            raise ImageError(f"{where}: {digest} is {kind!r}, not an image manifest ARES can read")
        return image_from_manifest(doc, digest, read_blob, name, transport, where)
    raise ImageError(f"{where}: indexes nest deeper than {_MAX_DEPTH} levels; refusing the image")


def image_from_manifest(
    manifest: Mapping[str, Any],
    manifest_digest: str,
    read_blob: ReadBlob,
    name: str,
    transport: str,
    where: str,
) -> SourceImage:
    """Read and check the config a manifest names; pair each layer descriptor with its diff_id."""
    config_desc = manifest.get("config")
    if not isinstance(config_desc, Mapping):
        raise ImageError(f"{where}: manifest {manifest_digest} has no config descriptor")
    config_digest = check_digest(config_desc.get("digest"), where)
    config_raw = read_blob(config_digest, _size(config_desc, where), f"{where}: image config")
    config = parse_json(config_raw, f"{where}: image config {config_digest}")
    raw_layers = manifest.get("layers")
    if not isinstance(raw_layers, list) or not all(isinstance(d, Mapping) for d in raw_layers):
        raise ImageError(f"{where}: manifest {manifest_digest} has a malformed layer list")
    diff_ids = config_diff_ids(config, len(raw_layers), f"{where}: image config {config_digest}")
    layers = []
    for desc, diff_id in zip(raw_layers, diff_ids, strict=True):
        digest = check_digest(desc.get("digest"), where)
        media_type = str(desc.get("mediaType", ""))
        if mediatypes.layer_compression(media_type) is None:
            raise ImageError(f"{where}: layer {digest} has media type {media_type!r}, not a layer tar")
        layers.append(SourceLayer(digest, diff_id, media_type, _size(desc, where)))
    return SourceImage(
        name=name,
        manifest_digest=manifest_digest,
        config_digest=config_digest,
        config=MappingProxyType(config),
        layers=tuple(layers),
        transport=transport,
    )


def config_diff_ids(config: Mapping[str, Any], layer_count: int, what: str) -> tuple[str, ...]:
    """`rootfs.diff_ids`, each a strict digest, exactly one per layer."""
    rootfs = config.get("rootfs")
    diff_ids = rootfs.get("diff_ids") if isinstance(rootfs, Mapping) else None
    if not isinstance(diff_ids, list):
        raise ImageError(f"{what} has no rootfs.diff_ids")
    if len(diff_ids) != layer_count:
        raise ImageError(
            f"{what} lists {len(diff_ids)} diff_ids for {layer_count} layers; the image is inconsistent"
        )
    return tuple(check_digest(d, what) for d in diff_ids)


def _select(index: Mapping[str, Any], platform: Platform, where: str) -> Mapping[str, Any]:
    entries = _entries(index, where)
    for entry in entries:
        if isinstance(entry.get("platform"), Mapping) and platform.matches(entry["platform"]):
            return entry
    offered = ", ".join(
        "/".join(str(p[k]) for k in ("os", "architecture", "variant") if p.get(k))
        for p in (e.get("platform") or {} for e in entries)
    )
    raise ImageError(f"{where} has no image for platform {platform} (it has: {offered or 'none'})")


def _entries(index: Mapping[str, Any], where: str) -> Sequence[Mapping[str, Any]]:
    entries = index.get("manifests")
    if not isinstance(entries, list) or not all(isinstance(e, Mapping) for e in entries):
        raise ImageError(f"{where} has a malformed manifests list")
    return entries


def _names(entries: Sequence[Mapping[str, Any]]) -> str:
    names = [str((e.get("annotations") or {}).get(REF_NAME, "")) for e in entries]
    return ", ".join(repr(n) for n in names if n) or "no tagged images"


def _size(desc: Mapping[str, Any], where: str) -> int:
    size = desc.get("size")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ImageError(f"{where}: descriptor {desc.get('digest')} has no valid size")
    return size
