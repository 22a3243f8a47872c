"""CPU time of this process and everything it starts, sandboxes included, from a cgroup v1 cpuacct.

Why: on a shared machine, episodes/s move with other people's load, while the CPU an episode costs
does not. Sandbox processes are children of the zygote (not reaped by us), so rusage cannot see them;
a cpuacct cgroup that this process joins counts all of them (a sandbox only moves into memory, pids
and cpu cgroups of its own). Needs root and a v1 cpuacct hierarchy; otherwise ``open`` gives None.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

ROOT = Path("/sys/fs/cgroup/cpuacct")


class CpuMeter:
    """Nanoseconds of CPU used by this process tree since it joined its cgroup."""

    def __init__(self, path: Path, parent_procs: Path) -> None:
        self.path = path
        self._parent_procs = parent_procs

    @classmethod
    def open(cls) -> CpuMeter | None:
        own = _own_cpuacct()
        if own is None:
            return None
        _sweep(own)
        path = own / f"ares-bench-{os.getpid()}"
        try:
            path.mkdir()
            (path / "cgroup.procs").write_text(str(os.getpid()))
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        return cls(path, own / "cgroup.procs")

    def used_ns(self) -> int:
        return int((self.path / "cpuacct.usage").read_text())

    def close(self) -> None:
        """Leave the cgroup; it goes once the sandbox helpers (the zygote) have exited too."""
        with contextlib.suppress(OSError):
            self._parent_procs.write_text(str(os.getpid()))
        with contextlib.suppress(OSError):
            self.path.rmdir()


def _own_cpuacct() -> Path | None:
    """This process's cpuacct cgroup dir, if a v1 cpuacct hierarchy is mounted at the usual place."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "cpuacct" in controllers.split(",") and (ROOT / "cpuacct.usage").exists():
            own = ROOT / path.lstrip("/")
            return own if own.is_dir() else None
    return None


def _sweep(own: Path) -> None:
    """Remove the cgroups of earlier benches whose process has exited (and its zygote with it)."""
    for path in own.glob("ares-bench-*"):
        match = re.fullmatch(r"ares-bench-(\d+)", path.name)
        if match is None or Path(f"/proc/{match.group(1)}").exists():
            continue
        with contextlib.suppress(OSError):
            path.rmdir()
