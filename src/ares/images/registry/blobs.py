"""Blob downloads: streamed, resumed with Range, decompressed, and verified twice.

The compressed bytes must hash to the layer digest and the uncompressed tar to the config's diff_id;
hashing and decompression run in a worker thread so the event loop only moves bytes.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import TypeVar

import httpx

from ares.images.compression import LayerPipeline as _Pipeline
from ares.images.errors import ImageError
from ares.images.registry.manifest import Layer
from ares.images.registry.mediatypes import layer_compression
from ares.images.registry.reference import Reference
from ares.images.registry.transport import RegistryClient

ProgressCallback = Callable[[str, int, int], None]
"""Called with (blob digest, bytes done, bytes total) after each chunk."""
Sink = Callable[[bytes], Awaitable[None] | None]
"""Receives the (decompressed) stream in order; may be sync or async."""

T = TypeVar("T")
_RESUMES = 3


async def fetch_blob(
    client: RegistryClient,
    reference: Reference,
    layer: Layer,
    sink: Sink,
    *,
    progress: ProgressCallback | None = None,
) -> None:
    """Stream a blob as stored (still compressed) to `sink`, verifying its size and digest."""
    await _download(client, reference, layer, _Pipeline(None), sink, progress)


async def fetch_layer(
    client: RegistryClient,
    reference: Reference,
    layer: Layer,
    diff_id: str,
    sink: Sink,
    *,
    progress: ProgressCallback | None = None,
) -> None:
    """Stream a layer's uncompressed tar to `sink`; verify the blob digest and then `diff_id`.

    On ImageError the sink has received unverified bytes: discard what it wrote.
    """
    compression = layer_compression(layer.media_type)
    if compression is None:
        raise ImageError(
            f"{reference}: layer {layer.digest} has media type {layer.media_type!r}, not a layer tar"
        )
    pipeline = _Pipeline(compression)
    await _download(client, reference, layer, pipeline, sink, progress)
    got = "sha256:" + pipeline.diff.hexdigest()
    if got != diff_id:
        raise ImageError(
            f"{reference}: layer {layer.digest} decompresses to {got}, but the image config says {diff_id}; "
            "the image is inconsistent — re-push it or use another tag"
        )


async def fetch_layer_to_file(
    client: RegistryClient,
    reference: Reference,
    layer: Layer,
    diff_id: str,
    path: Path,
    *,
    progress: ProgressCallback | None = None,
) -> None:
    """Write a layer's verified uncompressed tar to `path`; nothing is left there if it fails."""
    partial = path.with_name(path.name + ".partial")
    handle = await asyncio.to_thread(partial.open, "wb")
    try:

        async def write(data: bytes) -> None:
            await asyncio.to_thread(handle.write, data)

        await fetch_layer(client, reference, layer, diff_id, write, progress=progress)
        await asyncio.to_thread(handle.close)
        await asyncio.to_thread(os.replace, partial, path)
    except BaseException:
        await asyncio.to_thread(handle.close)
        await asyncio.to_thread(partial.unlink, missing_ok=True)
        raise


async def gather_bounded(jobs: Iterable[Callable[[], Awaitable[T]]], limit: int = 3) -> list[T]:
    """Run job factories with at most `limit` in flight; results in job order, first error cancels all."""
    semaphore = asyncio.Semaphore(limit)

    async def run(job: Callable[[], Awaitable[T]]) -> T:
        async with semaphore:
            return await job()

    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(run(job)) for job in jobs]
    return [task.result() for task in tasks]


async def _download(
    client: RegistryClient,
    reference: Reference,
    layer: Layer,
    pipeline: _Pipeline,
    sink: Sink,
    progress: ProgressCallback | None,
) -> None:
    done = 0
    resumes = 0
    while True:
        headers = {"Range": f"bytes={done}-"} if done else {}
        try:
            async with client.stream(reference, f"blobs/{layer.digest}", headers) as response:
                # A registry that ignores Range replays from byte 0: skip what was already consumed.
                # Unsized chunks: bytes are consumed as they arrive, so a break loses nothing.
                skip = done if done and not _resumed_at(response, done) else 0
                async for chunk in response.aiter_bytes():
                    if skip:
                        cut = min(skip, len(chunk))
                        chunk, skip = chunk[cut:], skip - cut
                        if not chunk:
                            continue
                    if done + len(chunk) > layer.size:
                        raise ImageError(
                            f"{reference}: blob {layer.digest} is larger than the {layer.size} bytes its "
                            "manifest declares; the registry's copy is corrupt"
                        )
                    out = await asyncio.to_thread(pipeline.feed, chunk)
                    done += len(chunk)
                    if out:
                        await _deliver(sink, out)
                    if progress is not None:
                        progress(layer.digest, done, layer.size)
            break
        except httpx.TransportError as exc:  # the stream broke midway: resume from `done`
            resumes += 1
            if resumes > _RESUMES:
                raise ImageError(
                    f"{reference}: download of blob {layer.digest} broke {resumes} times (last: {exc!r}); "
                    "check the network and retry"
                ) from exc
    if done != layer.size:
        raise ImageError(
            f"{reference}: blob {layer.digest} ended after {done} of {layer.size} bytes; retry the pull"
        )
    tail = await asyncio.to_thread(pipeline.finish)
    if tail:
        await _deliver(sink, tail)
    got = "sha256:" + pipeline.blob.hexdigest()
    if got != layer.digest:
        raise ImageError(
            f"{reference}: blob {layer.digest} failed verification (its content hashes to {got}); the "
            "registry's copy is corrupt or was tampered with — discard the download and re-push the image"
        )
    if pipeline.broken is not None:
        raise ImageError(
            f"{reference}: blob {layer.digest} matches its digest but is not valid {pipeline.compression} "
            f"({pipeline.broken}); the image was pushed broken — rebuild and re-push it"
        )


def _resumed_at(response: httpx.Response, offset: int) -> bool:
    """True if the answer is a 206 whose Content-Range starts exactly at `offset`."""
    if response.status_code != 206:
        return False
    value = response.headers.get("content-range", "")
    try:
        start = int(value.split()[1].split("-")[0])
    except (IndexError, ValueError):
        return False
    return start == offset


async def _deliver(sink: Sink, data: bytes) -> None:
    result = sink(data)
    if inspect.isawaitable(result):
        await result
