"""The content-addressed layer store: one read-only dir per layer, keyed by its diff_id.

Layout under the store root (every dir 0700, owned by the invoking user)::

    layers/sha256-<hex>/_root/      the layer's tree, used as an overlay lower
    layers/sha256-<hex>/layer.json  size, entry count, created, last used
    locks/                          one flock per layer being made, and the store's own
    tmp/<pid>-<token>/              staging on the same filesystem (a layer is published by rename)

Concurrent ``ensure`` calls for one layer, from tasks of one process or from separate processes,
serialise on the layer's flock: the first downloads, the others find it published and download
nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import secrets
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from ares.core.rmtree import remove_tree
from ares.images.errors import ImageError
from ares.images.scratch import sweep_dead
from ares.images.store.extract import ExtractStats, LayerLimits, LayerRefused, extract_layer
from ares.images.store.fsutil import file_lock, private_dir, read_json, write_json
from ares.images.store.pipe import BytePipe

_log = logging.getLogger(__name__)
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
#: last_used is rewritten at most this often (a start must not cost a file write every time).
TOUCH_EVERY_S = 60.0

#: Fills a layer: called with a sink for its uncompressed tar bytes, in order.
Filler = Callable[[Callable[[bytes], Awaitable[None]]], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class LayerInfo:
    """A stored layer (the ``layer.json`` record)."""

    diff_id: str
    size_bytes: int  # content bytes of its regular files
    tar_bytes: int
    entries: int
    created: float
    last_used: float

    @property
    def empty(self) -> bool:
        return self.entries == 0


def layer_name(diff_id: str) -> str:
    """``sha256-<hex>``: a diff_id as a dir name; ImageError if it is not a sha256 digest."""
    if not _DIGEST.fullmatch(diff_id):
        raise ImageError(f"invalid diff_id {diff_id!r}: expected 'sha256:' and 64 lowercase hex digits")
    return diff_id.replace(":", "-", 1)


class LayerStore:
    """Layers on disk; see the module doc. Cheap to create: dirs are made on first use."""

    def __init__(self, root: Path, limits: LayerLimits | None = None) -> None:
        self.root = root.absolute()
        self.limits = limits or LayerLimits()

    # ------------------------------------------------------------------ paths
    def prepare(self) -> None:
        """Make the store's dirs (0700) and sweep the staging dirs of dead processes."""
        self.root.parent.mkdir(parents=True, exist_ok=True)
        for path in (self.root, self.root / "layers", self.root / "locks", self.root / "tmp"):
            private_dir(path)
        sweep_dead(self.root / "tmp")

    def path(self, diff_id: str) -> Path:
        """The layer's dir (holding ``_root`` and ``layer.json``), present or not."""
        return self.root / "layers" / layer_name(diff_id)

    def lower(self, diff_id: str) -> Path:
        """The dir an overlay stacks: the layer's ``_root``."""
        return self.path(diff_id) / "_root"

    # ------------------------------------------------------------------ records
    def info(self, diff_id: str) -> LayerInfo | None:
        """The layer's record if it is published (a partial layer is never visible)."""
        data = read_json(self.path(diff_id) / "layer.json")
        try:
            return LayerInfo(**data) if isinstance(data, dict) else None
        except TypeError:
            return None

    def layers(self) -> list[LayerInfo]:
        folder = self.root / "layers"
        names = sorted(os.listdir(folder)) if folder.is_dir() else []
        infos = (self.info(n.replace("-", ":", 1)) for n in names if n.startswith("sha256-"))
        return [i for i in infos if i is not None]

    def touch(self, diff_id: str, now: float | None = None) -> None:
        """Record a use (at most once per TOUCH_EVERY_S)."""
        info = self.info(diff_id)
        now = time.time() if now is None else now
        if info is not None and now - info.last_used >= TOUCH_EVERY_S:
            with contextlib.suppress(OSError):
                write_json(self.path(diff_id) / "layer.json", {**asdict(info), "last_used": now})

    # ------------------------------------------------------------------ making layers
    async def ensure(self, diff_id: str, fill: Filler, *, label: str | None = None) -> tuple[LayerInfo, bool]:
        """The layer ``diff_id``, made from ``fill`` unless it is stored; (info, whether it was made).

        ``label`` names the layer in errors (the blob digest it came from). A layer that is hostile
        or whose bytes do not hash to ``diff_id`` raises ImageError and leaves nothing behind.
        """
        name = layer_name(diff_id)
        if (info := await asyncio.to_thread(self.info, diff_id)) is not None:
            await asyncio.to_thread(self.touch, diff_id)
            return info, False
        await asyncio.to_thread(self.prepare)
        async with file_lock(self.root / "locks" / f"{name}.lock"):
            if (info := await asyncio.to_thread(self.info, diff_id)) is not None:
                return info, False  # made by another task or process while we waited
            staged = self.root / "tmp" / f"{os.getpid()}-{secrets.token_hex(6)}"
            await asyncio.to_thread(os.mkdir, staged, 0o700)
            try:
                stats = await self._extract(diff_id, fill, staged / "_root", label or diff_id)
                now = time.time()
                info = LayerInfo(diff_id, stats.size_bytes, stats.tar_bytes, stats.entries, now, now)
                await asyncio.to_thread(self._publish, staged, info)
            finally:
                if await asyncio.to_thread(os.path.lexists, staged):
                    await asyncio.to_thread(remove_tree, staged)
        return info, True

    def _publish(self, staged: Path, info: LayerInfo) -> None:
        write_json(staged / "layer.json", asdict(info))
        os.rename(staged, self.path(info.diff_id))  # we hold the layer's lock: nobody published it

    async def _extract(self, diff_id: str, fill: Filler, dest: Path, label: str) -> ExtractStats:
        pipe = BytePipe()
        loop = asyncio.get_running_loop()
        result: asyncio.Future[ExtractStats] = loop.create_future()

        def work() -> None:
            try:
                outcome: ExtractStats | BaseException = extract_layer(pipe.read, dest, self.limits)
            except LayerRefused as exc:
                outcome = ImageError(f"layer {label} is refused: {exc}; nothing was stored")
            except BaseException as exc:  # handed to the event loop, which raises it
                outcome = exc
            if isinstance(outcome, BaseException):
                pipe.abort()  # the download stops at its next chunk
            loop.call_soon_threadsafe(_settle, result, outcome)

        # A thread of its own (not the default executor): it blocks on the pipe while the download
        # needs executor threads to decompress, and a shared pool could starve itself.
        threading.Thread(target=work, name=f"ares-layer-{diff_id[7:19]}", daemon=True).start()
        try:
            await fill(pipe.write)
            pipe.close()
            stats = await asyncio.shield(result)
        except BaseException as exc:
            pipe.abort()
            failure = await _finished(result)  # the thread is done with ``dest`` once this returns
            if isinstance(failure, ImageError) and not isinstance(exc, asyncio.CancelledError):
                raise failure from None  # the extractor's reason, not the broken pipe it caused
            raise
        if stats.diff_id != diff_id:
            raise ImageError(
                f"layer {label}: its uncompressed content hashes to {stats.diff_id}, not to the diff_id "
                f"{diff_id} the image config names; the image is corrupt or forged — nothing was stored"
            )
        return stats

    async def remove(self, diff_id: str) -> list[str]:
        """Delete a stored layer (under its lock); returns what could not be removed."""
        name = layer_name(diff_id)
        path = self.path(diff_id)
        async with file_lock(self.root / "locks" / f"{name}.lock"):
            if not await asyncio.to_thread(os.path.lexists, path):
                return []
            # Unpublish first (rename away), so a half-deleted layer is never taken for a layer.
            doomed = self.root / "tmp" / f"{os.getpid()}-rm-{secrets.token_hex(4)}"
            await asyncio.to_thread(os.rename, path, doomed)
        return await asyncio.to_thread(remove_tree, doomed)


def _settle(future: asyncio.Future[ExtractStats], value: ExtractStats | BaseException) -> None:
    if future.done():
        return
    if isinstance(value, BaseException):
        future.set_exception(value)
    else:
        future.set_result(value)


async def _finished(result: asyncio.Future[ExtractStats]) -> BaseException | None:
    """Wait for the extractor thread to settle ``result`` (even if cancelled meanwhile); its error."""
    while not result.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait({result})
    return None if result.cancelled() else result.exception()
