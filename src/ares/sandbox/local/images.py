"""From a task's ImageSpec to a built local image, once per process.

Sandboxes of the same image share one build: the first ``start()`` builds (or loads from the cache)
and every later one reuses the result, so a reset costs a sandbox start, never a build.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from ares.images.build.builder import ImageBuilder, LocalImage
from ares.images.cache import ImageCache
from ares.images.identity import ImageIdentity
from ares.images.progress import BuildListener
from ares.sandbox.base import ImageSpec, SandboxSpec
from ares.sandbox.local.build_steps import LocalStepRunner
from ares.sandbox.local.sandbox import LocalSandbox

_builder: ImageBuilder | None = None
_resolved: dict[ImageSpec, asyncio.Future[LocalImage]] = {}


def local_builder(
    cache: ImageCache | None = None,
    *,
    on_log: Callable[[str], None] | None = None,
    on_event: BuildListener | None = None,
    build_env: Mapping[str, str] | None = None,
    **options: Any,
) -> ImageBuilder:
    """An image builder whose RUN/COPY steps run in local sandboxes."""
    return ImageBuilder(
        cache, runner=LocalStepRunner(), on_log=on_log, on_event=on_event, build_env=build_env, **options
    )


def image_sandbox(image: LocalImage, spec: SandboxSpec | None = None) -> LocalSandbox:
    """An unstarted sandbox of ``image`` (working dir from the image unless ``spec`` says)."""
    spec = spec or SandboxSpec(workdir=image.config.workdir or "/workspace")
    return LocalSandbox(spec, plan=image.plan, image_config=image.config)


def default_builder() -> ImageBuilder:
    global _builder
    if _builder is None:
        _builder = local_builder()
    return _builder


def set_default_builder(builder: ImageBuilder | None) -> None:
    """Use another cache or log sink for images resolved by sandboxes (None: back to the default)."""
    global _builder
    _builder = builder
    _resolved.clear()


def identity_of(spec: ImageSpec, image: LocalImage) -> ImageIdentity:
    """What ``spec`` turned into: a Dockerfile build (keyed by its build key), or a named image,
    pulled (its manifest digest, from the pinned base the builder records) or served by a stand-in."""
    served_by = image.served_by
    if spec.dockerfile_dir is not None:
        requested = spec.name or str(spec.dockerfile_dir)
        return ImageIdentity(requested, "build", image.key, image.base, served_by)
    assert spec.name is not None
    _, _, digest = image.base.partition("@")
    if served_by is not None or not digest:
        return ImageIdentity(spec.name, "build", image.key, image.base, served_by)
    source = next((t for t in ("oci", "docker-archive") if image.base.startswith(f"{t}:")), "registry")
    return ImageIdentity(spec.name, source, digest, image.base)


async def resolve_local_image(image: ImageSpec) -> LocalImage:
    """Build ``image.dockerfile_dir`` (or fetch ``image.name``), sharing one build between callers."""
    future = _resolved.get(image)
    stale = future is not None and (
        (future.done() and (future.cancelled() or future.exception() is not None))
        or (not future.done() and future.get_loop() is not asyncio.get_running_loop())
    )
    if future is None or stale:
        future = asyncio.ensure_future(_resolve(image))
        _resolved[image] = future
    return await asyncio.shield(future)


async def _resolve(image: ImageSpec) -> LocalImage:
    builder = default_builder()
    if image.dockerfile_dir is not None:
        tags = (image.name,) if image.name else ()
        return await builder.build(image.dockerfile_dir, tags=tags, image_dirs=image.image_dirs)
    assert image.name is not None
    return await builder.from_name(image.name, image_dirs=image.image_dirs)
