"""The Sandbox seam: where a code agent's commands run, whatever the backend."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self, runtime_checkable

from ares.images.identity import ImageIdentity
from ares.sandbox.addons import AddonLayer

#: Files given by content: relative path -> bytes (or text, written as UTF-8).
FileMap = Mapping[str, bytes | str]


@dataclass(frozen=True, slots=True)
class ExecResult:
    """What one command did. A timed out command has been killed with its whole process tree.

    ``limit_hit`` names the resource limit that stopped or hampered the command ("memory", "pids",
    "disk", "cpu_time"), so a sandbox's limits are reported, not just felt; "output" means the output
    was longer than the sandbox keeps (its middle was dropped), which does not make the command fail.
    """

    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool
    duration_s: float
    limit_hit: str | None = None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and self.limit_hit in (None, "output")


@dataclass(frozen=True, slots=True)
class Resources:
    """Resource requests from a task; None means "no limit requested"."""

    cpus: float | None = None
    memory_mb: int | None = None
    storage_mb: int | None = None
    pids: int | None = None


@dataclass(frozen=True, slots=True)
class ImageSpec:
    """Where a sandbox's filesystem comes from: a named image and/or a Dockerfile directory.

    ``None`` for both means the backend's default base (the host's system dirs for the local sandbox).
    ``image_dirs``: directories of image Dockerfiles the build may need (``FROM [...]/NAME[:TAG]``
    builds ``<dir>/NAME/Dockerfile`` on first use; ``ares.images.build.image_dirs``; local backend).
    """

    name: str | None = None
    dockerfile_dir: Path | None = None
    image_dirs: tuple[Path, ...] = ()


@dataclass(frozen=True, slots=True)
class SeccompPolicy:
    """The syscall filter of a sandbox: ``default`` (Docker's default semantics) or ``unconfined``.

    ``allow`` names syscalls the default profile denies that a task needs (e.g. ``perf_event_open``
    for a profiling task); each is then allowed with any arguments.
    """

    profile: str = "default"
    allow: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DiffSummary:
    """What a sandbox changed outside some paths: how many changes, and the first ones (sorted walk).

    A change is a file, symlink or special file written, a deletion (``" (deleted)"``), a new empty
    directory or a directory whose old content was replaced (``" (replaced)"``). ``truncated``: the
    walk stopped at its bound, so ``count`` is a lower bound.
    """

    count: int = 0
    paths: tuple[str, ...] = ()
    truncated: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "paths": list(self.paths), "truncated": self.truncated}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DiffSummary:
        return cls(int(data["count"]), tuple(data["paths"]), bool(data["truncated"]))


@dataclass(frozen=True, slots=True)
class BindMount:
    """A host directory shown inside a sandbox at ``target`` (read-only unless ``read_only=False``)."""

    source: Path
    target: str
    read_only: bool = True


#: A ``SandboxSpec.workdir`` (and ``Task.workdir``) meaning "the image's own working dir": its
#: WORKDIR / config WorkingDir, else ``/``. Backends replace it with the real path when they start.
IMAGE_WORKDIR = ""


@dataclass(frozen=True, slots=True)
class SandboxSpec:
    """Everything a backend needs to start a sandbox for one episode (``workdir``: see IMAGE_WORKDIR)."""

    image: ImageSpec = field(default_factory=ImageSpec)
    resources: Resources = field(default_factory=Resources)
    network: bool = False
    workdir: str = "/workspace"
    env: Mapping[str, str] = field(default_factory=dict)
    hostname: str = "sandbox"
    seccomp: SeccompPolicy = field(default_factory=SeccompPolicy)
    #: Read-only add-ons over the image (an installed agent CLI); see ``ares.sandbox.addons``.
    addons: tuple[AddonLayer, ...] = ()


@runtime_checkable
class Sandbox(Protocol):
    """An isolated machine for one episode. ``exec`` never hangs: timeouts kill the process tree.

    A sandbox may declare what it can do beyond these methods in ``capabilities`` (a frozenset of
    ``ares.sandbox.capabilities.Capability``; read it with ``declared()``); one that does not
    declares nothing."""

    spec: SandboxSpec

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def exec(
        self,
        cmd: str,
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult: ...

    async def upload(self, src: Path | FileMap, dest: str) -> None:
        """Copy a host file/dir, or in-memory files, to ``dest`` (a directory for FileMap/dirs)."""
        ...

    async def download(self, src: str, dest: Path) -> None:
        """Copy a sandbox file or directory to the host path ``dest``."""
        ...

    async def read_file(self, path: str) -> bytes: ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class SandboxFactory(Protocol):
    """Creates (not starts) a sandbox for a spec."""

    def __call__(self, spec: SandboxSpec) -> Sandbox: ...


def image_identity(sandbox: object) -> ImageIdentity | None:
    """Which image ``sandbox`` reports running: backends set ``image_identity`` when they start; a
    sandbox that reports nothing (a user's own double) gives None. Anything else is an error."""
    value = getattr(sandbox, "image_identity", None)
    if value is not None and not isinstance(value, ImageIdentity):
        raise TypeError(f"{type(sandbox).__name__}.image_identity must be an ImageIdentity, got {value!r}")
    return value
