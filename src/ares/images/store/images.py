"""Pulled images: one record per manifest digest, and the references (tags) that point at them.

Layout under the store root::

    images/sha256-<hex>.json   the record: config document, diff_ids, transport, platform, sizes, times
    refs.json                  {"registry/repo:tag" | "oci:/path:tag" | ...: "sha256:<manifest digest>"}

A record is written after all its layers are stored, so a record always names layers that exist
(prune keeps them). A tag pulled again moves to the new digest; the old record stays until pruned.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from ares.images.errors import ImageError
from ares.images.rootfs import OverlayMount, RootfsPlan
from ares.images.store.extract import LayerLimits
from ares.images.store.fsutil import file_lock, private_dir, read_json, write_json
from ares.images.store.layers import TOUCH_EVERY_S, LayerStore, layer_name


@dataclass(frozen=True, slots=True)
class PulledRecord:
    """One pulled image, as stored: everything needed to run it offline."""

    manifest_digest: str
    name: str  # the reference it was pulled as, without digest (e.g. ``docker.io/library/debian:12``)
    transport: str  # "registry" | "oci" | "docker-archive"
    config_digest: str
    config: Mapping[str, Any] = field(hash=False, compare=False)
    diff_ids: tuple[str, ...] = ()
    layer_digests: tuple[str, ...] = ()
    platform: str = ""
    size_bytes: int = 0  # content bytes of its layers on disk
    created: float = 0.0
    last_used: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["config"] = dict(self.config)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PulledRecord:
        fixed = dict(data)
        fixed["diff_ids"] = tuple(fixed.get("diff_ids", ()))
        fixed["layer_digests"] = tuple(fixed.get("layer_digests", ()))
        return cls(**fixed)


class ImageStore:
    """Image records and the layer store they use, under one root (``ImageCache.root / "store"``)."""

    def __init__(self, root: Path, limits: LayerLimits | None = None) -> None:
        self.root = root.absolute()
        self.layers = LayerStore(self.root, limits)

    def prepare(self) -> None:
        self.layers.prepare()
        private_dir(self.root / "images")

    def _record_path(self, digest: str) -> Path:
        return self.root / "images" / f"{layer_name(digest)}.json"

    @asynccontextmanager
    async def lock(self, *, shared: bool = False) -> AsyncIterator[None]:
        """The store lock: pulls hold it shared while they add layers and records, prune exclusively."""
        await asyncio.to_thread(self.prepare)
        async with file_lock(self.root / "locks" / "store.lock", shared=shared):
            yield

    # ------------------------------------------------------------------ reading
    def get(self, digest: str) -> PulledRecord | None:
        data = read_json(self._record_path(digest))
        try:
            return PulledRecord.from_dict(data) if isinstance(data, dict) else None
        except (TypeError, ValueError):
            return None

    def refs(self) -> dict[str, str]:
        data = read_json(self.root / "refs.json")
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}

    def records(self) -> list[PulledRecord]:
        """Every pulled image, most recently used first."""
        folder = self.root / "images"
        names = sorted(os.listdir(folder)) if folder.is_dir() else []
        found = (self.get(n.removesuffix(".json").replace("-", ":", 1)) for n in names if n.endswith(".json"))
        return sorted((r for r in found if r is not None), key=lambda r: r.last_used, reverse=True)

    def names(self, digest: str) -> list[str]:
        """The references that point at ``digest``."""
        return sorted(ref for ref, target in self.refs().items() if target == digest)

    def find(self, name: str) -> PulledRecord | None:
        """A record by reference, ``...@sha256:<digest>``, digest, or unique digest prefix (>= 12 hex)."""
        if (digest := self.refs().get(name)) is not None:
            return self.get(digest)
        if "@sha256:" in name:
            return self.get(name.rsplit("@", 1)[1])
        wanted = name.removeprefix("sha256:")
        if len(wanted) >= 12 and all(c in "0123456789abcdef" for c in wanted):
            matches = [r for r in self.records() if r.manifest_digest[7:].startswith(wanted)]
            return matches[0] if len(matches) == 1 else None
        return None

    def complete(self, record: PulledRecord) -> bool:
        """Whether every layer of ``record`` is in the layer store."""
        return all(self.layers.info(d) is not None for d in record.diff_ids)

    def plan(self, record: PulledRecord) -> RootfsPlan:
        """The image as overlay lowers, top layer first.

        Empty layers are left out and a layer that occurs twice is stacked once, at its topmost place:
        the upper copy shadows everything the lower one holds, so the tree is the same with fewer lowers.
        """
        lowers: list[str] = []
        seen: set[str] = set()
        for diff_id in reversed(record.diff_ids):
            info = self.layers.info(diff_id)
            if info is None:
                raise ImageError(
                    f"image {record.name}@{record.manifest_digest}: layer {diff_id} is missing from the "
                    f"store {self.root}; pull the image again"
                )
            if diff_id in seen or info.empty:
                continue
            seen.add(diff_id)
            lowers.append(str(self.layers.lower(diff_id)))
        if not lowers:  # an image with no files at all still needs one lower
            lowers.append(str(self.layers.lower(record.diff_ids[0]))) if record.diff_ids else None
        if not lowers:
            raise ImageError(f"image {record.name}@{record.manifest_digest} has no layers")
        return RootfsPlan((OverlayMount("/", tuple(lowers)),))

    # ------------------------------------------------------------------ writing
    async def save(self, record: PulledRecord, refs: Iterable[str] = ()) -> PulledRecord:
        """Store ``record`` (keeping the first ``created``) and point ``refs`` at it."""
        refs = tuple(refs)

        def write() -> PulledRecord:
            private_dir(self.root / "images")
            old = self.get(record.manifest_digest)
            saved = replace(record, created=old.created) if old is not None else record
            write_json(self._record_path(record.manifest_digest), saved.to_dict())
            if refs:
                table = self.refs()
                table.update(dict.fromkeys(refs, record.manifest_digest))
                write_json(self.root / "refs.json", table)
            return saved

        await asyncio.to_thread(self.prepare)
        async with file_lock(self.root / "locks" / "records.lock"):
            return await asyncio.to_thread(write)

    async def touch(self, record: PulledRecord) -> None:
        """Record a use of the image and its layers (at most once a minute)."""
        now = time.time()
        if now - record.last_used < TOUCH_EVERY_S:
            return

        def write() -> None:
            current = self.get(record.manifest_digest)
            if current is not None:
                path = self._record_path(record.manifest_digest)
                write_json(path, replace(current, last_used=now).to_dict())
            for diff_id in record.diff_ids:
                self.layers.touch(diff_id, now)

        async with file_lock(self.root / "locks" / "records.lock"):
            await asyncio.to_thread(write)

    async def forget(self, digest: str) -> None:
        """Remove an image record and the references to it (its layers stay until pruned)."""

        def write() -> None:
            self._record_path(digest).unlink(missing_ok=True)
            table = self.refs()
            kept = {ref: target for ref, target in table.items() if target != digest}
            if kept != table:
                write_json(self.root / "refs.json", kept)

        async with file_lock(self.root / "locks" / "records.lock"):
            await asyncio.to_thread(write)
