"""What a local sandbox's forks stand on: the files the verifier's sandbox sees, and the host dirs
it binds.

A fork is a new, unstarted sandbox on a plan that stacks the parent's diff (or part of it) as
read-only layers; the parent's processes are dead first and its files stay until its ``stop()``,
which must come after the fork's. ``LocalSandbox.fork_frozen``/``fork_verifier`` make the sandbox;
this module decides which layers it gets.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Sequence
from pathlib import Path

from ares.images.rootfs import RootfsPlan
from ares.sandbox.base import DiffSummary
from ares.sandbox.local import diff, layers
from ares.sandbox.local.stack import LayerStack


async def verifier_plan(
    sandbox_dir: Path, stack: LayerStack, outputs: Sequence[str] | None, workdir: str
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
    return (stack.image or plan).stacked_on(layer), outside


def new_host_dir(sandbox_dir: Path, name: str) -> Path:
    """A new empty dir below ``sandbox_dir`` (deleted with it), named after ``name``."""
    (sandbox_dir / "host").mkdir(mode=0o755, exist_ok=True)
    path = sandbox_dir / "host" / f"{name}-{secrets.token_hex(4)}"
    path.mkdir(mode=0o755)
    return path
