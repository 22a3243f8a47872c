"""The local image builder: a Dockerfile becomes a stack of cached overlay layers.

Each instruction is one cache entry keyed by its parent's key, the instruction text, the build
arguments in scope and, for COPY/ADD, the hash of what it reads. RUN, COPY, ADD and WORKDIR run in a
sandbox (network on) on top of the layers so far, through the ``StepRunner``; the sandbox's diff
becomes the layer. The other instructions only change the image config. Editing a line rebuilds from
that line on. ``FROM`` resolution (stand-ins, tagged images, pulls, the fallback) is in ``bases``,
stages in ``stages``, the run itself in ``session``.

Progress is reported as ``BuildEvent``s (see ``progress``) to the builder's ``on_event`` listener,
else to the listener installed for the calling context; nothing is printed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import replace
from pathlib import Path

from ares.errors import ImageBuildError
from ares.images.build.bases import (
    BaseResolver,
    FallbackMode,
    Puller,
    ResolvedBase,
    Substitution,
    default_puller,
    fallback_mode,
)
from ares.images.build.context import BuildContext
from ares.images.build.dockerfile import DockerfileError, parse_dockerfile
from ares.images.build.model import BuildStep, LocalImage
from ares.images.build.session import BuildSession
from ares.images.build.stages import split_stages
from ares.images.build.steps import StepRunner
from ares.images.cache import ImageCache, ImageRecord
from ares.images.progress import BuildListener, context_label

__all__ = ["BUILD_PASSTHROUGH", "BuildStep", "ImageBuilder", "LocalImage"]

#: Host variables a RUN step inherits at build time only: package mirrors and proxies (Docker passes
#: the proxy ones as predefined build args). They are never part of the image or of cache keys.
BUILD_PASSTHROUGH = (
    "http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
    "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST", "PIP_CERT", "PIP_DEFAULT_TIMEOUT",
    "UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "npm_config_registry",
)  # fmt: skip
DEFAULT_STEP_TIMEOUT_S = 1800.0
#: The image-dir images being built for a ``FROM`` in this context, outermost first (catches cycles).
_providing: ContextVar[tuple[str, ...]] = ContextVar("ares_providing_images", default=())


class ImageBuilder:
    """Builds Dockerfiles into the cache. One instance may serve many concurrent builds.

    ``on_log`` receives every build log line; ``on_event`` every ``BuildEvent`` (default: the
    listener installed with ``progress.build_listener`` where ``build()`` is called, if any).
    ``fallback`` (``off``/``standin``/``offline``; default ``$ARES_IMAGE_FALLBACK``, else ``off``)
    says when stand-in bases may serve named images (see ``bases``); ``puller`` replaces
    ``ares.images.pull.pull_image``.
    """

    def __init__(
        self,
        cache: ImageCache | None = None,
        *,
        runner: StepRunner,
        on_log: Callable[[str], None] | None = None,
        on_event: BuildListener | None = None,
        build_env: Mapping[str, str] | None = None,
        step_timeout_s: float = DEFAULT_STEP_TIMEOUT_S,
        fallback: FallbackMode | str | None = None,
        puller: Puller | None = None,
    ) -> None:
        self.cache = cache or ImageCache()
        self.runner = runner
        self.on_log = on_log
        self.on_event = on_event
        if build_env is None:
            build_env = {k: v for k, v in os.environ.items() if k in BUILD_PASSTHROUGH}
        self.build_env = dict(build_env)
        self.step_timeout_s = step_timeout_s
        self.fallback: FallbackMode = fallback_mode(fallback)
        self.puller = puller or default_puller

    def resolver(
        self, on_debootstrap: Callable[[], None] | None = None, image_dirs: tuple[Path, ...] = ()
    ) -> BaseResolver:
        """Resolves ``FROM`` names for this builder (``on_debootstrap``: told before a slow base;
        ``image_dirs``: Dockerfiles that provide named images, see ``image_dirs``)."""
        return BaseResolver(
            self.cache,
            self.runner,
            puller=self.puller,
            fallback=self.fallback,
            load_tagged=self._tagged,
            on_debootstrap=on_debootstrap,
            image_dirs=image_dirs,
            build_provided=self._provided,
            listener=self.on_event,
        )

    async def build(
        self,
        context_dir: Path,
        *,
        dockerfile: str = "Dockerfile",
        build_args: Mapping[str, str] | None = None,
        tags: tuple[str, ...] = (),
        target: str | None = None,
        image_dirs: tuple[Path, ...] = (),
    ) -> LocalImage:
        """Build ``context_dir/dockerfile`` (up to stage ``target``, default the last) and tag it;
        a ``FROM`` an image of ``image_dirs`` provides builds that first (see ``image_dirs``)."""
        path = context_dir / dockerfile
        try:
            text = path.read_text()
        except OSError as exc:
            raise DockerfileError(f"cannot read {path}: {exc.strerror}") from exc
        return await self._build(
            text, context_dir, label=context_label(context_dir), args=build_args, tags=tags, target=target,
            source=str(path.resolve()), image_dirs=image_dirs,
        )  # fmt: skip

    async def from_name(self, name: str, *, image_dirs: tuple[Path, ...] = ()) -> LocalImage:
        """A tagged image from the cache, or a base image by name (built from ``image_dirs``, pulled,
        or a stand-in)."""
        record = self.cache.find(name)
        if record is not None and not image_dirs:
            return await self.load(record)
        return await self.build_text(f"FROM {name}\n", label=name, image_dirs=image_dirs)

    async def build_text(
        self,
        text: str,
        *,
        label: str = "inline",
        context_dir: Path | None = None,
        target: str | None = None,
        image_dirs: tuple[Path, ...] = (),
    ) -> LocalImage:
        context = context_dir or Path("/nonexistent-context")
        return await self._build(
            text, context, label=label, args=None, tags=(), target=target, source=label, image_dirs=image_dirs
        )

    async def _build(
        self,
        text: str,
        context_dir: Path,
        *,
        label: str,
        args: Mapping[str, str] | None,
        tags: tuple[str, ...],
        target: str | None,
        source: str,
        image_dirs: tuple[Path, ...] = (),
    ) -> LocalImage:
        build_args = dict(args or {})
        staged = split_stages(parse_dockerfile(text), build_args)
        log_path = self.cache.log_path(label)
        with open(log_path, "w") as log:  # noqa: ASYNC230 - a local log file
            session = BuildSession(self, BuildContext(context_dir), build_args, log, label, image_dirs)
            image = await session.run(staged, target, source=source, tags=tags)
        return replace(image, log_path=log_path)

    async def load(self, record: ImageRecord) -> LocalImage:
        """Rebuild the plan of a cached image record (bases are per process, layers are shared)."""
        base = await self.resolver().resolve(record.base)
        plan, config = base.plan, base.config
        for key in record.layers:
            layer = self.cache.layer(key)
            if layer is None:
                raise ImageBuildError(f"image {record.key[:12]} lost layer {key[:12]}; rebuild it")
            if layer.has_fs:
                plan = plan.stacked_on(self.cache.layer_dir(key) / "fs")
            config = layer.config
        subs = tuple(Substitution.from_dict(s) for s in record.substitutions)
        return LocalImage(record.key, record.base, plan, config, substitutions=subs)

    async def _tagged(self, name: str) -> ResolvedBase | None:
        """``FROM <tag>`` of an image built earlier: its plan, config and layers as a base."""
        record = self.cache.find(name)
        if record is None or (name not in record.tags and name != record.key):
            return None
        return await self._as_base(record)

    async def _provided(self, name: str, context_dir: Path, image_dirs: tuple[Path, ...]) -> ResolvedBase:
        """``FROM name`` that ``context_dir/Dockerfile`` of an image dir provides: built (or found
        cached, layer by layer), tagged ``name``, as a base."""
        chain = _providing.get()
        if name in chain:
            cycle = " -> ".join((*chain, name))
            raise ImageBuildError(f"FROM {name}: the image dirs build it from itself ({cycle}); fix the FROM")
        token = _providing.set((*chain, name))
        try:
            image = await self.build(context_dir, tags=(name,), image_dirs=image_dirs)
        finally:
            _providing.reset(token)
        record = self.cache.find(image.key)
        if record is None:
            raise ImageBuildError(f"{context_dir}: built {name} but its image record is gone; build again")
        return await self._as_base(record)

    async def _as_base(self, record: ImageRecord) -> ResolvedBase:
        image = await self.load(record)
        return ResolvedBase(
            record.base, record.key, image.plan, image.config, record.layers, (), image.substitutions
        )
