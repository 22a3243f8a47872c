"""The image builder's commit: a local sandbox's diff moved out as an image layer.

``images/builder.py`` runs each build step in a sandbox whose scratch dir is on the image cache's
filesystem, so the diff becomes a layer by renames, not copies (``LocalSandbox.commit``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ares.images.rootfs import OverlayMount
from ares.sandbox.local import layers


def move_diff(
    upper: Path, snapshot_layers: Sequence[Path], mounts: Sequence[OverlayMount], dest: Path
) -> None:
    """Make ``dest`` (same filesystem as ``upper``) the layer of what a dead sandbox changed.

    Mount dirs the sandbox did not change are left out, so a layer only adds lower dirs it needs.
    After snapshots the diff since the image spans their layers too: it is written merged. Blocking.
    """
    if snapshot_layers:
        layers.write_merged([upper, *snapshot_layers], mounts, dest)
        return
    for sub in list(upper.iterdir()):
        if not any(sub.iterdir()) and not os.listxattr(sub):
            sub.rmdir()
    os.rename(upper, dest)
