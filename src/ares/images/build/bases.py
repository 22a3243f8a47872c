"""What ``FROM <name>`` starts from: a stand-in, an image tagged in the build cache, or a pulled image.

Resolution order for a name that is not a stand-in's own (``ares/host``, ``ares/host-python``,
``ares/debian:bookworm``) nor an earlier stage:

0. the Dockerfile an image dir of the build provides it from (``image_dirs``), built on first use;
1. an image built earlier and tagged with that name in the build cache;
2. the image pulled from its registry (``ares.images.pull.pull_image``, layers kept once per diff_id);
3. only if the pull failed because no registry could be reached *and* the user turned the fallback on,
   the stand-in that matches the name (``standins.standin_for``), recorded as a ``Substitution``.

The fallback is ``off`` unless ``ARES_IMAGE_FALLBACK`` (or the builder's ``fallback`` option) says:

* ``standin``: pull first; on an unreachable registry, serve the name from a stand-in (reported as a
  substitution; the registry host is then known out of reach for the rest of the process, ``reach``);
* ``offline``: do not contact a registry for names a stand-in can serve (air-gapped machines, the
  test suite); other names are still pulled.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from ares.errors import ImageBuildError
from ares.images.build.image_dirs import dockerfile_dir_for
from ares.images.build.reach import first_contact, registry_host, why_unreachable
from ares.images.build.reach import record as record_reach
from ares.images.build.remedy import FALLBACK_ENV, unpullable_remedy
from ares.images.build.standins import (
    BaseImage,
    UnsupportedBaseError,
    base_plan,
    canonical_name,
    debian_base_key,
    debian_root_ready,
    resolve_standin,
    standin_for,
)
from ares.images.build.steps import StepRunner
from ares.images.cache import ImageCache
from ares.images.config import ImageConfig
from ares.images.errors import ImageError
from ares.images.progress import BuildListener, ImageEvent, PullEvent, current_listener, emit
from ares.images.rootfs import RootfsPlan

FallbackMode = Literal["off", "standin", "offline"]
FALLBACK_MODES: tuple[FallbackMode, ...] = ("off", "standin", "offline")


class BaseUnavailableError(ImageBuildError):
    """``FROM`` names an image that could be neither found, pulled nor (if allowed) stood in for."""


def fallback_mode(option: str | None = None) -> FallbackMode:
    """The builder option if given, else ``$ARES_IMAGE_FALLBACK``, else ``off``."""
    value = (option if option is not None else os.environ.get(FALLBACK_ENV, "")).strip().lower() or "off"
    if value in ("0", "no", "false", "none"):
        value = "off"
    for mode in FALLBACK_MODES:
        if value == mode:
            return mode
    raise ImageBuildError(f"{FALLBACK_ENV}={value!r} is not one of {', '.join(FALLBACK_MODES)}")


@dataclass(frozen=True, slots=True)
class Substitution:
    """A named image that a stand-in served instead: what was asked for, what ran, and why."""

    requested: str
    served_by: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"requested": self.requested, "served_by": self.served_by, "reason": self.reason}

    @classmethod
    def from_dict(cls, data: dict[str, str]) -> Substitution:
        return cls(data["requested"], data["served_by"], data["reason"])

    def describe(self) -> str:
        return f"{self.requested} was served by the stand-in {self.served_by} ({self.reason})"


class PulledImage(Protocol):
    """What the builder needs of ``ares.images.pull.PulledImage``."""

    @property
    def name(self) -> str: ...
    @property
    def manifest_digest(self) -> str: ...
    @property
    def config(self) -> ImageConfig: ...
    @property
    def plan(self) -> RootfsPlan: ...


#: ``pull_image(name, *, cache=..., platform=..., listener=..., policy=...)``.
Puller = Callable[..., Awaitable[PulledImage]]


@dataclass(frozen=True, slots=True)
class ResolvedBase:
    """A base ready to build on. ``name`` is what the image record keeps to load it again: a stand-in
    name, a digest-pinned reference, or a tag of the build cache."""

    name: str
    key: str
    plan: RootfsPlan
    config: ImageConfig
    layers: tuple[str, ...] = ()
    setup: tuple[str, ...] = ()
    substitutions: tuple[Substitution, ...] = ()
    note: str | None = None


async def default_puller(name: str, *, platform: str | None = None, **options: Any) -> PulledImage:
    """``ares.images.pull.pull_image``, with ``platform`` given as ``os/arch[/variant]``."""
    try:
        from ares.images.pull import pull_image  # type: ignore[import-not-found, unused-ignore]
    except ImportError as exc:  # the layer store has not landed in this checkout
        raise ImageError(f"cannot pull {name}: this ARES has no image puller (ares.images.pull)") from exc
    return await pull_image(name, platform=parse_platform(platform), **options)  # type: ignore[no-any-return, unused-ignore]


def parse_platform(text: str | None) -> Any:
    """``linux/arm64/v8`` -> ``registry.Platform`` (None stays None: the host's platform)."""
    if not text:
        return None
    from ares.images.registry import Platform

    parts = text.strip().split("/")
    if len(parts) not in (2, 3) or not all(parts):
        raise ImageBuildError(f"--platform={text!r}: expected os/arch[/variant], e.g. linux/amd64")
    return Platform(parts[0], parts[1], parts[2] if len(parts) == 3 else None)


def unreachable(exc: BaseException) -> bool:
    """Whether a pull failed for want of a reachable registry (connect, DNS, proxy, timeout)."""
    import httpx

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, httpx.TransportError) and not isinstance(seen, httpx.ProtocolError):
            return True
        if isinstance(seen, ImportError):  # no puller at all: as good as no registry
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def one_line(text: str, limit: int = 300) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class BaseResolver:
    """Turns ``FROM`` names into ``ResolvedBase``s for one builder."""

    def __init__(
        self,
        cache: ImageCache,
        runner: StepRunner,
        *,
        puller: Puller,
        fallback: FallbackMode,
        load_tagged: Callable[[str], Awaitable[ResolvedBase | None]],
        on_debootstrap: Callable[[], None] | None = None,
        image_dirs: tuple[Path, ...] = (),
        build_provided: Callable[[str, Path, tuple[Path, ...]], Awaitable[ResolvedBase]] | None = None,
        listener: BuildListener | None = None,
    ) -> None:
        self.listener = listener
        self.cache = cache
        self.image_dirs = image_dirs
        self.build_provided = build_provided
        self.runner = runner
        self.puller = puller
        self.fallback = fallback
        self.load_tagged = load_tagged
        self.on_debootstrap = on_debootstrap

    async def resolve(
        self, name: str, *, platform: str | None = None, log: list[str] | None = None
    ) -> ResolvedBase:
        """The base for ``FROM name`` (``log`` collects what happened, for the build log)."""
        standin = resolve_standin(name)
        if standin is not None:
            return await self.from_standin(standin, log=log)
        provider = dockerfile_dir_for(name, self.image_dirs)
        if provider is not None and self.build_provided is not None:
            if log is not None:
                log.append(f"{name}: built from {provider}/Dockerfile (an image dir of this build)")
            return await self.build_provided(name, provider, self.image_dirs)
        tagged = await self.load_tagged(name)
        if tagged is not None:
            return tagged
        if canonical_name(name) == "scratch:latest":
            return await self.scratch()
        if self.fallback == "offline":
            try:
                standin, how = standin_for(name)
            except UnsupportedBaseError:
                pass
            else:
                why = f"{how}; {FALLBACK_ENV}=offline"
                return await self.from_standin(standin, log=log, requested=name, reason=why)
        return await self._pull(name, platform=platform, log=log)

    async def _pull(self, name: str, *, platform: str | None, log: list[str] | None) -> ResolvedBase:
        """Pull ``name``. With ``standin`` on and a stand-in that can serve it, an unreachable registry
        is a substitution (reported as one, learned once per process: ``reach``), not a failure;
        otherwise the error ends with what can make the image available (``remedy``)."""
        host = registry_host(name)
        standin = self._standin(name)
        held: list[ImageEvent] = []
        options: dict[str, Any] = {}
        if standin is not None:  # a failed pull that the stand-in then covers is not news
            options["listener"] = lambda event: self._hold_failure(event, held)
        try:
            async with first_contact(host if standin is not None else None):
                known = why_unreachable(host) if standin is not None else None
                if known is None:
                    pulled = await self.puller(
                        name, cache=self.cache, platform=platform, policy="missing", **options
                    )
        except (ImageError, ImageBuildError) as exc:
            offline = unreachable(exc)
            record_reach(host, reachable=not offline, why=one_line(str(exc), 200))
            if offline and standin is not None:
                return await self._substitute(name, standin, one_line(str(exc), 200), log)
            for event in held:
                emit(self.listener or current_listener(), event)
            if not offline:
                raise BaseUnavailableError(f"FROM {name}: {one_line(str(exc))}") from exc
            raise BaseUnavailableError(
                f"FROM {name}: cannot pull it, no registry is reachable ({one_line(str(exc), 200)})"
                + unpullable_remedy(name, fallback=self.fallback, host=host)
            ) from exc
        if known is not None and standin is not None:
            earlier = f"{host} out of reach, found earlier in this run"
            return await self._substitute(name, standin, earlier, log)
        record_reach(host, reachable=True)
        pinned = getattr(pulled, "reference", None) or pinned_name(name, pulled.manifest_digest)
        key = _base_key("pulled", pulled.manifest_digest, platform or "")
        if log is not None:
            log.append(f"pulled {pinned}")
        return ResolvedBase(pinned, key, pulled.plan, pulled.config)

    def _standin(self, name: str) -> tuple[BaseImage, str] | None:
        """The stand-in that would serve ``name`` if no registry answers, when the fallback allows one."""
        if self.fallback != "standin":
            return None
        try:
            return standin_for(name)
        except UnsupportedBaseError:
            return None

    def _hold_failure(self, event: ImageEvent, held: list[ImageEvent]) -> None:
        if isinstance(event, PullEvent) and event.layer is None and event.state == "failed":
            held.append(event)
        else:
            emit(self.listener or current_listener(), event)

    async def _substitute(
        self, name: str, standin: tuple[BaseImage, str], why: str, log: list[str] | None
    ) -> ResolvedBase:
        """``name`` served by ``standin`` because no registry is in reach (``why``), and said so."""
        base, how = standin
        message = f"no registry in reach ({why}), served by stand-in {base.name} ({how})"
        emit(self.listener or current_listener(), PullEvent(name, None, "substituted", message=message))
        reason = f"{how}; no registry reachable, {FALLBACK_ENV}={self.fallback}"
        return await self.from_standin(base, log=log, requested=name, reason=reason)

    async def from_standin(
        self,
        base: BaseImage,
        *,
        log: list[str] | None = None,
        requested: str | None = None,
        reason: str = "",
    ) -> ResolvedBase:
        if base.kind == "debian" and self.on_debootstrap is not None and not debian_root_ready(self.cache):
            self.on_debootstrap()
        base_key = base.key if base.kind == "host" else await debian_base_key(self.cache)
        plan = await base_plan(base, self.cache, self.runner, log)
        subs = (Substitution(canonical_name(requested), base.name, reason),) if requested else ()
        note = subs[0].describe() if subs else None
        return ResolvedBase(
            base.name, _base_key("base", base_key), plan, base.config, (), base.setup, subs, note
        )

    async def scratch(self) -> ResolvedBase:
        """``FROM scratch``: an empty root."""
        root = self.cache.root / "bases" / "scratch" / "rootfs"
        root.mkdir(parents=True, exist_ok=True)
        from ares.images.rootfs import OverlayMount

        plan = RootfsPlan((OverlayMount("/", (str(root),)),))
        return ResolvedBase("scratch", _base_key("scratch"), plan, ImageConfig())


def pinned_name(name: str, digest: str) -> str:
    """``ubuntu:24.04`` + digest -> ``ubuntu:24.04@sha256:...`` (a digest already there is kept)."""
    return name if "@" in name else f"{name}@{digest}"


def _base_key(*parts: str) -> str:
    import hashlib
    import json

    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()
