"""Reading verified bytes out of local files: small documents whole, layers chunk by chunk.

The OCI layout and the docker archive differ only in how a blob is opened (a file in a directory, a
byte range of a tar); both read the same way here, so the two sources check digests identically and
keep file reads and decompression off the event loop.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable
from typing import Protocol

from ares.images.compression import LayerPipeline
from ares.images.errors import ImageError
from ares.images.registry.limits import Limits
from ares.images.registry.mediatypes import Compression
from ares.images.sources.base import ChunkSink, LayerProgress, SourceLayer

CHUNK = 1 << 20
#: Manifests, indexes and configs are small; a bigger one is broken or hostile.
MAX_DOCUMENT = 8 * 1024 * 1024


class BlobFile(Protocol):
    """What a source opens a blob as: a file, or a byte range of an archive."""

    def read(self, size: int = -1, /) -> bytes: ...

    def close(self) -> None: ...


Opener = Callable[[], BlobFile]
"""Opens a blob for reading from its first byte; runs in a worker thread."""


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def read_document(open_blob: Opener, digest: str, size: int | None, what: str) -> bytes:
    """Read a small blob whole and check it against `digest` (and `size` when the descriptor has one).

    Blocking: call it from a worker thread.
    """
    if size is not None and size > MAX_DOCUMENT:
        raise ImageError(f"{what} {digest} declares {size} bytes, more than {MAX_DOCUMENT}; refusing it")
    handle = open_blob()
    try:
        raw = handle.read(MAX_DOCUMENT + 1)
    finally:
        handle.close()
    if len(raw) > MAX_DOCUMENT:
        raise ImageError(f"{what} {digest} is larger than {MAX_DOCUMENT} bytes; refusing it")
    got = sha256_digest(raw)
    if got != digest or (size is not None and len(raw) != size):
        raise ImageError(
            f"{what} {digest} failed verification (its {len(raw)} bytes hash to {got}); the copy is "
            "corrupt or was tampered with — export the image again"
        )
    return raw


async def stream_layer(
    open_blob: Opener,
    layer: SourceLayer,
    compression: Compression,
    sink: ChunkSink,
    progress: LayerProgress | None,
    where: str,
    limits: Limits | None = None,
) -> None:
    """Feed `layer`'s uncompressed tar to `sink`, then check the stored digest, size and diff_id.

    Each chunk is read and decompressed in one worker-thread hop; a chunk that inflates enormously is
    handed to the sink piece by piece from the worker (which waits for each), and the uncompressed
    total is capped as for registry layers (``Limits.uncompressed_cap``), so a decompression bomb in
    a file is refused like one from a registry. On ImageError the sink has received unverified
    bytes: the caller discards what it wrote.
    """
    limits = limits or Limits()
    stored = layer.size if layer.size is not None else 0
    pipeline = LayerPipeline(compression, limits.uncompressed_cap(stored), f"{where}: layer {layer.digest}")
    pipeline.emit = _emitter(sink, asyncio.get_running_loop())
    handle = await asyncio.to_thread(open_blob)
    try:
        done = await _pump(handle, pipeline, layer, sink, progress, where)
    finally:
        await asyncio.to_thread(handle.close)
    _verify_layer(layer, pipeline, compression, done, where)


def _emitter(sink: ChunkSink, loop: asyncio.AbstractEventLoop) -> Callable[[bytes], None]:
    """The pipeline's ``emit``: from the worker thread, hand a piece to `sink` on `loop` and wait for it."""

    def emit(data: bytes) -> None:
        asyncio.run_coroutine_threadsafe(sink(data), loop).result()

    return emit


async def _pump(
    handle: BlobFile,
    pipeline: LayerPipeline,
    layer: SourceLayer,
    sink: ChunkSink,
    progress: LayerProgress | None,
    where: str,
) -> int:
    """Read the whole blob through `pipeline` into `sink`; returns how many stored bytes it read."""

    def step() -> tuple[int, bytes]:
        data = handle.read(CHUNK)
        if not data:
            return 0, pipeline.finish()
        return len(data), pipeline.feed(data)

    done = 0
    while True:
        count, out = await asyncio.to_thread(step)
        done += count
        if layer.size is not None and done > layer.size:
            raise ImageError(
                f"{where}: layer {layer.digest} is larger than the {layer.size} bytes its manifest "
                "declares; the copy is corrupt or was tampered with"
            )
        if out:
            await sink(out)
        if count == 0:
            return done
        if progress is not None:
            progress(done, layer.size)


def _verify_layer(
    layer: SourceLayer, pipeline: LayerPipeline, compression: Compression, done: int, where: str
) -> None:
    """Check a fully read layer: its declared size, its digest, its compression, then its diff_id."""
    if layer.size is not None and done != layer.size:
        raise ImageError(
            f"{where}: layer {layer.digest} ended after {done} of the {layer.size} bytes its manifest "
            "declares; the copy is truncated — export the image again"
        )
    got = "sha256:" + pipeline.blob.hexdigest()
    if got != layer.digest:
        raise ImageError(
            f"{where}: layer {layer.digest} failed verification (its content hashes to {got}); the copy "
            "is corrupt or was tampered with — export the image again"
        )
    if pipeline.broken is not None:
        raise ImageError(
            f"{where}: layer {layer.digest} matches its digest but is not valid {compression} "
            f"({pipeline.broken}); the image was exported broken — rebuild it"
        )
    diff = "sha256:" + pipeline.diff.hexdigest()
    if diff != layer.diff_id:
        raise ImageError(
            f"{where}: layer {layer.digest} decompresses to {diff}, but the image config says "
            f"{layer.diff_id}; the image is inconsistent — export it again"
        )
