"""Snapshots of local sandboxes: a sandbox's upper dirs frozen as a shared, read-only layer.

``LocalSandbox.snapshot()`` kills the sandbox's processes, moves (renames, no copy) its upper dirs
into a new layer dir ``<process dir>/snapshots/<id>/`` and restarts its init on the image plus all
its layers with fresh, empty upper dirs. A snapshot names every layer it needs, topmost first
(``ref``, ``metadata["layers"]``): a chain of snapshots stacks layers, and a sandbox made from a
snapshot (``LocalSandbox.from_snapshot``) stacks them under its own fresh upper, so n forks share
them and never see each other's writes.

Root-run with a disk limit, a sandbox's dir is its own tmpfs: its layer is renamed within that tmpfs
and bind-mounted at ``snapshots/<id>`` (the tmpfs then lives as long as the layer). Layers are
removed when no snapshot names them any more (``discard_snapshot``) and no sandbox stacks them, and
in any case when the process exits (the janitor's atexit/SIGTERM path; the next process sweeps them
after a SIGKILL). Moving snapshots between processes is ``archive.py``'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import datetime
import hashlib
import json
import os
import secrets
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ares.errors import SandboxError
from ares.images.rootfs import OverlayMount, RootfsPlan
from ares.sandbox.local import janitor, layers, limits, workspace
from ares.sandbox.local.stack import LayerStack
from ares.sandbox.snapshots import FilesystemSnapshot

if TYPE_CHECKING:
    from ares.sandbox.base import ImageSpec

BACKEND = "local"
#: Snapshot layers a sandbox may stack (overlayfs takes at most 500 lower layers per mount, and a
#: root-run start holds one idmapped clone per layer open at once).
MAX_CHAIN = 200

_MS_BIND, _MNT_DETACH = 4096, 2
_libc = ctypes.CDLL(None, use_errno=True)
_lock = threading.Lock()


@dataclass(eq=False)
class _Layer:
    """One layer dir: the live sandboxes that stack it, the snapshots (not discarded) that name it."""

    path: Path
    mounts: tuple[OverlayMount, ...]  # the image plan's mounts, naming the layer's key dirs
    users: set[int] = field(default_factory=set)
    holders: set[str] = field(default_factory=set)
    mounted: bool = False


_layers: dict[str, _Layer] = {}
#: Ids of the snapshots ``discard`` was called on (never restored again).
_discarded: set[str] = set()


def snapshots_dir() -> Path:
    path = workspace.process_dir() / "snapshots"
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    return path


# ---------------------------------------------------------------------- identity
def plan_digest(plan: RootfsPlan) -> str:
    """The identity of an image plan, stable across processes: paths below this process's scratch
    dir (the host base layers) are named relative to it."""
    own = str(workspace.process_dir())

    def name(path: str) -> str:
        return "<process>" + path[len(own) :] if path == own or path.startswith(own + "/") else path

    data = [[m.target, [name(p) for p in m.lower]] for m in plan.mounts]
    return "sha256:" + hashlib.sha256(json.dumps(data).encode()).hexdigest()


def layers_of(snapshot: FilesystemSnapshot) -> tuple[Path, ...]:
    """The layer dirs a local snapshot stacks, topmost first; refused unless this process made them."""
    if snapshot.backend != BACKEND:
        raise SandboxError(
            f"snapshot {snapshot.id} was taken by the {snapshot.backend} backend; the local sandbox "
            "restores only local snapshots"
        )
    named = snapshot.metadata.get("layers")
    paths = [str(p) for p in named] if isinstance(named, list) else [p for p in snapshot.ref.split(":") if p]
    out = []
    with _lock:
        if snapshot.id in _discarded:
            raise SandboxError(f"snapshot {snapshot.id} was discarded; it cannot be restored any more")
        for path in paths:
            if path not in _layers:
                raise SandboxError(
                    f"snapshot {snapshot.id}: its layer {path} is not one this process holds (discarded, "
                    "or taken in another process); move snapshots between processes with "
                    "export_snapshot/import_snapshot"
                )
            out.append(Path(path))
    for path in out:
        if not path.is_dir():
            raise SandboxError(f"snapshot {snapshot.id}: its layer {path} is missing")
    return tuple(out)


# ---------------------------------------------------------------------- lifetimes
def register(
    path: Path,
    mounts: Sequence[OverlayMount],
    *,
    holder: str | None = None,
    user: int | None = None,
    mounted: bool = False,
) -> None:
    with _lock:
        layer = _layers.setdefault(str(path), _Layer(path, tuple(mounts), mounted=mounted))
        if holder is not None:
            layer.holders.add(holder)
        if user is not None:
            layer.users.add(user)
    # Removed with the process however it ends (atexit, SIGTERM), bind mount first.
    janitor.register(f"layer:{path}", [], path, _unmounter(path) if mounted else None)


def use(layer_dirs: Sequence[Path], user: int, holder: str | None = None) -> None:
    """A sandbox's stack (``user``, its owner id) stacks these layers (until ``release``);
    ``holder``, a new snapshot, names them."""
    with _lock:
        for path in layer_dirs:
            layer = _layers[str(path)]
            layer.users.add(user)
            if holder is not None:
                layer.holders.add(holder)


def release(layer_dirs: Sequence[Path], user: int) -> None:
    """The sandbox of stack ``user`` stopped: remove the layers nothing needs any more."""
    with _lock:
        for path in layer_dirs:
            layer = _layers.get(str(path))
            if layer is not None:
                layer.users.discard(user)
    _collect(layer_dirs)


def discard(snapshot: FilesystemSnapshot) -> None:
    """The snapshot will not be restored again: its layers go once no sandbox stacks them."""
    if snapshot.backend != BACKEND:
        raise SandboxError(
            f"snapshot {snapshot.id} belongs to the {snapshot.backend} backend, not the local one"
        )
    named = snapshot.metadata.get("layers")
    paths = [str(p) for p in named] if isinstance(named, list) else [p for p in snapshot.ref.split(":") if p]
    with _lock:
        _discarded.add(snapshot.id)
        for path in paths:
            layer = _layers.get(path)
            if layer is not None:
                layer.holders.discard(snapshot.id)
    _collect([Path(p) for p in paths])


def live_layers() -> list[Path]:
    """Layer dirs this process still holds (for tests and diagnostics)."""
    with _lock:
        return [layer.path for layer in _layers.values()]


def _collect(layer_dirs: Sequence[Path]) -> None:
    doomed = []
    with _lock:
        for path in layer_dirs:
            layer = _layers.get(str(path))
            if layer is not None and not layer.users and not layer.holders:
                doomed.append(_layers.pop(str(path)))
    for layer in doomed:
        janitor.unregister(f"layer:{layer.path}")
        _remove(layer.path, layer.mounted)


def _remove(path: Path, mounted: bool) -> None:
    if mounted:  # empty the tmpfs through the bind mount (its sandbox may still run), then detach it
        with contextlib.suppress(OSError):
            for child in os.listdir(path):
                janitor.remove_tree(path / child)
        _unmounter(path)()
    janitor.remove_tree(path)


def _unmounter(path: Path) -> Callable[[], None]:
    def unmount() -> None:
        _libc.umount2(str(path).encode(), _MNT_DETACH)

    return unmount


def mounts_of(chain: Sequence[Path]) -> tuple[OverlayMount, ...]:
    """The mounts of the image plan the layers of ``chain`` were made against."""
    with _lock:
        return _layers[str(chain[0])].mounts if chain else ()


# ---------------------------------------------------------------------- snapshot
def freeze(stack: LayerStack, sandbox_dir: Path, snapshot_id: str) -> tuple[Path, bool]:
    """Move the non-empty upper dirs of the sandbox in ``sandbox_dir`` into a new layer dir (renames
    only) and leave fresh, empty upper dirs in their place. Returns (layer dir, whether it is a bind
    mount). Blocking: call it in a thread, with the sandbox's processes dead."""
    assert stack.plan is not None
    upper = sandbox_dir / "upper"
    dest = snapshots_dir() / snapshot_id
    same_fs = _same_filesystem(upper, dest.parent)
    if same_fs:
        staging = dest
    elif _may_mount():  # the upper is the sandbox's own tmpfs: keep the layer there
        (sandbox_dir / "snapshots").mkdir(mode=0o700, exist_ok=True)
        staging = sandbox_dir / "snapshots" / snapshot_id
    else:
        staging = None
    moved: list[str] = []
    if staging is not None:
        staging.mkdir(mode=0o755)
        for sub in sorted(upper.iterdir()):
            if any(sub.iterdir()) or _changed_attrs(sub):
                os.rename(sub, staging / sub.name)
                moved.append(sub.name)
    else:  # another filesystem we may not mount from: copy (slow, but the upper stays consistent)
        try:
            layers.write_merged([upper], stack.plan.mounts, dest)
        except BaseException:
            janitor.remove_tree(dest)
            raise
        moved = [sub.name for sub in upper.iterdir()]
        for name in moved:
            janitor.remove_tree(upper / name)
    for name in moved:
        (upper / name).mkdir(mode=0o755)
    if staging is None or same_fs:
        return dest, False
    dest.mkdir(mode=0o755)
    if _libc.mount(str(staging).encode(), str(dest).encode(), None, ctypes.c_ulong(_MS_BIND), None) != 0:
        err = ctypes.get_errno()
        for name in moved:  # put the diff back where it was
            (upper / name).rmdir()
            os.rename(staging / name, upper / name)
        staging.rmdir()
        dest.rmdir()
        raise SandboxError(f"cannot bind-mount the snapshot layer at {dest}: {os.strerror(err)}")
    return dest, True


def _same_filesystem(a: Path, b: Path) -> bool:
    return os.lstat(a).st_dev == os.lstat(b).st_dev


def _may_mount() -> bool:
    return limits.can_mount()


def _changed_attrs(upper_dir: Path) -> bool:
    """Whether an upper mount dir carries anything but overlay's own bookkeeping xattrs."""
    return any(name in layers.OPAQUE_XATTRS for name in os.listxattr(upper_dir))


def check_room(stack: LayerStack) -> None:
    """Refuse a snapshot that ``stack`` cannot take on (a fork's, or a chain at its limit)."""
    if stack.sealed is not None:
        raise SandboxError(stack.sealed)
    if len(stack.layers) >= MAX_CHAIN:
        raise SandboxError(
            f"this sandbox already stacks {len(stack.layers)} snapshot layers (at most {MAX_CHAIN}); "
            "export the last snapshot and import it to start a new chain from one merged layer"
        )


def hold(stack: LayerStack, layer: Path, snapshot_id: str, mounted: bool) -> None:
    """A layer ``freeze`` made: registered for the new snapshot (which also names every layer below
    it) and pushed onto ``stack``."""
    assert stack.image is not None
    register(layer, stack.image.mounts, holder=snapshot_id, user=stack.owner, mounted=mounted)
    use(stack.layers, stack.owner, holder=snapshot_id)
    stack.push(layer)


async def take(
    stack: LayerStack, sandbox_dir: Path, restart: Callable[[], Awaitable[None]]
) -> FilesystemSnapshot:
    """``LocalSandbox.snapshot()`` once the sandbox in ``sandbox_dir`` is dead: freeze its diff into
    a layer pushed onto ``stack``, and ``restart`` it on top. A failed freeze leaves the diff in the
    upper dirs: the sandbox restarts without a snapshot."""
    assert stack.image is not None
    snapshot_id = secrets.token_hex(8)
    try:
        layer, mounted = await asyncio.to_thread(freeze, stack, sandbox_dir, snapshot_id)
    except Exception as exc:
        await restart()
        raise SandboxError(f"the snapshot failed (the sandbox was restarted without it): {exc}") from exc
    hold(stack, layer, snapshot_id, mounted)
    counted = asyncio.ensure_future(asyncio.to_thread(count, stack.layers, stack.image.mounts))
    try:
        await restart()
    finally:
        changed, size = await counted
    return describe(stack, snapshot_id, changed, size)


def describe(stack: LayerStack, snapshot_id: str, changed: int, size: int) -> FilesystemSnapshot:
    """The snapshot whose layer ``hold`` just pushed: every layer of ``stack``, topmost first."""
    assert stack.image is not None
    chain = stack.layers
    return FilesystemSnapshot(
        id=snapshot_id,
        backend=BACKEND,
        image=plan_digest(stack.image),
        ref=":".join(str(p) for p in chain),
        size_bytes=size,
        changed_paths=changed,
        metadata={
            "layers": [str(p) for p in chain],
            "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds"),
        },
    )


def count(chain: Sequence[Path], mounts: Sequence[OverlayMount]) -> tuple[int, int]:
    """(changed paths, bytes of file content) of the merged diff of ``chain``."""
    changed = size = 0
    seen: set[tuple[int, int]] = set()
    entries = layers.merged(chain, mounts)
    entry = next(entries, None)
    while entry is not None:
        following = next(entries, None)
        holds_changes = following is not None and following.path.startswith(entry.path + "/")
        if entry.kind != "dir" or entry.opaque or not holds_changes:
            changed += 1
        if entry.kind == "file" and (entry.st.st_dev, entry.st.st_ino) not in seen:
            seen.add((entry.st.st_dev, entry.st.st_ino))
            size += entry.st.st_size
        entry = following
    return changed, size


def attach(stack: LayerStack, image: ImageSpec) -> None:
    """At a start of ``from_snapshot``'s sandbox (of ``image``): check the snapshot's image and
    layers, hold the layers and stack them."""
    snapshot, image_plan = stack.restore, stack.image
    assert snapshot is not None and image_plan is not None
    if snapshot.image != plan_digest(image_plan):
        raise SandboxError(
            f"snapshot {snapshot.id} was taken on another image ({snapshot.image}); this sandbox's image "
            f"{image} is {plan_digest(image_plan)}"
        )
    chain = layers_of(snapshot)
    use(chain, stack.owner)
    stack.attach(chain)


def check_restorable(snapshot: FilesystemSnapshot) -> None:
    """Fail early (at ``from_snapshot``) for a snapshot this process cannot restore."""
    layers_of(snapshot)
