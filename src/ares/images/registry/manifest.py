"""Resolve a reference to one platform's image: manifest (through an index), config and layers.

Everything fetched is checked against a digest before it is trusted: the manifest against the digest
asked for (or, by tag, the `Docker-Content-Digest` the registry sends with it), the config and child
manifests against their descriptors. Mirrors are tried in order (`RegistryClient.first_available`):
one endpoint serves the manifest, index and config together.
"""

from __future__ import annotations

import hashlib
import json
import platform as host
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ares.images.errors import ImageError
from ares.images.registry import mediatypes
from ares.images.registry.reference import Reference, validate_digest
from ares.images.registry.transport import RegistryClient

_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64", "armv7l": "arm"}


@dataclass(frozen=True)
class Platform:
    """An OCI platform; `variant` None matches any variant."""

    os: str = "linux"
    architecture: str = "amd64"
    variant: str | None = None

    def matches(self, entry: Mapping[str, Any]) -> bool:
        if entry.get("os") != self.os or entry.get("architecture") != self.architecture:
            return False
        if self.variant is None:
            return True
        default = "v8" if self.architecture == "arm64" else None
        return (entry.get("variant") or default) == self.variant

    def __str__(self) -> str:
        return "/".join(p for p in (self.os, self.architecture, self.variant) if p)


def host_platform() -> Platform:
    """This machine's platform (linux/amd64 on x86-64 hosts)."""
    machine = host.machine().lower()
    arch = _ARCH.get(machine, machine)
    return Platform("linux", arch, "v7" if machine == "armv7l" else None)


@dataclass(frozen=True)
class Layer:
    """A layer descriptor: what to fetch and how it is compressed."""

    digest: str
    size: int
    media_type: str


@dataclass(frozen=True)
class ResolvedImage:
    """One platform's image, every part pinned by digest."""

    reference: Reference  # pinned: carries `manifest_digest`
    manifest_digest: str
    media_type: str
    config_digest: str
    config: Mapping[str, Any] = field(hash=False, compare=False)
    layers: tuple[Layer, ...]
    diff_ids: tuple[str, ...]
    index_digest: str | None = None  # the index the manifest was picked from, if any
    source: Reference | None = None  # where it was pulled from (a mirror, a rewritten location), pinned


async def resolve(
    client: RegistryClient, reference: Reference, platform: Platform | None = None
) -> ResolvedImage:
    """Fetch and verify the manifest (choosing `platform` from an index) and the image config.

    `reference` is the name asked for; mirrors and location rewrites from `client.config` apply, and
    the result's `reference` stays that name (pinned by digest), its `source` says where it came from.
    """
    wanted = platform or host_platform()

    async def attempt(at: Reference, last: bool) -> ResolvedImage:
        return await _resolve_at(client, reference, at, wanted, fail_fast=not last)

    return await client.first_available(reference, attempt)


async def _resolve_at(
    client: RegistryClient, asked: Reference, reference: Reference, wanted: Platform, *, fail_fast: bool
) -> ResolvedImage:
    media_type, body, digest = await _fetch_manifest(
        client, reference, reference.digest or reference.tag, fail_fast
    )
    index_digest = None
    if media_type in mediatypes.INDEXES:
        index_digest = digest
        child = _select(body, wanted, reference)
        media_type, body, digest = await _fetch_manifest(client, reference, child["digest"], fail_fast)
        if child.get("mediaType") and child["mediaType"] != media_type:
            raise ImageError(
                f"{reference}: index says {child['digest']} is {child['mediaType']}, got {media_type}"
            )
    if media_type not in mediatypes.IMAGE_MANIFESTS:
        raise ImageError(f"{reference}: manifest type {media_type!r} is not an image manifest ARES can pull")
    config_desc = _descriptor(body.get("config"), reference, "config")
    config_bytes = await _fetch_config(client, reference, config_desc, fail_fast)
    try:
        config = json.loads(config_bytes)
        diff_ids = tuple(config["rootfs"]["diff_ids"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ImageError(f"{reference}: image config {config_desc['digest']} has no rootfs.diff_ids") from exc
    layers = tuple(
        Layer(d["digest"], int(d["size"]), str(d.get("mediaType", "")))
        for d in (_descriptor(raw, reference, "layer") for raw in body.get("layers") or [])
    )
    if len(layers) != len(diff_ids):
        raise ImageError(
            f"{reference}: manifest lists {len(layers)} layers but its config has {len(diff_ids)} diff_ids"
        )
    for d in diff_ids:
        validate_digest(d)
    return ResolvedImage(
        reference=asked.with_digest(digest),
        manifest_digest=digest,
        media_type=media_type,
        config_digest=config_desc["digest"],
        config=MappingProxyType(config),
        layers=layers,
        diff_ids=diff_ids,
        index_digest=index_digest,
        source=reference.with_digest(digest),
    )


async def _fetch_manifest(
    client: RegistryClient, reference: Reference, ref: str | None, fail_fast: bool
) -> tuple[str, dict[str, Any], str]:
    response = await client.get(
        reference,
        f"manifests/{ref}",
        {"Accept": mediatypes.MANIFEST_ACCEPT},
        limit=client.limits.manifest_bytes,
        fail_fast=fail_fast,
    )
    raw = response.content
    digest = "sha256:" + hashlib.sha256(raw).hexdigest()
    if ref is not None and ref.startswith("sha256:") and digest != ref:
        raise ImageError(
            f"{reference}: the manifest served for {ref} has digest {digest}; the registry or a proxy "
            "altered it — do not use this image"
        )
    announced = response.headers.get("docker-content-digest", "").strip()
    if announced.startswith("sha256:") and announced != digest:
        raise ImageError(
            f"{reference}: {reference.registry} says the manifest for {ref} is {announced} "
            f"(Docker-Content-Digest) but what it sent hashes to {digest}; the registry or a proxy "
            "altered it — do not use this image"
        )
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise ImageError(f"{reference}: manifest {ref} is not JSON") from exc
    if not isinstance(body, dict):
        raise ImageError(f"{reference}: manifest {ref} is not a JSON object")
    header_type = response.headers.get("content-type", "").split(";")[0].strip()
    media_type = body.get("mediaType") or header_type
    known = mediatypes.IMAGE_MANIFESTS | mediatypes.INDEXES
    if body.get("mediaType") and header_type in known and header_type != body["mediaType"]:
        raise ImageError(f"{reference}: manifest says {body['mediaType']} but was served as {header_type}")
    return str(media_type), body, digest


def _select(index: Mapping[str, Any], wanted: Platform, reference: Reference) -> Mapping[str, Any]:
    entries = [m for m in index.get("manifests") or [] if isinstance(m, Mapping)]
    for entry in entries:
        if wanted.matches(entry.get("platform") or {}):
            return _descriptor(entry, reference, "manifest")
    keys = ("os", "architecture", "variant")
    available = ", ".join(
        "/".join(str(p) for p in (e.get("platform", {}).get(k) for k in keys) if p) for e in entries
    )
    raise ImageError(
        f"{reference} has no image for platform {wanted} (it has: {available or 'none'}); "
        "pass a platform it offers"
    )


def _descriptor(raw: Any, reference: Reference, what: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping) or "digest" not in raw or "size" not in raw:
        raise ImageError(f"{reference}: the manifest has a malformed {what} descriptor: {raw!r}")
    validate_digest(str(raw["digest"]))
    return raw


async def _fetch_config(
    client: RegistryClient, reference: Reference, desc: Mapping[str, Any], fail_fast: bool
) -> bytes:
    size = int(desc["size"])
    cap = client.limits.config_bytes
    if size > cap:
        raise ImageError(f"{reference}: image config is {size} bytes, larger than {cap}; refusing it")
    path = f"blobs/{desc['digest']}"
    raw = (await client.get(reference, path, limit=min(size, cap), fail_fast=fail_fast)).content
    if len(raw) != size or "sha256:" + hashlib.sha256(raw).hexdigest() != desc["digest"]:
        raise ImageError(
            f"{reference}: image config blob {desc['digest']} does not match its digest or size; "
            "the registry's copy is corrupt — re-push the image"
        )
    return raw
