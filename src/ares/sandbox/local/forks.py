"""What a local sandbox's forks stand on: the files the verifier's sandbox sees, and the host dirs
it binds.

A fork is a new, unstarted sandbox on a plan that stacks the parent's diff (or part of it) as
read-only layers; the parent's processes are dead first and its files stay until its ``stop()``,
which must come after the fork's. ``LocalSandbox.fork_frozen``/``fork_verifier`` make the sandbox;
this module decides which layers it gets.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import secrets
import stat
from collections.abc import Callable, Sequence
from pathlib import Path

from ares.errors import OutputRefusedError
from ares.images.rootfs import OverlayMount, RootfsPlan
from ares.sandbox.base import DiffSummary
from ares.sandbox.carry_bounds import CarryBudget, refusal_of
from ares.sandbox.local import diff, layers
from ares.sandbox.local.stack import LayerStack


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
    refused = sandbox_dir / "outputs-refused"
    if refused.exists():  # a second fork of outputs the first refused: the same refusal
        raise _refusal(refused, outside)
    if not layer.exists():  # a second fork reuses the outputs carried by the first
        try:
            await asyncio.to_thread(_carry, sandbox_dir, upper, snapshot_layers, plan.mounts, kept, drop)
        except OutputRefusedError as exc:
            await asyncio.to_thread(_set_aside, layer, refused, exc)
            exc.outside = outside
            raise
    return (stack.image or plan).stacked_on(layer), outside


def _carry(
    sandbox_dir: Path,
    upper: Path,
    snapshot_layers: Sequence[Path],
    mounts: Sequence[OverlayMount],
    kept: Sequence[str],
    drop: Callable[[str], bool] | None,
) -> None:
    layer = sandbox_dir / "outputs"
    if snapshot_layers:  # copied (linked where possible): the layers are shared with others
        budget = CarryBudget()
        layers.write_merged([upper, *snapshot_layers], mounts, layer, kept, check=budget)
    else:
        diff.carry_outputs(upper, mounts, kept, layer)
    filter_carried(layer, mounts, kept, drop, sandbox_dir / "dropped")


def _set_aside(layer: Path, refused: Path, exc: OutputRefusedError) -> None:
    """A refused layer never serves a fork: renamed out of the way (deleted with the sandbox), with
    the refusal kept beside it for a second fork."""
    refused.mkdir(mode=0o700)
    if layer.exists():
        os.rename(layer, refused / "layer")
    (refused / "reason").write_text(f"{exc.reason}\n{exc.detail}")


def _refusal(refused: Path, outside: DiffSummary) -> OutputRefusedError:
    reason, _, detail = (refused / "reason").read_text().partition("\n")
    exc = OutputRefusedError(reason, detail)
    exc.outside = outside
    return exc


def new_host_dir(sandbox_dir: Path, name: str) -> Path:
    """A new empty dir below ``sandbox_dir`` (deleted with it), named after ``name``."""
    (sandbox_dir / "host").mkdir(mode=0o755, exist_ok=True)
    path = sandbox_dir / "host" / f"{name}-{secrets.token_hex(4)}"
    path.mkdir(mode=0o755)
    return path


def filter_carried(
    layer: Path,
    mounts: Sequence[OverlayMount],
    outputs: Sequence[str],
    drop: Callable[[str], bool] | None,
    trash: Path,
    budget: CarryBudget | None = None,
) -> int:
    """Check a carried ``layer`` against ``budget`` (default: the default bounds) and take out every
    entry below ``outputs`` whose absolute path ``drop`` names (a whole subtree for a dir; a whiteout
    or opaque dir too), so the image's own version shows through in the fork. Returns the entries
    visited.

    The layer was written by the agent: nothing here follows a symlink, a directory is read lazily
    (one of millions of entries costs only up to the bound), and a dropped entry is renamed into
    ``trash`` (same filesystem, deleted with the sandbox) rather than walked. Past a bound the whole
    layer is refused (``OutputRefusedError``) rather than half-filtered.
    """
    budget = budget or CarryBudget()
    trash.mkdir(mode=0o700, exist_ok=True)
    moved = itertools.count(len(os.listdir(trash)))
    for output in sorted({os.path.normpath(p) for p in outputs}):
        mount, rel = diff.mount_of(output, mounts)
        root = layer / mount.key if rel == "." else layer / mount.key / rel
        stack = [(str(root), output, 0)]
        while stack:
            directory, where, depth = stack.pop()
            for name, st in _entries(directory, where, depth + 1, budget):
                host, path = os.path.join(directory, name), f"{where.rstrip('/')}/{os.fsdecode(name)}"
                if drop is not None and drop(path):
                    os.rename(host, trash / str(next(moved)))
                    continue
                budget.check_stat(path, st)
                if stat.S_ISDIR(st.st_mode):
                    stack.append((host, path, depth + 1))
    return budget.visited


def _entries(directory: str, where: str, depth: int, budget: CarryBudget) -> list[tuple[str, os.stat_result]]:
    """The entries of one carried dir with their lstat, counted against ``budget`` as they are read."""
    out: list[tuple[str, os.stat_result]] = []
    try:
        with os.scandir(directory) as it:
            for entry in it:
                path = f"{where.rstrip('/')}/{os.fsdecode(entry.name)}"
                budget.visit(path, depth)
                out.append((entry.name, entry.stat(follow_symlinks=False)))
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        refused = refusal_of(exc, where)
        if refused is None:
            raise
        raise refused from exc
    return out
