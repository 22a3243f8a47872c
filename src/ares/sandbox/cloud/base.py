"""What every cloud backend shares: lifecycle bookkeeping, deadlines, and file transfer through tar.

A vendor adapter only creates and deletes its remote sandbox, runs one command, and moves one file's
bytes. Uploads, downloads, the workdir and the client-side deadline are built here on top of those
four operations, so every vendor behaves the same way and files move exactly like in the local
sandbox: packed and unpacked by ``tar`` inside the sandbox, unpacked on the host with tarfile's
``data`` filter.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import shutil
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import ClassVar

from ares.errors import SandboxError, SandboxTimeoutError
from ares.images.identity import ImageIdentity
from ares.sandbox.base import IMAGE_WORKDIR, ExecResult, FileMap, SandboxSpec
from ares.sandbox.capabilities import Capability, CapabilityError
from ares.sandbox.cloud.outputs import CloudFork, fork_with_outputs
from ares.sandbox.files import extract_tar, tar_files
from ares.sandbox.lifecycle import StartStopContext

log = logging.getLogger(__name__)

#: Exit code reported for a command killed at its timeout (SIGKILL, as in the local sandbox).
TIMEOUT_EXIT_CODE = 137
#: Labels (Daytona) / metadata (E2B) put on every remote sandbox, so leftovers can be found and deleted.
ARES_LABELS: Mapping[str, str] = {"created-by": "ares"}


@dataclass(frozen=True, slots=True)
class Completed:
    """What the remote reported for one command (the base class adds the duration)."""

    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool = False


class CloudSandbox(StartStopContext, ABC):
    """A remote sandbox behind a vendor SDK; subclasses implement the six ``_`` operations.

    The verifier's fork is a fresh remote sandbox of the same spec holding only the task's outputs
    (``fork_outputs``; see ``cloud/outputs.py``). Full mode, halts, snapshots and loopback listeners
    are not available on cloud backends."""

    #: Vendor name used in error messages.
    vendor: ClassVar[str]
    capabilities = frozenset({Capability.OUTPUTS_FORK, Capability.ARCHIVE})

    def __init__(self, spec: SandboxSpec | None, *, exec_grace_s: float) -> None:
        self.spec = spec or SandboxSpec()
        self._exec_grace_s = exec_grace_s
        self._running = False

    # ------------------------------------------------------------------ vendor operations
    @abstractmethod
    async def _create(self) -> None:
        """Create and start the remote sandbox (or raise SandboxUnavailableError)."""

    @abstractmethod
    async def _delete(self) -> None:
        """Delete the remote sandbox and release the client. Must be idempotent."""

    @abstractmethod
    async def _run(
        self, cmd: str, *, cwd: str, env: Mapping[str, str], timeout_s: float | None, stdin: bytes | None
    ) -> Completed:
        """Run ``cmd`` with bash; a timeout must be enforced (and the command killed) remotely."""

    @abstractmethod
    async def _write_file(self, path: str, data: bytes) -> None: ...

    @abstractmethod
    def _sibling(self) -> CloudSandbox:
        """A new, unstarted sandbox of this one's spec and options (the verifier's fresh fork)."""

    @abstractmethod
    async def _read_file(self, path: str) -> bytes: ...

    # ------------------------------------------------------------------ lifecycle
    @property
    def running(self) -> bool:
        return self._running

    async def start(self) -> None:
        if self._running:
            raise SandboxError("the sandbox is already running")
        try:
            if self.spec.workdir == IMAGE_WORKDIR:  # remote images do not say theirs: the root
                self.spec = replace(self.spec, workdir="/")
            await self._create()
            self._running = True
            self.image_identity = ImageIdentity(self.spec.image.name, "cloud")
            workdir = shlex.quote(self.spec.workdir)
            result = await self.exec(f"mkdir -p -- {workdir}", cwd="/")
            if not result.ok:
                raise SandboxError(
                    f"cannot create the workdir {self.spec.workdir} in the {self.vendor} sandbox: "
                    f"{_detail(result)}. Choose a workdir the sandbox user may create."
                )
        except BaseException:
            try:
                await self.stop()
            except SandboxError:
                log.exception("cleaning up a %s sandbox that failed to start", self.vendor)
            raise

    async def stop(self) -> None:
        """Delete the remote sandbox. Safe to call twice, and after a failed start."""
        self._running = False
        await self._delete()

    # ------------------------------------------------------------------ commands
    async def exec(
        self,
        cmd: str,
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        """Run ``cmd`` with bash in ``cwd`` (default: the workdir); the remote kills it at ``timeout_s``.

        If the remote does not answer within ``timeout_s`` plus the grace period, the sandbox is
        deleted and SandboxCrashedError raised: an unresponsive remote must not hang an episode.
        """
        if not self._running:
            raise SandboxError(f"the {self.vendor} sandbox is not running; call start() first")
        if timeout_s is not None and timeout_s <= 0:
            raise SandboxError(f"timeout_s must be positive, got {timeout_s}")
        started = time.monotonic()
        limit = None if timeout_s is None else timeout_s + self._exec_grace_s
        try:
            async with asyncio.timeout(limit) as deadline:
                done = await self._run(
                    cmd, cwd=cwd or self.spec.workdir, env=dict(env or {}), timeout_s=timeout_s, stdin=stdin
                )
        except TimeoutError as exc:
            if not deadline.expired():
                raise
            with suppress_and_log(f"deleting an unresponsive {self.vendor} sandbox"):
                await self.stop()
            raise SandboxTimeoutError(
                f"the {self.vendor} sandbox did not answer within {limit:g}s of running {cmd[:200]!r}; "
                "it was deleted"
            ) from exc
        return ExecResult(
            stdout=done.stdout,
            stderr=done.stderr,
            exit_code=done.exit_code,
            timed_out=done.timed_out,
            duration_s=time.monotonic() - started,
        )

    # ------------------------------------------------------------------ the verifier's fork
    async def fork_outputs(self, outputs: Sequence[str] | None, *, fresh: Sequence[str] = ()) -> CloudFork:
        """A *started* fresh sandbox of this one's spec with only ``outputs`` carried over from here
        and each ``fresh`` dir empty; the caller stops it. ``None`` (full mode) is refused."""
        if outputs is None:
            raise CapabilityError(
                f"the {self.vendor} backend cannot give the tests the agent's whole filesystem (full "
                "mode): only output paths can be carried to a fresh sandbox; use verifier_mode "
                "'outputs', or 'in-place' to run the tests in the agent's own sandbox"
            )
        if not self._running:
            raise SandboxError(f"the {self.vendor} sandbox is not running; call start() first")
        return await fork_with_outputs(self, self._sibling(), outputs, fresh)

    # ------------------------------------------------------------------ files
    async def upload(self, src: Path | FileMap, dest: str) -> None:
        """Copy a host file (to the path ``dest``), or a host dir or a FileMap (into the dir ``dest``)."""
        if isinstance(src, Path) and await asyncio.to_thread(src.is_file):
            target = PurePosixPath(dest)
            archive = await asyncio.to_thread(tar_files, src, target.name)
            directory = str(target.parent)
        else:
            archive = await asyncio.to_thread(tar_files, src)
            directory = dest
        staged = _staging_path()
        await self._write_file(staged, archive)
        quoted_dir, quoted_tar = shlex.quote(directory), shlex.quote(staged)
        result = await self.exec(
            f"mkdir -p -- {quoted_dir} && tar -xf {quoted_tar} -C {quoted_dir} && rm -f -- {quoted_tar}",
            cwd="/",
        )
        if not result.ok:
            with suppress_and_log(f"removing {staged} from the {self.vendor} sandbox"):
                await self.exec(f"rm -f -- {quoted_tar}", cwd="/")
            raise SandboxError(f"upload to {dest} failed: {_detail(result)}")

    async def archive(self, path: str) -> bytes:
        """A tar of the sandbox file or directory ``path``, made inside and read through the file API."""
        where, staged = PurePosixPath(path), _staging_path()
        quoted_tar, parent = shlex.quote(staged), shlex.quote(str(where.parent))
        name = shlex.quote(where.name)
        try:
            result = await self.exec(f"tar -cf {quoted_tar} -C {parent} {name}", cwd="/")
            if not result.ok:
                raise SandboxError(f"download of {path} failed: {_detail(result)}")
            return await self._read_file(staged)
        finally:
            if self._running:
                with suppress_and_log(f"removing {staged} from the {self.vendor} sandbox"):
                    await self.exec(f"rm -f -- {quoted_tar}", cwd="/")

    async def download(self, src: str, dest: Path) -> None:
        """Copy a sandbox file or directory to the host path ``dest``."""
        path = PurePosixPath(src)
        archive = await self.archive(src)
        staging = dest.parent / f".{dest.name}.ares-download"
        try:
            await asyncio.to_thread(extract_tar, archive, staging)
            await asyncio.to_thread(os.replace, staging / path.name, dest)
        finally:
            await asyncio.to_thread(shutil.rmtree, staging, ignore_errors=True)

    async def read_file(self, path: str) -> bytes:
        if not self._running:
            raise SandboxError(f"the {self.vendor} sandbox is not running; call start() first")
        return await self._read_file(path)


def _staging_path() -> str:
    return f"/tmp/.ares-{uuid.uuid4().hex}.tar"


def _detail(result: ExecResult) -> str:
    return (result.stderr.strip() or result.stdout.strip() or f"exit code {result.exit_code}")[-2000:]


@contextlib.contextmanager
def suppress_and_log(what: str) -> Iterator[None]:
    """Best-effort cleanup steps: log a failure instead of masking the error being handled."""
    try:
        yield
    except Exception:
        log.warning("%s failed", what, exc_info=True)
