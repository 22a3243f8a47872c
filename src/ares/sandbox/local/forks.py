"""What a local sandbox's forks stand on: the files the verifier's sandbox sees, and the host dirs
it binds.

A fork is a new, unstarted sandbox on a plan that stacks the parent's diff (or part of it) as
read-only layers; the parent's processes are dead first and its files stay until its ``stop()``,
which must come after the fork's. ``LocalSandbox.fork_frozen``/``fork_verifier`` make the sandbox;
this module decides which layers it gets.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import stat
from collections.abc import Callable, Sequence
from pathlib import Path

from ares.core.rmtree import remove_tree
from ares.images.rootfs import OverlayMount, RootfsPlan
from ares.sandbox.base import DiffSummary
from ares.sandbox.local import diff, layers
from ares.sandbox.local.stack import LayerStack

#: Entries ``drop`` walks at most in a carried layer (an agent may leave millions of files).
MAX_DROP_WALK = 200_000


async def verifier_plan(
    sandbox_dir: Path,
    stack: LayerStack,
    outputs: Sequence[str] | None,
    workdir: str,
    drop: Callable[[str], bool] | None = None,
) -> tuple[RootfsPlan, DiffSummary]:
    """The plan of a verifier fork of the sandbox in ``sandbox_dir`` and what the agent changed
    outside ``outputs`` (or ``workdir``): the bare image plus only ``outputs`` carried over from the
    diff, or, for ``outputs=None``, the whole diff (tasks whose success is system state)."""
    plan, snapshot_layers = stack.plan, stack.layers
    assert plan is not None
    upper = sandbox_dir / "upper"
    kept = tuple(outputs) if outputs is not None else (workdir,)
    # After snapshots the agent's diff is the upper over the snapshot layers, read as one.
    sources = [upper, *snapshot_layers] if snapshot_layers else upper
    outside = await asyncio.to_thread(diff.summarize_outside, sources, plan.mounts, kept)
    if outputs is None:
        return plan.stacked_on(upper), outside
    layer = sandbox_dir / "outputs"
    if not layer.exists():  # a second fork reuses the outputs carried by the first
        if snapshot_layers:  # copied (linked where possible): the layers are shared with others
            merged = [upper, *snapshot_layers]
            await asyncio.to_thread(layers.write_merged, merged, plan.mounts, layer, kept)
        else:
            await asyncio.to_thread(diff.carry_outputs, upper, plan.mounts, kept, layer)
        if drop is not None:
            await asyncio.to_thread(drop_carried, layer, plan.mounts, kept, drop)
    return (stack.image or plan).stacked_on(layer), outside


def new_host_dir(sandbox_dir: Path, name: str) -> Path:
    """A new empty dir below ``sandbox_dir`` (deleted with it), named after ``name``."""
    (sandbox_dir / "host").mkdir(mode=0o755, exist_ok=True)
    path = sandbox_dir / "host" / f"{name}-{secrets.token_hex(4)}"
    path.mkdir(mode=0o755)
    return path


def drop_carried(
    layer: Path, mounts: Sequence[OverlayMount], outputs: Sequence[str], drop: Callable[[str], bool]
) -> None:
    """Remove from a carried ``layer`` every entry below ``outputs`` whose absolute path ``drop``
    names (a whole subtree for a dir; a whiteout or opaque dir too), so the image's own version shows
    through in the fork. The layer was written by the agent: nothing here follows a symlink, and the
    walk is bounded (past the bound the layer is refused rather than half-filtered)."""
    walked = 0
    for output in sorted({os.path.normpath(p) for p in outputs}):
        mount, rel = diff.mount_of(output, mounts)
        root = layer / mount.key if rel == "." else layer / mount.key / rel
        stack = [(root, output)]
        while stack:
            directory, where = stack.pop()
            try:
                entries = list(os.scandir(directory))
            except (FileNotFoundError, NotADirectoryError):
                continue
            for entry in entries:
                walked += 1
                if walked > MAX_DROP_WALK:
                    raise OSError(f"more than {MAX_DROP_WALK} changed entries below {output}; refusing")
                path = f"{where.rstrip('/')}/{os.fsdecode(entry.name)}"
                st = entry.stat(follow_symlinks=False)
                if drop(path):
                    # remove_tree never follows a link and copes with dirs the agent made unreadable.
                    left = remove_tree(entry.path) if stat.S_ISDIR(st.st_mode) else _unlink(entry.path)
                    if left:
                        raise OSError(f"cannot drop {path} from the carried changes: {left[0]}")
                elif stat.S_ISDIR(st.st_mode):
                    stack.append((Path(entry.path), path))


def _unlink(path: str) -> list[str]:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        return [f"{path}: {exc.strerror}"]
    return []
