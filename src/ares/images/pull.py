"""Pull an image into the layer store: resolve it, fetch its missing layers in parallel, record it.

Policies (as podman's ``--pull``):

- ``missing`` (default): a reference already in the store is used as it is, *without asking the
  registry* (a tag is not re-resolved; pass ``always`` to follow a moved tag). Anything not stored is
  resolved and its missing layers are fetched.
- ``always``: the manifest is always resolved again; layers already stored are still never fetched,
  so pulling an unchanged image again moves only its manifest and config.
- ``never``: only the store is used (fully offline); an image not in it is an ImageError.

Layers are keyed by diff_id, so a layer shared by many images, or by an archive and a registry copy
of one image, is downloaded and stored once. Pulls hold the store lock shared: a concurrent
``prune`` waits for them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from ares.images.cache import ImageCache
from ares.images.config import ImageConfig
from ares.images.errors import ImageError
from ares.images.progress import BuildListener, PullEvent, PullState, current_listener, emit
from ares.images.registry import Platform, RegistryClient, gather_bounded, parse_reference
from ares.images.rootfs import RootfsPlan
from ares.images.sources import ImageSource, SourceImage, SourceLayer, open_source, split_transport
from ares.images.store import ImageStore, PulledRecord

PullPolicy = Literal["missing", "always", "never"]
#: A layer's progress is reported at most every this many bytes (and when it ends).
_REPORT_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class PulledImage:
    """A pulled image, ready to mount: its plan stacks the store's layer dirs."""

    name: str  # as asked for
    reference: str  # canonical and pinned: ``registry/repo:tag@sha256:...`` or ``oci:/path:tag@sha256:...``
    manifest_digest: str
    transport: str
    config: ImageConfig
    plan: RootfsPlan
    diff_ids: tuple[str, ...]
    size_bytes: int  # content bytes of its layers on disk
    bytes_downloaded: int  # stored (compressed) bytes moved by this pull
    layers_downloaded: int


def image_store(cache: ImageCache | None = None) -> ImageStore:
    """The pull store of ``cache`` (default: the user's cache): ``<cache root>/store``."""
    return ImageStore((cache or ImageCache()).root / "store")


def canonical_name(name: str) -> tuple[str, str | None]:
    """(the name a pull is recorded under, the manifest digest it pins if any)."""
    transport, target, tag = split_transport(name)
    if transport == "registry":
        ref = parse_reference(target)
        return ref.name + (f":{ref.tag}" if ref.tag else ""), ref.digest
    path, digest = target, None
    if "@sha256:" in (tag or ""):
        tag, digest = (tag or "").split("@", 1)
    return f"{transport}:{os.path.abspath(path)}" + (f":{tag}" if tag else ""), digest


async def pull_image(
    name: str,
    *,
    cache: ImageCache | None = None,
    platform: Platform | None = None,
    listener: BuildListener | None = None,
    policy: PullPolicy = "missing",
    concurrency: int = 3,
    client: RegistryClient | None = None,
) -> PulledImage:
    """Make ``name`` available from the store (see the module doc for ``policy``).

    ``name`` is a registry reference, ``oci:PATH[:TAG]`` or ``docker-archive:PATH``. Progress goes to
    ``listener``, else to the one installed with ``progress.build_listener``. ``client`` is a
    registry client to use (the caller closes it); by default one is made for this pull.
    """
    if policy not in ("missing", "always", "never"):
        raise ImageError(f"unknown pull policy {policy!r}: use missing, always or never")
    store = image_store(cache)
    key, pinned = canonical_name(name)
    report = listener or current_listener()
    started = time.monotonic()
    if policy != "always":
        record = store.get(pinned) if pinned else store.find(key)
        if record is not None and store.complete(record):
            await store.touch(record)
            pulled = _pulled(store, name, record, 0, 0)
            emit(
                report, PullEvent(key, None, "cached", layers=len(record.diff_ids), elapsed_s=_since(started))
            )
            return pulled
        if policy == "never":
            raise ImageError(
                f"image {name!r} is not in the image store {store.root} and the pull policy is 'never'; "
                "pull it first (ares images pull) or allow pulling"
            )
    emit(report, PullEvent(key, None, "resolving"))
    source = open_source(name, platform=platform, client=client)
    try:
        image = await source.resolve()
        async with store.lock(shared=True):
            moved, fetched = await _fetch_layers(store, source, image, key, report, concurrency)
            record = await _record(store, image, key, pinned)
    except BaseException as exc:
        emit(report, PullEvent(key, None, "failed", elapsed_s=_since(started), message=str(exc)[:300]))
        raise
    finally:
        await source.aclose()
    state: PullState = "done" if fetched else "cached"
    event = PullEvent(key, None, state, moved, None, len(image.layers), fetched, _since(started))
    emit(report, event)
    return _pulled(store, name, record, moved, fetched)


async def _fetch_layers(
    store: ImageStore,
    source: ImageSource,
    image: SourceImage,
    key: str,
    report: BuildListener | None,
    concurrency: int,
) -> tuple[int, int]:
    """Ensure every layer is stored; (stored bytes moved, layers fetched)."""

    def job(layer: SourceLayer) -> Callable[[], Awaitable[tuple[int, bool]]]:
        async def run() -> tuple[int, bool]:
            moved = 0
            reported = -_REPORT_BYTES

            def progress(done: int, total: int | None) -> None:
                nonlocal moved, reported
                moved = done
                if done - reported >= _REPORT_BYTES or done == total:
                    reported = done
                    state: PullState = "extracting" if done == total else "downloading"
                    emit(report, PullEvent(key, layer.digest, state, done, total))

            async def fill(sink: Callable[[bytes], Awaitable[None]]) -> None:
                emit(report, PullEvent(key, layer.digest, "downloading", 0, layer.size))
                await source.read_layer(layer, sink, progress)

            try:
                info, made = await store.layers.ensure(layer.diff_id, fill, label=layer.digest)
            except BaseException:
                emit(report, PullEvent(key, layer.digest, "failed", moved, layer.size))
                raise
            if made and moved == 0:  # a source that reports no progress: count what it delivered
                moved = layer.size if layer.size is not None else info.tar_bytes
            done = moved if made else 0
            emit(report, PullEvent(key, layer.digest, "done" if made else "cached", done, layer.size))
            return done, made

        return run

    unique = list({layer.diff_id: layer for layer in image.layers}.values())
    try:
        results = await gather_bounded([job(layer) for layer in unique], limit=max(1, concurrency))
    except BaseExceptionGroup as group:  # one layer failed and the others were cancelled: say why
        raise _first(group) from None
    return sum(done for done, _ in results), sum(made for _, made in results)


async def _record(store: ImageStore, image: SourceImage, key: str, pinned: str | None) -> PulledRecord:
    config = dict(image.config)
    platform = "/".join(str(config[k]) for k in ("os", "architecture", "variant") if config.get(k))
    diff_ids = tuple(layer.diff_id for layer in image.layers)
    sizes = {d: (i.size_bytes if (i := store.layers.info(d)) else 0) for d in set(diff_ids)}
    now = time.time()
    record = PulledRecord(
        manifest_digest=image.manifest_digest,
        name=key,
        transport=image.transport,
        config_digest=image.config_digest,
        config=config,
        diff_ids=diff_ids,
        layer_digests=tuple(layer.digest for layer in image.layers),
        platform=platform,
        size_bytes=sum(sizes.values()),
        created=now,
        last_used=now,
    )
    # A digest pull names no tag: the record is found by its digest, no reference points at it.
    return await store.save(record, () if pinned else (key,))


def _pulled(store: ImageStore, name: str, record: PulledRecord, moved: int, fetched: int) -> PulledImage:
    pinned = f"{record.name}@{record.manifest_digest}"
    return PulledImage(
        name=name,
        reference=pinned,
        manifest_digest=record.manifest_digest,
        transport=record.transport,
        config=ImageConfig.from_oci(record.config),
        plan=store.plan(record),
        diff_ids=record.diff_ids,
        size_bytes=record.size_bytes,
        bytes_downloaded=moved,
        layers_downloaded=fetched,
    )


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first real error in ``group`` (ImageErrors first), not the cancellations it caused."""
    leaves: list[BaseException] = []
    stack: list[BaseException] = [group]
    while stack:
        exc = stack.pop(0)
        if isinstance(exc, BaseExceptionGroup):
            stack[:0] = list(exc.exceptions)
        else:
            leaves.append(exc)
    for kinds in (ImageError, Exception, BaseException):
        for leaf in leaves:
            if isinstance(leaf, kinds):
                return leaf
    return group


def _since(started: float) -> float:
    return time.monotonic() - started
