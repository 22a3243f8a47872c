"""Per-process scratch dirs in the image cache, and sweeping those of processes that died."""

from __future__ import annotations

import os
from pathlib import Path

from ares.core.rmtree import remove_tree


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def sweep_dead(root: Path) -> list[str]:
    """Remove entries named ``<pid>-...`` whose process is gone; never follows a link. Returns failures."""
    failures: list[str] = []
    try:
        names = [entry.name for entry in os.scandir(root)]
    except OSError as exc:
        return [f"{root}: {exc.strerror or exc}"]
    for name in names:
        pid = name.split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid() or process_alive(int(pid)):
            continue
        try:
            failures += remove_tree(root / name)
        except OSError as exc:
            failures.append(f"{root / name}: {exc.strerror or exc}")
    return failures
