"""ForwardingSandbox: the base of sandboxes that stand in front of another (warm pool, command log).

A wrapper must not change what the sandbox behind it can do by accident. This base forwards the
``Sandbox`` protocol and every capability method *by name* (no ``__getattr__``), and declares what
it forwards: the wrapped sandbox's capabilities, narrowed to ``passes`` (a class attribute). A
capability the wrapper withholds, or the wrapped sandbox lacks, is refused with CapabilityError,
so a caller that asked the declaration and one that called the method see the same answer.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import ClassVar, TypeVar, cast

from ares.images.identity import ImageIdentity
from ares.sandbox.base import BindMount, ExecResult, FileMap, Sandbox, SandboxSpec, image_identity
from ares.sandbox.capabilities import (
    NONE,
    ArchivingSandbox,
    BoundFork,
    Capability,
    FreezableSandbox,
    HaltableSandbox,
    LoopbackListener,
    OutputsForkingSandbox,
    SnapshottingSandbox,
    UploadFork,
    VerifierForkingSandbox,
    declared,
    require,
)
from ares.sandbox.lifecycle import StartStopContext
from ares.sandbox.snapshots import FilesystemSnapshot
from ares.sandbox.trusted_shell import ShellBundle

T = TypeVar("T")


class ForwardingSandbox(StartStopContext, traced=()):
    """Forwards everything to ``target()``; subclasses override what they change.

    Not traced itself (the target is): a subclass that adds work of its own names it in ``traced=``.
    """

    #: The capabilities this wrapper passes on, when the wrapped sandbox has them. ``RESTORE`` is a
    #: factory's (a sandbox class used as its own factory declares it too), never a sandbox wrapper's.
    passes: ClassVar[frozenset[Capability]] = frozenset(Capability) - {Capability.RESTORE}

    def target(self) -> Sandbox:
        """The sandbox behind this one (raises SandboxError when there is none yet)."""
        raise NotImplementedError

    def _present(self) -> Sandbox | None:
        """The sandbox behind this one, or None before there is one (for declarations only)."""
        return self.target()

    @property
    def spec(self) -> SandboxSpec:
        return self.target().spec

    @property
    def image_identity(self) -> ImageIdentity | None:  # type: ignore[override]
        present = self._present()
        return None if present is None else image_identity(present)

    @property
    def capabilities(self) -> frozenset[Capability]:  # type: ignore[override]
        present = self._present()
        return NONE if present is None else declared(present) & self.passes

    def _capable(self, capability: Capability, protocol: type[T]) -> T:
        """The wrapped sandbox as ``protocol``, when this wrapper declares ``capability``."""
        require(self, capability, protocol, purpose=f"through {type(self).__name__}")
        return cast(T, self.target())

    # ------------------------------------------------------------------ the Sandbox protocol
    async def start(self) -> None:
        await self.target().start()

    async def stop(self) -> None:
        await self.target().stop()

    async def exec(
        self,
        cmd: str,
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        return await self.target().exec(cmd, cwd=cwd, env=env, timeout_s=timeout_s, stdin=stdin)

    async def upload(self, src: Path | FileMap, dest: str) -> None:
        await self.target().upload(src, dest)

    async def download(self, src: str, dest: Path) -> None:
        await self.target().download(src, dest)

    async def read_file(self, path: str) -> bytes:
        return await self.target().read_file(path)

    # ------------------------------------------------------------------ capabilities, by name
    async def fork_verifier(
        self,
        *,
        outputs: Sequence[str] | None,
        binds: Sequence[BindMount] = (),
        drop: Callable[[str], bool] | None = None,
    ) -> BoundFork:
        return await self._capable(Capability.VERIFIER_FORK, VerifierForkingSandbox).fork_verifier(
            outputs=outputs, binds=binds, drop=drop
        )

    def host_dir(self, name: str) -> Path:
        return self._capable(Capability.VERIFIER_FORK, VerifierForkingSandbox).host_dir(name)

    async def trusted_shell(self) -> tuple[Path, ShellBundle] | None:
        return await self._capable(Capability.VERIFIER_FORK, VerifierForkingSandbox).trusted_shell()

    async def fork_outputs(self, outputs: Sequence[str] | None, *, fresh: Sequence[str] = ()) -> UploadFork:
        needed = Capability.FULL_FORK if outputs is None else Capability.OUTPUTS_FORK
        return await self._capable(needed, OutputsForkingSandbox).fork_outputs(outputs, fresh=fresh)

    async def fork_frozen(self) -> Sandbox:
        return await self._capable(Capability.FROZEN_FORK, FreezableSandbox).fork_frozen()

    async def halt(self) -> None:
        await self._capable(Capability.HALT, HaltableSandbox).halt()

    async def snapshot(self) -> FilesystemSnapshot:
        return await self._capable(Capability.SNAPSHOT, SnapshottingSandbox).snapshot()

    async def archive(self, path: str) -> bytes:
        return await self._capable(Capability.ARCHIVE, ArchivingSandbox).archive(path)

    async def listen_loopback(self, port: int = 0) -> socket.socket:
        return await self._capable(Capability.LOOPBACK, LoopbackListener).listen_loopback(port)
