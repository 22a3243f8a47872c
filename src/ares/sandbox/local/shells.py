"""Each image's trusted shell for the verifier, captured once per process and image.

A verifier fork runs the task's tests with the image's own bash, bound read-only at
``trusted_shell.SHELL_DIR`` (see ``ares.sandbox.trusted_shell``), never the agent's. Capturing it
takes a pristine sandbox of the image, so the bundle is kept for the life of the process, keyed by
pid (a forked process has its own dirs) and image plan.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import Callable
from pathlib import Path

from ares.images.rootfs import RootfsPlan
from ares.sandbox import trusted_shell
from ares.sandbox.base import Sandbox
from ares.sandbox.local import workspace

_SHELLS: dict[tuple[int, RootfsPlan], tuple[Path, trusted_shell.ShellBundle] | None] = {}


async def image_shell(
    plan: RootfsPlan, pristine: Callable[[], Sandbox]
) -> tuple[Path, trusted_shell.ShellBundle] | None:
    """The shell bundle of image ``plan`` and the host dir it was written to (None: the image has no
    bash); ``pristine`` makes an unstarted sandbox of the image to capture it from, on first use."""
    key = (os.getpid(), plan)
    if key not in _SHELLS:
        sandbox = pristine()
        await sandbox.start()
        try:
            bundle = await trusted_shell.capture_shell(sandbox)
        finally:
            await sandbox.stop()
        if bundle is None:
            _SHELLS[key] = None
        else:
            dest = workspace.process_dir() / f"shell-{secrets.token_hex(6)}"
            await asyncio.to_thread(bundle.write, dest)
            _SHELLS.setdefault(key, (dest, bundle))
    return _SHELLS[key]
