"""The container under a ``DockerSandbox``, and the SDK calls on it.

Creating it in a thread so that a cancelled ``start`` leaves no container behind, removing it, the
state checks every operation begins with (running, or halted with its files still readable), and
``_api``: each SDK call made off the event loop, a vanished container or engine turned into a
``SandboxCrashedError`` that also removes what is left of the sandbox.

A base of ``DockerSandbox`` (``sandbox.py``), which sets every attribute declared here; its own
methods stay there, so that tracing wraps them (``StartStopContext`` wraps a class's own methods).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import docker
import docker.errors

from ares.errors import SandboxCrashedError, SandboxError
from ares.sandbox.base import BindMount, SandboxSpec
from ares.sandbox.docker import janitor, transfer
from ares.sandbox.docker.client import api_message, run_blocking
from ares.sandbox.docker.containers import create_container
from ares.sandbox.docker.engine import DockerEngine
from ares.sandbox.docker.execution import API_ERRORS
from ares.sandbox.docker.trusted import TRUSTED_PID1, TrustedShell

log = logging.getLogger("ares.sandbox.docker.sandbox")  # the sandbox's log
T = TypeVar("T")


class CreateAttempt:
    """One start's handshake with its create thread, so a cancelled start leaves no container."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.abandoned = False


class ContainerCalls:
    """The sandbox's container: made, checked, called and removed (see the module docstring)."""

    spec: SandboxSpec
    _engine: DockerEngine
    _client: docker.DockerClient | None
    _container: str | None
    _frozen: bool
    _gone: str | None
    _trusted: TrustedShell | None
    _binds: tuple[BindMount, ...]

    if TYPE_CHECKING:

        async def stop(self) -> None: ...

    async def _create_container(self, image: str) -> None:
        """Create the container of ``image`` (not started) in a thread; see ``_create``."""
        attempt = CreateAttempt()
        try:
            await run_blocking(self._create, image, attempt)
        except asyncio.CancelledError:
            # The create goes on in its thread. Whichever side comes second removes the container,
            # without needing this event loop to still run.
            with attempt.lock:
                attempt.abandoned = True
                orphan, self._container = self._container, None
            if orphan is not None:
                threading.Thread(target=self._remove_blocking, args=(orphan,), daemon=True).start()
            raise

    def _create(self, image: str, attempt: CreateAttempt) -> None:
        """Create the container (not started), hand it to the janitor and to this sandbox. Blocking."""
        assert self._client is not None
        if self._trusted is None:
            container = create_container(self._client, self._engine, self.spec, image, binds=self._binds)
        else:
            shell = self._trusted.argv("-p", "-c")  # -p: nothing from $BASH_ENV, SHELLOPTS...
            container = create_container(self._client, self._engine, self.spec, image, shell, TRUSTED_PID1)
        with attempt.lock:
            if not attempt.abandoned:
                self._container = container
                return
        self._remove_blocking(container)

    def _remove_blocking(self, container: str) -> None:
        assert self._client is not None
        with contextlib.suppress(docker.errors.NotFound):
            try:
                self._client.api.remove_container(container, force=True, v=True)
            except API_ERRORS as exc:  # the janitor retries at exit
                log.warning("could not remove sandbox container %s: %s", container[:12], api_message(exc))
                return
        janitor.untrack_container(container)

    async def _halt(self) -> str:
        container = self._require_container()
        if not self._frozen:
            assert self._client is not None
            self._frozen = True
            await self._api("stop the sandbox container", self._client.api.stop, container, timeout=0)
        return container

    def _require_container(self) -> str:
        """The container, running or halted (its files can still be read)."""
        if self._container is None:
            raise SandboxError(self._gone or "the sandbox is not running; call start() first")
        return self._container

    def _require_running(self) -> str:
        if self._container is None:
            raise SandboxError(self._gone or "the sandbox is not running; call start() first")
        if self._frozen:
            raise SandboxError(
                "the sandbox was halted (halt, fork_frozen, fork_outputs); its processes are gone"
            )
        return self._container

    async def _api(self, what: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Call the SDK off the loop; a vanished container or engine becomes SandboxCrashedError."""
        try:
            return await run_blocking(fn, *args, **kwargs)
        except docker.errors.NotFound as exc:
            raise await self._crash(f"cannot {what}: the container is gone ({api_message(exc)})") from exc
        except docker.errors.APIError as exc:
            if exc.status_code == 409:  # "container is not running" / "is paused"
                raise await self._crash(f"cannot {what}: {api_message(exc)}") from exc
            raise SandboxError(f"cannot {what}: {api_message(exc)}") from exc
        except API_ERRORS as exc:
            raise await self._crash(f"cannot {what}: lost the Docker engine ({exc})") from exc

    async def _crash(self, reason: str) -> SandboxCrashedError:
        """Record why the sandbox died, remove what is left of it, and return the error to raise."""
        self._gone = reason
        with contextlib.suppress(SandboxError):
            await self.stop()
        self._gone = reason
        return SandboxCrashedError(reason)

    async def _get_archive(self, path: str, what: str) -> tuple[bytes, str]:
        container = self._require_container()  # the archive API works on a halted container too
        assert self._client is not None
        return await transfer.get_archive(self._client.api, container, path, what)

    async def _remove_owned_image(self, image: str) -> None:
        """Remove the temporary image this sandbox was made of (a ``fork_frozen`` fork's)."""
        assert self._client is not None
        with contextlib.suppress(docker.errors.NotFound):
            try:
                await run_blocking(self._client.api.remove_image, image, force=True)
            except API_ERRORS as exc:
                log.warning("could not remove temporary image %s: %s", image[:19], api_message(exc))
            else:
                janitor.untrack_image(image)
