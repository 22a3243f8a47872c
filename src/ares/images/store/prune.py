"""Disk use of pulled images, and pruning what nothing uses.

Other stores stack on pulled images: a Dockerfile built ``FROM`` a pulled image keeps using its
layers. They tell prune so through ``RootsInUse``: any ``sha256:`` digest they name (a manifest
digest or a diff_id) is kept. ``BuildCacheRoots`` reads the Dockerfile cache's records that way, so
whatever form the builder writes a pulled base in, a digest in it protects the base.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ares.images.scratch import sweep_dead
from ares.images.store.images import ImageStore, PulledRecord

_DIGEST = re.compile(r"sha256[:-]([0-9a-f]{64})")


class RootsInUse(Protocol):
    """Something outside the pull store that uses pulled images or layers."""

    def roots(self) -> Iterable[str]:
        """``sha256:<hex>`` manifest digests and diff_ids still in use."""
        ...


@dataclass(frozen=True, slots=True)
class BuildCacheRoots:
    """Every digest named by the Dockerfile cache's image and layer records under ``cache_root``."""

    cache_root: Path

    def roots(self) -> Iterable[str]:
        found: set[str] = set()
        records = [*self.cache_root.glob("images/*.json"), *self.cache_root.glob("layers/*/layer.json")]
        for path in records:
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            found.update(f"sha256:{m}" for m in _DIGEST.findall(text))
        return found


@dataclass(frozen=True, slots=True)
class ImageUsage:
    """One pulled image's disk use: all its layers, those only it uses, those others use too."""

    record: PulledRecord
    names: tuple[str, ...]
    layers: int
    size_bytes: int
    unique_bytes: int
    shared_bytes: int


@dataclass(frozen=True, slots=True)
class PruneReport:
    images: tuple[str, ...] = ()  # "<name>@<digest>" of the records removed
    layers: tuple[str, ...] = ()  # diff_ids removed
    freed_bytes: int = 0
    failures: tuple[str, ...] = field(default=())


def usage(store: ImageStore) -> list[ImageUsage]:
    """Disk use per pulled image (layers counted once per image), most recently used first."""
    records = store.records()
    users = Counter(d for r in records for d in set(r.diff_ids))
    out = []
    for record in records:
        sizes = {d: (i.size_bytes if (i := store.layers.info(d)) else 0) for d in set(record.diff_ids)}
        shared = sum(size for d, size in sizes.items() if users[d] > 1)
        total = sum(sizes.values())
        names = tuple(store.names(record.manifest_digest)) or (record.name,)
        out.append(ImageUsage(record, names, len(record.diff_ids), total, total - shared, shared))
    return out


async def prune(
    store: ImageStore,
    *,
    everything: bool = False,
    keep: Iterable[str] = (),
    roots: Iterable[RootsInUse] = (),
) -> PruneReport:
    """Remove layers no image uses; with ``everything``, first the images not kept or in use.

    ``keep`` names images (references or digests) to keep; ``roots`` are the other stores that use
    pulled images. Pulls hold the store lock shared, so nothing a pull in flight needs is removed.
    """
    if not store.root.is_dir():
        return PruneReport()
    await asyncio.to_thread(store.prepare)
    in_use = {d for provider in roots for d in provider.roots()}
    kept = {r.manifest_digest for name in keep if (r := store.find(name)) is not None}
    removed_images: list[str] = []
    removed_layers: list[str] = []
    failures: list[str] = []
    freed = 0
    async with store.lock():
        records = await asyncio.to_thread(store.records)
        if everything:
            for record in records:
                digest = record.manifest_digest
                if digest in kept or digest in in_use or in_use.intersection(record.diff_ids):
                    continue
                await store.forget(digest)
                removed_images.append(f"{record.name}@{digest}")
            records = await asyncio.to_thread(store.records)
        protected = in_use | {d for r in records for d in r.diff_ids}
        for diff_id in await asyncio.to_thread(_stored_layers, store):
            if diff_id in protected:
                continue
            info = store.layers.info(diff_id)
            failures += await store.layers.remove(diff_id)
            removed_layers.append(diff_id)
            freed += info.size_bytes if info is not None else 0
        failures += await asyncio.to_thread(sweep_dead, store.root / "tmp")
    return PruneReport(tuple(removed_images), tuple(removed_layers), freed, tuple(failures))


def _stored_layers(store: ImageStore) -> list[str]:
    """Every layer dir, published or not (a record-less dir is debris of a crash)."""
    folder = store.root / "layers"
    names = os.listdir(folder) if folder.is_dir() else []
    return sorted(n.replace("-", ":", 1) for n in names if _DIGEST.fullmatch(n))
