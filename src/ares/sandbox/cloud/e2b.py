"""E2B sandboxes behind the Sandbox protocol (``pip install 'ares[e2b]'``).

Credentials come from ``E2B_API_KEY`` (or ``E2BOptions.api_key``). A sandbox lives at most
``lifetime_s`` seconds (E2B kills it then), so one whose owner crashed cannot bill forever.

E2B runs *templates* built ahead of time; it cannot build a Dockerfile when a sandbox starts. A spec
with a Dockerfile therefore needs ``E2BOptions.templates`` to map that Dockerfile directory (or the
image name) to a template built from it. Template CPU and memory are fixed when the template is
built, so ``Resources`` cannot be applied per sandbox.

Commands get separate stdout/stderr and real stdin from envd; ``timeout_s`` becomes the stream
deadline, at which envd kills the command, and ARES kills it too if the deadline fires client-side.
envd runs every command in a login shell, whose profile may reset variables such as PATH, so each
command first sets the spec's and the call's variables again.
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import time
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

import httpx

from ares.errors import SandboxCrashedError, SandboxError, SandboxUnavailableError
from ares.sandbox.base import Resources, SandboxSpec
from ares.sandbox.cloud.base import ARES_LABELS, TIMEOUT_EXIT_CODE, CloudSandbox, Completed, suppress_and_log

try:
    from e2b import (
        AsyncSandbox,
        AuthenticationException,
        CommandExitException,
        FileNotFoundException,
        InvalidArgumentException,
        NotFoundException,
        RateLimitException,
        SandboxException,
        SandboxNotFoundException,
        SandboxNotRunningException,
        SandboxUnreachableException,
        ServiceBusyException,
        TimeoutException,
    )
    from e2b.sandbox_async.commands.command_handle import AsyncCommandHandle
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("the E2B backend needs the E2B SDK: pip install 'ares[e2b]'") from exc

#: stdin is sent in pieces of this size (one envd RPC each).
STDIN_CHUNK = 256 * 1024
#: Bound on killing a command, which must not hang an exec that is already over its deadline.
KILL_TIMEOUT_S = 10.0
#: Exit code for a command envd could not start (bad cwd, ...), as a shell reports "cannot execute".
CANNOT_START_EXIT_CODE = 126
#: Names a shell can export (others still reach the command through envd, just not re-exported).
SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True, slots=True)
class E2BOptions:
    """How ARES talks to E2B; ``None`` means the SDK's default (mostly from ``E2B_*`` env vars)."""

    api_key: str | None = None
    domain: str | None = None
    #: Image name or Dockerfile directory -> E2B template name or ID built from it.
    templates: Mapping[str, str] = field(default_factory=dict)
    #: Template used when the spec names no image (``None``: E2B's default ``base`` template).
    default_template: str | None = None
    #: E2B kills the sandbox this long after creation (at most 1 h on Hobby, 24 h on Pro plans).
    lifetime_s: int = 3600
    #: User commands and file operations run as; root matches the other ARES backends.
    user: str = "root"
    request_timeout_s: float | None = None
    #: How long past a command's timeout to wait for an answer before declaring the sandbox dead.
    exec_grace_s: float = 30.0
    metadata: Mapping[str, str] = field(default_factory=dict)


class E2BSandbox(CloudSandbox):
    """One E2B sandbox."""

    vendor = "E2B"

    def __init__(self, spec: SandboxSpec | None = None, options: E2BOptions | None = None) -> None:
        self._options = options or E2BOptions()
        super().__init__(spec, exec_grace_s=self._options.exec_grace_s)
        self._remote: AsyncSandbox | None = None

    @property
    def sandbox_id(self) -> str | None:
        return None if self._remote is None else self._remote.sandbox_id

    # ------------------------------------------------------------------ lifecycle
    async def _create(self) -> None:
        opts = self._options
        api_key = opts.api_key or os.environ.get("E2B_API_KEY")
        if not api_key:
            raise SandboxUnavailableError(
                "E2B credentials not found: set E2B_API_KEY, or pass E2BOptions(api_key=...)"
            )
        template = self._template()
        if self.spec.resources != Resources():
            warnings.warn(
                "E2B sizes sandboxes by their template; the requested resources are not applied "
                "(build the template with the CPU and memory the task needs)",
                RuntimeWarning,
                stacklevel=2,
            )
        with _translated("create a sandbox", creating=True):
            self._remote = await AsyncSandbox.create(
                template=template,
                timeout=opts.lifetime_s,
                metadata={**opts.metadata, **ARES_LABELS},
                envs=dict(self.spec.env),
                allow_internet_access=self.spec.network,
                api_key=api_key,
                domain=opts.domain,
                request_timeout=opts.request_timeout_s,
            )

    def _template(self) -> str | None:
        image, templates = self.spec.image, self._options.templates
        if image.name is not None and image.name in templates:
            return templates[image.name]
        if image.dockerfile_dir is not None:
            wanted = os.path.abspath(image.dockerfile_dir)
            for key, template in templates.items():
                if os.path.abspath(key) == wanted:
                    return template
            raise SandboxError(
                f"E2B cannot build {image.dockerfile_dir}/Dockerfile when a sandbox starts: build an "
                "E2B template from it once and map it with E2BOptions(templates="
                f"{{{str(image.dockerfile_dir)!r}: '<template name or ID>'}})"
            )
        return image.name or self._options.default_template

    async def _delete(self) -> None:
        remote, self._remote = self._remote, None
        if remote is not None:
            with _translated(f"delete the sandbox {remote.sandbox_id}"):
                await remote.kill()  # False (not an error) when it is already gone

    # ------------------------------------------------------------------ commands and files
    async def _run(
        self, cmd: str, *, cwd: str, env: Mapping[str, str], timeout_s: float | None, stdin: bytes | None
    ) -> Completed:
        remote = self._require_remote()
        started = time.monotonic()
        with _translated("run a command"):
            try:
                handle = await remote.commands.run(
                    _reexported({**self.spec.env, **env}, cmd),
                    background=True,
                    envs=dict(env) or None,
                    user=self._options.user,
                    cwd=cwd,
                    stdin=stdin is not None,
                    timeout=timeout_s or 0,  # envd kills the command at this deadline; 0: none
                    request_timeout=self._options.request_timeout_s,
                )
            except InvalidArgumentException as exc:
                return Completed(
                    stdout="", stderr=f"cannot start the command: {exc}", exit_code=CANNOT_START_EXIT_CODE
                )
            except TimeoutException as exc:
                if timeout_s is None or _sandbox_lost(exc):
                    raise
                return Completed(stdout="", stderr="", exit_code=TIMEOUT_EXIT_CODE, timed_out=True)
            try:
                return await self._finish(handle, stdin, timeout_s, started)
            except BaseException:
                await self._kill(handle)
                await handle.disconnect()
                raise

    async def _finish(
        self, handle: AsyncCommandHandle, stdin: bytes | None, timeout_s: float | None, started: float
    ) -> Completed:
        if stdin is not None:
            for offset in range(0, len(stdin), STDIN_CHUNK):
                await handle.send_stdin(stdin[offset : offset + STDIN_CHUNK])
            await handle.close_stdin()
        remaining = None if timeout_s is None else max(timeout_s - (time.monotonic() - started), 0.0)
        try:
            # Our own deadline: the SDK's stream deadline is lost once the handle's task reads the
            # stream (connectrpc arms it in the task that read the first event, on Python 3.11).
            async with asyncio.timeout(remaining):
                result = await handle.wait()
        except CommandExitException as exc:
            if timeout_s is not None and time.monotonic() - started >= timeout_s:
                return _timed_out(handle)  # envd killed it at the deadline
            return Completed(stdout=exc.stdout, stderr=exc.stderr, exit_code=exc.exit_code)
        except (TimeoutError, TimeoutException) as exc:
            if timeout_s is None or (isinstance(exc, TimeoutException) and _sandbox_lost(exc)):
                raise
            await self._kill(handle)  # the client-side deadline fired before envd's
            return _timed_out(handle)
        return Completed(stdout=result.stdout, stderr=result.stderr, exit_code=result.exit_code)

    async def _kill(self, handle: AsyncCommandHandle) -> None:
        with suppress_and_log(f"killing the E2B command {handle.pid}"):
            await self._require_remote().commands.kill(handle.pid, request_timeout=KILL_TIMEOUT_S)

    async def _write_file(self, path: str, data: bytes) -> None:
        with _translated(f"write {path}"):
            await self._require_remote().files.write(
                path, data, user=self._options.user, use_octet_stream=True
            )

    async def _read_file(self, path: str) -> bytes:
        with _translated(f"read {path}"):
            return bytes(
                await self._require_remote().files.read(path, format="bytes", user=self._options.user)
            )

    def _sibling(self) -> E2BSandbox:
        return E2BSandbox(self.spec, self._options)

    def _require_remote(self) -> AsyncSandbox:
        if self._remote is None:
            raise SandboxError("the E2B sandbox is not running; call start() first")
        return self._remote


@dataclass(frozen=True, slots=True)
class E2BSandboxFactory:
    """A ``SandboxFactory`` for E2B: ``factory(spec)`` is an unstarted ``E2BSandbox``."""

    options: E2BOptions = field(default_factory=E2BOptions)

    def __call__(self, spec: SandboxSpec) -> E2BSandbox:
        return E2BSandbox(spec, self.options)


def _reexported(env: Mapping[str, str], cmd: str) -> str:
    """``cmd`` preceded by an export of ``env``: envd's ``bash -l`` sources the profile (Debian's resets
    PATH) after envd has set the variables, and the task's values must win as on every backend. The
    export shares the command's first line, so bash reports the command's lines as written."""
    exports = " ".join(
        f"{name}={shlex.quote(value)}" for name, value in env.items() if SHELL_NAME.fullmatch(name)
    )
    return f"export {exports}; {cmd}" if exports else cmd


def _sandbox_lost(exc: TimeoutException) -> bool:
    """E2B reports a sandbox that died or cannot be reached as kinds of timeout."""
    return isinstance(exc, SandboxNotRunningException | SandboxUnreachableException)


def _timed_out(handle: AsyncCommandHandle) -> Completed:
    return Completed(
        stdout=handle.stdout or "", stderr=handle.stderr or "", exit_code=TIMEOUT_EXIT_CODE, timed_out=True
    )


@contextmanager
def _translated(action: str, *, creating: bool = False) -> Iterator[None]:
    """Map E2B SDK errors to ARES errors, keeping the SDK's message and the action attempted."""
    try:
        yield
    except (SandboxException, AuthenticationException, ServiceBusyException, httpx.HTTPError) as exc:
        message = f"E2B could not {action}: {exc}"
        if isinstance(exc, AuthenticationException):
            raise SandboxUnavailableError(f"{message}. Check E2B_API_KEY.") from exc
        if isinstance(exc, RateLimitException | ServiceBusyException):
            raise SandboxUnavailableError(f"{message}. Wait, or raise your E2B quota.") from exc
        if creating:
            raise SandboxUnavailableError(message) from exc
        if isinstance(exc, SandboxNotFoundException | SandboxNotRunningException) or (
            isinstance(exc, NotFoundException) and not isinstance(exc, FileNotFoundException)
        ):
            raise SandboxCrashedError(f"{message}. The sandbox no longer exists.") from exc
        raise SandboxError(message) from exc
