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
from ares.images.registry.transport import EndpointUnavailable, RegistryClient

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
    max_uncompressed: int | None = None,
) -> None:
    """Stream a layer's uncompressed tar to `sink`; verify the blob digest and then `diff_id`.

    Mirrors from `client.config` are tried as for `resolve`. More than `max_uncompressed` bytes
    (default `client.limits.uncompressed_cap(layer.size)`) is an ImageError naming the layer. On
    ImageError the sink has received unverified bytes: discard what it wrote.
    """
    compression = layer_compression(layer.media_type)
    if compression is None:
        raise ImageError(
            f"{reference}: layer {layer.digest} has media type {layer.media_type!r}, not a layer tar"
        )
    cap = client.limits.uncompressed_cap(layer.size) if max_uncompressed is None else max_uncompressed
    pipeline = _Pipeline(compression, cap, f"{reference}: layer {layer.digest}")
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
    max_uncompressed: int | None = None,
) -> None:
    """Write a layer's verified uncompressed tar to `path`; nothing is left there if it fails."""
    partial = path.with_name(path.name + ".partial")
    handle = await asyncio.to_thread(partial.open, "wb")
    try:

        async def write(data: bytes) -> None:
            await asyncio.to_thread(handle.write, data)

        await fetch_layer(
            client, reference, layer, diff_id, write, progress=progress, max_uncompressed=max_uncompressed
        )
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
    """Stream the blob through `pipeline`, from the first endpoint that serves it.

    Blobs are content-addressed, so when a mirror fails midway the next endpoint continues from the
    same offset; the digest check at the end covers every byte whoever sent it.
    """
    done = [0]
    loop = asyncio.get_running_loop()

    def emit(data: bytes) -> None:  # in the worker thread: wait until the sink has taken it
        asyncio.run_coroutine_threadsafe(_deliver(sink, data), loop).result()

    pipeline.emit = emit

    async def attempt(at: Reference, last: bool) -> None:
        await _download_from(client, at, layer, pipeline, sink, progress, done, fail_fast=not last)

    await client.first_available(reference, attempt)
    await _verify(reference, layer, pipeline, sink, done[0])


async def _download_from(
    client: RegistryClient,
    reference: Reference,
    layer: Layer,
    pipeline: _Pipeline,
    sink: Sink,
    progress: ProgressCallback | None,
    state: list[int],
    *,
    fail_fast: bool,
) -> None:
    resumes = 0
    while True:
        done = state[0]
        headers = {"Range": f"bytes={done}-"} if done else {}
        try:
            async with client.stream(
                reference, f"blobs/{layer.digest}", headers, fail_fast=fail_fast
            ) as response:
                # A registry that ignores Range replays from byte 0: skip what was already consumed.
                # Unsized chunks: bytes are consumed as they arrive, so a break loses nothing.
                resumed = _resumed_at(response, done)
                skip = done if done and not resumed else 0
                declared = response.headers.get("content-length", "")
                if declared.isdigit() and int(declared) + (done if resumed else 0) > layer.size:
                    raise ImageError(_too_large(reference, layer, f"announces {declared} bytes"))
                async for chunk in response.aiter_bytes():
                    if skip:
                        cut = min(skip, len(chunk))
                        chunk, skip = chunk[cut:], skip - cut
                        if not chunk:
                            continue
                    if state[0] + len(chunk) > layer.size:
                        raise ImageError(_too_large(reference, layer, "sent more"))
                    out = await asyncio.to_thread(pipeline.feed, chunk)
                    state[0] += len(chunk)
                    if out:
                        await _deliver(sink, out)
                    if progress is not None:
                        progress(layer.digest, state[0], layer.size)
            return
        except httpx.TransportError as exc:  # the stream broke midway: resume from `done`
            resumes += 1
            if resumes > (0 if fail_fast else _RESUMES):
                raise EndpointUnavailable(
                    f"{reference}: download of blob {layer.digest} broke {resumes} times (last: {exc!r}); "
                    "check the network and retry"
                ) from exc


def _too_large(reference: Reference, layer: Layer, what: str) -> str:
    return (
        f"{reference}: blob {layer.digest} is larger than the {layer.size} bytes its manifest declares "
        f"({reference.registry} {what}); aborted — the registry's copy is corrupt or hostile"
    )


async def _verify(reference: Reference, layer: Layer, pipeline: _Pipeline, sink: Sink, done: int) -> None:
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
