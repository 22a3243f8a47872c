"""What a sandbox or a sandbox factory can do beyond the ``Sandbox`` protocol: declared, never discovered.

A backend names its capabilities in ``capabilities`` (a frozenset of ``Capability``), and defines
each capability's methods (``METHODS``) itself. Callers ask the declaration (``supports``,
``require``), never ``isinstance`` against a protocol or ``getattr``: since Python 3.12,
``isinstance`` against a runtime-checkable protocol looks attributes up statically, so a wrapper that
forwarded a method through ``__getattr__`` silently lost it — the verifier then fell back to running
the tests inside the agent's own sandbox. Wrappers (the warm pool's ``PooledSandbox``, the agent's
``CommandLog``) subclass ``ForwardingSandbox``, which forwards every capability by name and refuses
those the wrapper withholds or the wrapped sandbox lacks.

The protocols below type what each capability provides; they are not runtime-checkable on purpose.
"""

from __future__ import annotations

import enum
import inspect
import socket
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar, cast

from ares.errors import SandboxError
from ares.sandbox.base import BindMount, DiffSummary, ExecResult, Sandbox, SandboxSpec

if TYPE_CHECKING:
    from ares.sandbox.snapshots import FilesystemSnapshot
    from ares.sandbox.trusted_shell import ShellBundle


class Capability(enum.StrEnum):
    """One thing a sandbox (or, for ``RESTORE``, a sandbox factory) declares it can do."""

    #: A fresh sandbox of the pristine image for a task's tests, with host binds and the agent's diff
    #: (its outputs, or all of it): ``fork_verifier``, ``host_dir``, ``trusted_shell`` (the local backend).
    VERIFIER_FORK = "verifier-fork"
    #: A started fresh sandbox of the image holding only the agent's output paths, through the backend's
    #: own file API: ``fork_outputs(paths)`` (docker, cloud).
    OUTPUTS_FORK = "outputs-fork"
    #: ``fork_outputs(None)``: a fresh sandbox of the agent's whole filesystem, whose programs never run
    #: before the tests (docker).
    FULL_FORK = "full-fork"
    #: ``fork_frozen``: every process killed, a new unstarted sandbox of this one's files.
    FROZEN_FORK = "frozen-fork"
    #: ``halt``: every process killed, the files still readable.
    HALT = "halt"
    #: ``snapshot``: the files frozen mid-episode as a ``FilesystemSnapshot``.
    SNAPSHOT = "snapshot"
    #: A factory's ``from_snapshot``/``export_snapshot``/``import_snapshot``/``discard_snapshot``.
    RESTORE = "restore"
    #: ``archive``: a tar of a sandbox path in memory, through the backend's own file API (docker's
    #: archive API, a cloud sandbox's file read), so the verifier reads /logs/verifier with no host dir.
    ARCHIVE = "archive"
    #: ``listen_loopback``: a host-owned socket on the sandbox's own loopback (how the LLM proxy reaches
    #: an agent inside while the sandbox's network stays off).
    LOOPBACK = "loopback"


#: The methods each capability stands for; a class that declares a capability defines all of them.
METHODS: Mapping[Capability, tuple[str, ...]] = {
    Capability.VERIFIER_FORK: ("fork_verifier", "host_dir", "trusted_shell"),
    Capability.OUTPUTS_FORK: ("fork_outputs",),
    Capability.FULL_FORK: ("fork_outputs",),
    Capability.FROZEN_FORK: ("fork_frozen",),
    Capability.HALT: ("halt",),
    Capability.SNAPSHOT: ("snapshot",),
    Capability.RESTORE: ("from_snapshot", "export_snapshot", "import_snapshot", "discard_snapshot"),
    Capability.LOOPBACK: ("listen_loopback",),
    Capability.ARCHIVE: ("archive",),
}

NONE: frozenset[Capability] = frozenset()
T = TypeVar("T")


class CapabilityError(SandboxError):
    """A capability was used on a sandbox (or factory) that does not declare it."""


def declared(obj: object) -> frozenset[Capability]:
    """What ``obj`` declares it can do; an object that declares nothing can do nothing beyond the
    protocol. A declaration that is not a set of ``Capability`` is an error, not an empty set."""
    value = getattr(obj, "capabilities", NONE)
    if _VALID.get(id(value)) is value:  # this very object was checked: asked several times an episode
        return value
    if not isinstance(value, frozenset) or not all(isinstance(c, Capability) for c in value):
        raise TypeError(f"{type(obj).__name__}.capabilities must be a frozenset of Capability, got {value!r}")
    if len(_VALID) < 4096:  # mostly class attributes, a handful; never grow without bound
        _VALID[id(value)] = value
    return value


#: Declaration objects already found to be frozensets of Capability, by identity (an equal set of
#: plain strings is not one: Capability is a StrEnum). Holding them keeps their ids unique.
_VALID: dict[int, frozenset[Capability]] = {}


def supports(obj: object, capability: Capability) -> bool:
    return capability in declared(obj)


def require(obj: object, capability: Capability, protocol: type[T], *, purpose: str = "") -> T:
    """``obj`` typed as ``protocol`` when it declares ``capability``; CapabilityError naming the
    backend otherwise."""
    if capability not in declared(obj):
        why = f" ({purpose})" if purpose else ""
        raise CapabilityError(
            f"{_name(obj)} does not declare the {capability.value!r} capability{why}; it declares "
            f"{sorted(c.value for c in declared(obj)) or 'none'}"
        )
    return cast(T, obj)


def check_declaration(cls: type) -> None:
    """At class creation: every capability a class declares as a class attribute has all its methods
    defined on the class itself (not reached through ``__getattr__``)."""
    value = inspect.getattr_static(cls, "capabilities", NONE)
    if not isinstance(value, frozenset):  # a property: instances declare, ForwardingSandbox checks
        return
    for capability in value:
        missing = [m for m in METHODS[capability] if not _defines(cls, m)]
        if missing:
            raise TypeError(f"{cls.__qualname__} declares {capability.value!r} but does not define {missing}")


def _defines(cls: type, name: str) -> bool:
    try:
        inspect.getattr_static(cls, name)
    except AttributeError:
        return False
    return True


def _name(obj: object) -> str:
    kind = obj.__name__ if isinstance(obj, type) else type(obj).__name__
    return f"the {kind} backend"


# ---------------------------------------------------------------------------------- what each provides
class ArgvSandbox(Sandbox, Protocol):
    """A sandbox that can also run an exact command line (no shell, no PATH lookup)."""

    async def exec(
        self,
        cmd: str,
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        stdin: bytes | None = None,
        argv: Sequence[str] | None = None,
    ) -> ExecResult: ...


class BoundFork(Protocol):
    @property
    def sandbox(self) -> ArgvSandbox: ...

    @property
    def outside(self) -> DiffSummary: ...


class VerifierForkingSandbox(Protocol):
    """``Capability.VERIFIER_FORK``."""

    async def fork_verifier(
        self,
        *,
        outputs: Sequence[str] | None,
        binds: Sequence[BindMount] = (),
        drop: Callable[[str], bool] | None = None,
    ) -> BoundFork: ...

    def host_dir(self, name: str) -> Path: ...

    async def trusted_shell(self) -> tuple[Path, ShellBundle] | None: ...


class UploadFork(Protocol):
    @property
    def sandbox(self) -> Sandbox: ...

    @property
    def outside(self) -> DiffSummary | None: ...

    def shell_argv(self, *args: str) -> list[str] | None: ...


class OutputsForkingSandbox(Protocol):
    """``Capability.OUTPUTS_FORK`` (and ``FULL_FORK`` for ``outputs=None``). ``fresh`` dirs are empty in
    the fork before anything runs there; the caller stops the fork."""

    async def fork_outputs(
        self, outputs: Sequence[str] | None, *, fresh: Sequence[str] = ()
    ) -> UploadFork: ...


class ArchivingSandbox(Protocol):
    """``Capability.ARCHIVE``: ``archive(path)`` is a tar of the file or directory ``path``, its members
    named from ``path``'s base name (``/logs/verifier`` -> ``verifier/...``); links are members, never
    followed. SandboxError when ``path`` does not exist."""

    async def archive(self, path: str) -> bytes: ...


class FreezableSandbox(Protocol):
    """``Capability.FROZEN_FORK``."""

    async def fork_frozen(self) -> Sandbox: ...


class HaltableSandbox(Protocol):
    """``Capability.HALT``: a sandbox whose processes can all be killed while its files stay readable."""

    async def halt(self) -> None: ...


class SnapshottingSandbox(Protocol):
    """``Capability.SNAPSHOT``: a running sandbox whose files can be frozen mid-episode."""

    async def snapshot(self) -> FilesystemSnapshot: ...


class SnapshotRestoringFactory(Protocol):
    """``Capability.RESTORE``: a factory that makes sandboxes from snapshots and moves snapshots
    through files."""

    def from_snapshot(self, snapshot: FilesystemSnapshot, spec: SandboxSpec) -> Sandbox: ...

    async def export_snapshot(self, snapshot: FilesystemSnapshot, path: Path) -> None: ...

    async def import_snapshot(self, path: Path, spec: SandboxSpec) -> FilesystemSnapshot: ...

    async def discard_snapshot(self, snapshot: FilesystemSnapshot) -> None: ...


class LoopbackListener(Protocol):
    """``Capability.LOOPBACK``: a sandbox whose loopback the host can serve, so an agent inside reaches
    one host service (the LLM proxy) while its network namespace stays isolated.

    ``listen_loopback(port)`` returns a listening, non-blocking TCP socket bound to 127.0.0.1:``port``
    in the sandbox's network namespace, owned by the host (``port=0``: a free one). Only processes
    inside the sandbox can connect; the caller closes it; once the sandbox stops it accepts nothing
    more. A remote engine raises SandboxUnavailableError."""

    async def listen_loopback(self, port: int = 0) -> socket.socket: ...
