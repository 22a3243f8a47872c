"""The snapshots of a ``LocalSandbox``: taken as layers, restored by stacking them, moved as files.

``snapshot`` moves the upper dirs (no copy) into a read-only layer and restarts the sandbox on top
of it; ``from_snapshot`` stacks a snapshot's layers under a new sandbox (call it n times to fork n);
``export_snapshot``/``import_snapshot`` write and read a snapshot's diff as files (``archive.py``)
and ``discard_snapshot`` frees its layers once nothing stacks them (``snapshot.py``). The class is
its own factory, so the ``RESTORE`` methods are classmethods.

A base of ``LocalSandbox`` (``sandbox.py``), which sets every attribute declared here.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Self

from ares.errors import SandboxError
from ares.sandbox.base import SandboxSpec
from ares.sandbox.local import archive
from ares.sandbox.local import snapshot as local_snapshot
from ares.sandbox.local.init_control import InitControl
from ares.sandbox.local.stack import LayerStack
from ares.sandbox.snapshots import FilesystemSnapshot


class LocalSnapshots(InitControl):
    """The ``SNAPSHOT`` and ``RESTORE`` methods of ``LocalSandbox`` (see the module docstring)."""

    _stack: LayerStack

    if TYPE_CHECKING:

        def __init__(self, spec: SandboxSpec | None = None) -> None: ...

        async def _restart(self) -> None: ...

    async def snapshot(self) -> FilesystemSnapshot:
        """Freeze what this sandbox changed so far as a read-only layer and go on on top of it.

        The upper dirs are moved (no copy) into a snapshot layer and the sandbox restarts on the
        image plus its layers with empty upper dirs, so ``diff_dir`` then holds only later changes.
        Every process is killed first: background processes the agent left running are not carried
        over, and no command may be in flight (SandboxError). The object, its spec, limits, network
        and binds stay as they were.
        """
        if self._dir is None or self._stack.image is None:
            raise SandboxError("the sandbox has not been started")
        local_snapshot.check_room(self._stack)
        with self._state.taking_snapshot():
            await self._kill_processes()
            return await local_snapshot.take(self._stack, self._dir, self._restart)

    @classmethod
    def from_snapshot(cls, snapshot: FilesystemSnapshot, spec: SandboxSpec) -> Self:
        """A new, unstarted sandbox of ``spec`` whose files are its image plus ``snapshot``'s layers
        (stacked, not copied: call it n times to fork n sandboxes). ``start()`` refuses a snapshot
        of another image; a snapshot whose layers this process does not hold is refused here."""
        local_snapshot.check_restorable(snapshot)
        sandbox = cls(spec)
        sandbox._stack.restore = snapshot
        return sandbox

    @classmethod
    async def export_snapshot(cls, snapshot: FilesystemSnapshot, path: Path) -> None:
        """Write ``snapshot``'s diff to the dir ``path`` as ``manifest.json`` + ``diff.tar.gz``."""
        await archive.export_snapshot(snapshot, path)

    @classmethod
    async def import_snapshot(cls, path: Path, spec: SandboxSpec) -> FilesystemSnapshot:
        """Unpack an exported snapshot of ``spec``'s image into a new layer of this process."""
        return await archive.import_snapshot(path, spec)

    @classmethod
    async def discard_snapshot(cls, snapshot: FilesystemSnapshot) -> None:
        """Free ``snapshot``'s layers once no sandbox stacks them (and no later snapshot names them)."""
        await asyncio.to_thread(local_snapshot.discard, snapshot)
