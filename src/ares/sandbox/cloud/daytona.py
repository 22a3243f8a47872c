"""Daytona sandboxes behind the Sandbox protocol (``pip install 'ares[daytona]'``).

Credentials come from ``DAYTONA_API_KEY`` (or ``DaytonaOptions.api_key``). Every sandbox is created
*ephemeral* with an idle auto-stop: if the process that owns it dies, Daytona stops it after
``idle_stop_minutes`` without activity and deletes it on stopping, so it cannot bill forever.

Daytona's exec API merges stdout into stderr and takes no stdin, so every command runs under
``WRAPPER``, a constant bash script given the command as an argument: it reads stdin from a file
uploaded beforehand, sends the command's stderr to a file and prints it after a per-call marker.
The exec API's own ``timeout`` kills the command's process group on the server.
"""

from __future__ import annotations

import asyncio
import math
import shlex
import uuid
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from ares.errors import SandboxCrashedError, SandboxError, SandboxUnavailableError
from ares.sandbox.base import Resources, SandboxSpec
from ares.sandbox.cloud.base import ARES_LABELS, TIMEOUT_EXIT_CODE, CloudSandbox, Completed, suppress_and_log

try:
    from daytona import (
        AsyncDaytona,
        AsyncSandbox,
        CreateSandboxFromImageParams,
        CreateSandboxFromSnapshotParams,
        DaytonaAuthenticationError,
        DaytonaConfig,
        DaytonaError,
        DaytonaFileNotFoundError,
        DaytonaForbiddenError,
        DaytonaGoneError,
        DaytonaNotFoundError,
        DaytonaRateLimitError,
        DaytonaTimeoutError,
        Image,
    )
    from daytona import Resources as DaytonaResources
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("the Daytona backend needs the Daytona SDK: pip install 'ares[daytona]'") from exc

#: Runs ``$1`` with bash, stdin from the file ``$4`` (if given), stderr into the file ``$2``, then
#: prints the marker ``$3`` and the captured stderr. The exit code is the command's. The braces keep
#: bash's own report of a command killed by a signal ("Killed") out of the output.
WRAPPER = """\
cmd=$1 err=$2 mark=$3 input=$4
if [ -n "$input" ]; then exec 0<"$input"; rm -f -- "$input"; fi
{ bash -c "$cmd" 2>"$err"; } 2>/dev/null
rc=$?
printf %s "$mark"
cat -- "$err"
rm -f -- "$err"
exit "$rc"
"""


#: Bound, in seconds, on the clean-up command run after a command timed out.
CLEANUP_TIMEOUT_S = 10


@dataclass(frozen=True, slots=True)
class DaytonaOptions:
    """How ARES talks to Daytona; ``None`` means the SDK's default (mostly from ``DAYTONA_*`` env vars)."""

    api_key: str | None = None
    api_url: str | None = None
    target: str | None = None
    #: Snapshot used when the spec names no image (``None``: Daytona's default snapshot).
    snapshot: str | None = None
    #: OS user commands run as (``None``: the image's/snapshot's default user).
    os_user: str | None = None
    #: Stop (and, being ephemeral, delete) a sandbox after this many idle minutes.
    idle_stop_minutes: int = 15
    #: CIDRs the sandbox may reach when the spec asks for the network (``None``: everything).
    network_allow_list: str | None = None
    create_timeout_s: float = 300.0
    #: How long past a command's timeout to wait for an answer before declaring the sandbox dead.
    exec_grace_s: float = 30.0
    labels: Mapping[str, str] = field(default_factory=dict)


class DaytonaSandbox(CloudSandbox):
    """One Daytona sandbox; owns its own SDK client, closed on ``stop()``."""

    vendor = "Daytona"

    def __init__(self, spec: SandboxSpec | None = None, options: DaytonaOptions | None = None) -> None:
        self._options = options or DaytonaOptions()
        super().__init__(spec, exec_grace_s=self._options.exec_grace_s)
        self._client: AsyncDaytona | None = None
        self._remote: AsyncSandbox | None = None

    @property
    def sandbox_id(self) -> str | None:
        return None if self._remote is None else self._remote.id

    # ------------------------------------------------------------------ lifecycle
    async def _create(self) -> None:
        try:
            self._client = self._new_client()
        except DaytonaAuthenticationError as exc:
            raise SandboxUnavailableError(
                "Daytona credentials not found: set DAYTONA_API_KEY (or DAYTONA_JWT_TOKEN and "
                "DAYTONA_ORGANIZATION_ID), or pass DaytonaOptions(api_key=...)"
            ) from exc
        params = await self._create_params()
        try:
            with _translated("create a sandbox", creating=True):
                self._remote = await self._client.create(params, timeout=self._options.create_timeout_s)
        except SandboxError as exc:
            await self._delete_orphan(exc.__cause__)
            raise

    def _new_client(self) -> AsyncDaytona:
        opts = self._options
        if opts.api_key is None and opts.api_url is None and opts.target is None:
            return AsyncDaytona()  # all from DAYTONA_* variables
        config = DaytonaConfig(api_key=opts.api_key, api_url=opts.api_url, target=opts.target)
        with warnings.catch_warnings():
            # The SDK reads its deprecated ``server_url`` field whenever ``api_url`` is unset.
            warnings.filterwarnings(
                "ignore", message="`server_url` is deprecated", category=DeprecationWarning
            )
            return AsyncDaytona(config)

    async def _create_params(self) -> CreateSandboxFromImageParams | CreateSandboxFromSnapshotParams:
        spec, opts = self.spec, self._options
        common = {
            "env_vars": dict(spec.env),
            "labels": {**opts.labels, **ARES_LABELS},
            "network_block_all": not spec.network,
            "network_allow_list": opts.network_allow_list if spec.network else None,
            "auto_stop_interval": opts.idle_stop_minutes,
            "ephemeral": True,
            "os_user": opts.os_user,
        }
        resources = daytona_resources(spec.resources)
        if spec.image.dockerfile_dir is not None:
            dockerfile = spec.image.dockerfile_dir / "Dockerfile"
            if not await asyncio.to_thread(dockerfile.is_file):
                raise SandboxError(f"cannot build the sandbox image: {dockerfile} does not exist")
            image = await asyncio.to_thread(Image.from_dockerfile, dockerfile)
            return CreateSandboxFromImageParams(image=image, resources=resources, **common)
        if spec.image.name is not None:
            return CreateSandboxFromImageParams(image=spec.image.name, resources=resources, **common)
        if resources is not None:
            warnings.warn(
                "Daytona sizes snapshot sandboxes by their snapshot; the requested resources apply only "
                "to sandboxes built from an image (give the spec an image)",
                RuntimeWarning,
                stacklevel=2,
            )
        return CreateSandboxFromSnapshotParams(snapshot=opts.snapshot, **common)

    async def _delete_orphan(self, cause: BaseException | None) -> None:
        """A create that timed out may still have made a sandbox: delete it rather than leak it."""
        orphan = cause.sandbox_id if isinstance(cause, DaytonaTimeoutError) else None
        if orphan and self._client is not None:
            with suppress_and_log(f"deleting the Daytona sandbox {orphan} left by a timed out create"):
                await (await self._client.get(orphan)).delete()

    async def _delete(self) -> None:
        remote, self._remote = self._remote, None
        client, self._client = self._client, None
        try:
            if remote is not None:
                try:
                    with _translated(f"delete the sandbox {remote.id}"):
                        await remote.delete()
                except SandboxCrashedError:
                    pass  # already gone
        finally:
            if client is not None:
                await client.close()

    # ------------------------------------------------------------------ commands and files
    async def _run(
        self, cmd: str, *, cwd: str, env: Mapping[str, str], timeout_s: float | None, stdin: bytes | None
    ) -> Completed:
        remote = self._require_remote()
        token = uuid.uuid4().hex
        stdin_path = ""
        if stdin is not None:
            stdin_path = f"/tmp/.ares-{token}.stdin"
            await self._write_file(stdin_path, stdin)
        mark, err_path = f"<<ares-stderr-{token}>>", f"/tmp/.ares-{token}.err"
        command = shlex.join(["bash", "-c", WRAPPER, "bash", cmd, err_path, mark, stdin_path])
        # 0 means "no timeout" to the daemon; an omitted timeout would mean its default.
        server_timeout = 0 if timeout_s is None else max(1, math.ceil(timeout_s))
        with _translated("run a command"):
            try:
                response = await remote.process.exec(
                    command, cwd=cwd, env=dict(env) or None, timeout=server_timeout
                )
            except DaytonaTimeoutError:
                if timeout_s is None:
                    raise
                # The daemon killed the wrapper before it could remove its files.
                with suppress_and_log(f"removing {err_path} from the Daytona sandbox"):
                    leftovers = shlex.join(
                        ["rm", "-f", "--", err_path, *([stdin_path] if stdin_path else [])]
                    )
                    await remote.process.exec(leftovers, cwd="/", timeout=CLEANUP_TIMEOUT_S)
                return Completed(stdout="", stderr="", exit_code=TIMEOUT_EXIT_CODE, timed_out=True)
        stdout, found, stderr = response.result.rpartition(mark)
        if not found:  # the wrapper never ran (e.g. the cwd does not exist): all output is the daemon's
            stdout, stderr = response.result, ""
        exit_code = response.exit_code if response.exit_code is not None else -1
        return Completed(stdout=stdout, stderr=stderr, exit_code=exit_code)

    async def _write_file(self, path: str, data: bytes) -> None:
        with _translated(f"write {path}"):
            await self._require_remote().fs.upload_file(data, path)

    async def _read_file(self, path: str) -> bytes:
        with _translated(f"read {path}"):
            return await self._require_remote().fs.download_file(path)

    def _sibling(self) -> DaytonaSandbox:
        return DaytonaSandbox(self.spec, self._options)

    def _require_remote(self) -> AsyncSandbox:
        if self._remote is None:
            raise SandboxError("the Daytona sandbox is not running; call start() first")
        return self._remote


@dataclass(frozen=True, slots=True)
class DaytonaSandboxFactory:
    """A ``SandboxFactory`` for Daytona: ``factory(spec)`` is an unstarted ``DaytonaSandbox``."""

    options: DaytonaOptions = field(default_factory=DaytonaOptions)

    def __call__(self, spec: SandboxSpec) -> DaytonaSandbox:
        return DaytonaSandbox(spec, self.options)


def daytona_resources(resources: Resources) -> DaytonaResources | None:
    """ARES resources in Daytona's units (whole CPUs, GiB), rounded up; ``None`` when nothing is asked."""
    cpu = None if resources.cpus is None else math.ceil(resources.cpus)
    memory = None if resources.memory_mb is None else math.ceil(resources.memory_mb / 1024)
    disk = None if resources.storage_mb is None else math.ceil(resources.storage_mb / 1024)
    if cpu is None and memory is None and disk is None:
        return None
    return DaytonaResources(cpu=cpu, memory=memory, disk=disk)


@contextmanager
def _translated(action: str, *, creating: bool = False) -> Iterator[None]:
    """Map Daytona SDK errors to ARES errors, keeping the SDK's message and the action attempted."""
    try:
        yield
    except DaytonaError as exc:
        message = f"Daytona could not {action}: {exc}"
        if isinstance(exc, DaytonaAuthenticationError | DaytonaForbiddenError):
            raise SandboxUnavailableError(f"{message}. Check DAYTONA_API_KEY and its permissions.") from exc
        if isinstance(exc, DaytonaRateLimitError):
            raise SandboxUnavailableError(f"{message}. Wait, or raise your Daytona quota.") from exc
        if creating:
            raise SandboxUnavailableError(message) from exc
        if isinstance(exc, DaytonaNotFoundError | DaytonaGoneError) and not isinstance(
            exc, DaytonaFileNotFoundError
        ):
            raise SandboxCrashedError(f"{message}. The sandbox no longer exists.") from exc
        raise SandboxError(message) from exc
