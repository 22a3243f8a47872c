"""Configuration and the shared engine connection of the docker backend."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import docker

from ares.sandbox.addons import AddonLayer
from ares.sandbox.base import ImageSpec
from ares.sandbox.docker import janitor
from ares.sandbox.docker.client import connect, resolve_base_url, run_blocking
from ares.sandbox.docker.images import ImageResolver

#: The Debian bookworm image (with python3) that ``podman-engine.sh image`` imports.
DEFAULT_IMAGE = "localhost/ares-debian:bookworm"


@dataclass(frozen=True, slots=True)
class DockerConfig:
    """How the docker backend reaches its engine, builds images and makes containers."""

    #: Engine URL (``unix:///run/podman/podman.sock``, ``tcp://host:2375``); None: $DOCKER_HOST,
    #: else the Docker socket, else Podman's.
    base_url: str | None = None
    #: Image for specs that name neither an image nor a Dockerfile dir.
    default_image: str = DEFAULT_IMAGE
    #: Timeout of every API call except the exec streams and builds (which have their own).
    api_timeout_s: float = 120.0
    build_args: Mapping[str, str] = field(default_factory=dict)
    #: Network of RUN steps during builds. Podman's default build network may not reach package
    #: mirrors; the host network always does. None keeps the engine's choice.
    build_network: str | None = "host"
    build_timeout_s: float = 1800.0
    #: How long a command may outlive its timeout once the host has tried to kill it; then the sandbox
    #: is declared crashed and removed.
    exec_grace_s: float = 15.0
    #: Network of sandboxes whose spec asks for the network (others get "none").
    network_mode: str = "bridge"
    #: Storage limits need overlay on xfs with pquota (or similar). If the engine cannot enforce one,
    #: raise (True) or start without it and log a warning once (False).
    strict_storage: bool = False


class DockerEngine:
    """One engine connection (made on first use) and image resolver, shared by many sandboxes."""

    def __init__(
        self, config: DockerConfig | None = None, *, client: docker.DockerClient | None = None
    ) -> None:
        self.config = config or DockerConfig()
        self._client = client
        self._images: ImageResolver | None = None
        self._lock = threading.Lock()
        #: None until a storage limit was tried; then whether the engine accepted it.
        self.storage_supported: bool | None = None
        #: Whether the engine takes a generated seccomp profile as a path only (``seccomp_files``).
        self.seccomp_as_file = False

    @property
    def base_url(self) -> str:
        return resolve_base_url(self.config.base_url)

    def client_blocking(self) -> docker.DockerClient:
        """The client, connecting on first use. Blocking: for worker threads and scripts."""
        with self._lock:
            if self._client is None:
                self._client = connect(self.config.base_url, self.config.api_timeout_s)
            return self._client

    async def client(self) -> docker.DockerClient:
        return self._client if self._client is not None else await run_blocking(self.client_blocking)

    async def images(self) -> ImageResolver:
        if self._images is None:
            self._images = ImageResolver(
                await self.client(),
                default_image=self.config.default_image,
                build_args=self.config.build_args,
                build_network=self.config.build_network,
                build_timeout_s=self.config.build_timeout_s,
            )
        return self._images

    async def resolve(self, image: ImageSpec, addons: Sequence[AddonLayer] = ()) -> str:
        """The engine's id of the image a spec asks for (building it if needed), with ``addons``
        (an installed agent) in a derived image on top."""
        images = await self.images()
        image_id = await images.resolve(image)
        return await images.with_addons(image_id, addons) if addons else image_id

    @property
    def built(self) -> list[str]:
        """Image tags this engine object built (cache hits are not listed)."""
        return self._images.built if self._images is not None else []

    def connector(self) -> janitor.Connector:
        """A factory of fresh clients for the janitor (see janitor.Connector)."""
        base_url, timeout = self.config.base_url, min(self.config.api_timeout_s, 30.0)
        return _Connector(base_url, timeout)

    def close(self) -> None:
        with self._lock:
            client, self._client, self._images = self._client, None, None
        if client is not None:
            client.close()


@dataclass(frozen=True, slots=True)
class _Connector:
    """Hashable, so the janitor connects once per engine when it cleans up many containers."""

    base_url: str | None
    timeout_s: float

    def __call__(self) -> docker.DockerClient:
        return connect(self.base_url, self.timeout_s)


_default: DockerEngine | None = None
_default_lock = threading.Lock()


def default_engine() -> DockerEngine:
    """The engine of sandboxes made without one: DockerConfig() defaults, shared process-wide."""
    global _default
    with _default_lock:
        if _default is None:
            _default = DockerEngine()
        return _default
