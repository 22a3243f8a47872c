"""Per-sandbox cgroups, nested under this process's own cgroup (v1 hierarchies or the v2 unified one).

The host attaches a sandbox's init before the init starts any command, so every process of the
sandbox is accounted, and removes the cgroups once those processes are gone. They live in a parent
of their own, ``<own cgroup>/ares-sandboxes/ares-<host pid>-<sandbox id>``: a later process sweeps
the children of that parent whose creator has died, and nothing else (a cgroup elsewhere that
happens to have such a name belongs to someone else).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import re
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

CONTROLLERS = ("memory", "pids", "cpu")
#: The cgroup, below this process's own, that holds every sandbox cgroup.
PARENT = "ares-sandboxes"
#: How often ``CgroupSet.add`` recreates the parent when another sandbox's removal races it away.
PARENT_RETRIES = 5
NAME = re.compile(r"ares-(\d+)-[0-9a-f]+")
#: How long ``remove`` waits for the processes of a killed sandbox to leave its cgroups.
REMOVE_PATIENCE_S = 2.0
#: (v1 file, v2 file, key) of the counters that tell a limit was hit.
OOM_COUNTER = ("memory.oom_control", "memory.events", "oom_kill")
PIDS_COUNTER = ("pids.events", "pids.events", "max")


@dataclass(frozen=True, slots=True)
class Hierarchy:
    """A mounted cgroup hierarchy: its version, mount point, and this process's own cgroup dir in it."""

    version: int
    mount: Path
    own: Path


def unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal (``\\040``)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def locate(mountinfo: str, proc_cgroup: str) -> tuple[dict[str, Hierarchy], Hierarchy | None]:
    """(v1 hierarchy per controller, the v2 hierarchy) from /proc/self/mountinfo and /proc/self/cgroup."""
    own_v1: dict[str, str] = {}
    own_v2: str | None = None
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            own_v2 = parts[2]
        for controller in parts[1].split(","):
            own_v1[controller] = parts[2]
    v1: dict[str, Hierarchy] = {}
    v2: Hierarchy | None = None
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or len(tail) < 3:
            continue
        root, mountpoint, fstype = unescape(fields[3]), unescape(fields[4]), tail[0]
        if fstype == "cgroup2" and own_v2 is not None and v2 is None:
            if (path := _inside(mountpoint, root, own_v2)) is not None:
                v2 = Hierarchy(2, Path(mountpoint), path)
        elif fstype == "cgroup":
            for controller in set(tail[2].split(",")) & set(CONTROLLERS) - v1.keys():
                if controller in own_v1 and (path := _inside(mountpoint, root, own_v1[controller])):
                    v1[controller] = Hierarchy(1, Path(mountpoint), path)
    return v1, v2


def _inside(mountpoint: str, root: str, own: str) -> Path | None:
    """Our cgroup's dir under a mount of (part of) a hierarchy, or None when the mount does not show it."""
    root = root.rstrip("/")
    if own != root and not own.startswith(root + "/"):
        return None
    return Path(mountpoint) / own[len(root) :].lstrip("/")


@functools.cache
def available() -> dict[str, Hierarchy | str]:
    """Each controller's hierarchy, or the reason this process cannot use it."""
    try:
        with open("/proc/self/mountinfo") as f, open("/proc/self/cgroup") as g:
            v1, v2 = locate(f.read(), g.read())
    except OSError as exc:
        return dict.fromkeys(CONTROLLERS, f"cannot read this process's cgroups: {exc}")
    v2_controllers: set[str] = set()
    if v2 is not None:
        with contextlib.suppress(OSError):
            v2_controllers = set((v2.own / "cgroup.controllers").read_text().split())
    found: dict[str, Hierarchy | str] = {}
    for controller in CONTROLLERS:
        if controller in v1:
            found[controller] = v1[controller]
        elif v2 is not None and controller in v2_controllers:
            found[controller] = v2
        else:
            found[controller] = f"no cgroup {controller} controller is mounted for this process"
    return found


class CgroupSet:
    """The cgroups of one sandbox: a dir per v1 controller, or one shared dir under v2."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.dirs: dict[str, Path] = {}
        self._counters: dict[str, tuple[Path, str]] = {}
        self._attached: dict[Path, int] = {}  # the pid each dir got last (a pre-launched init's)

    def add(self, controller: str, hierarchy: Hierarchy, settings: Sequence[tuple[str, str, bool]]) -> Path:
        """Create (or reuse, under v2) the controller's cgroup and write ``(file, value, required)``."""
        path = hierarchy.own / PARENT / self.name
        if hierarchy.version == 2:
            _enable_v2(hierarchy.own, controller)
        created = _make(path, controller if hierarchy.version == 2 else None)
        try:
            for file, value, required in settings:
                if required or (path / file).exists():
                    (path / file).write_text(value)
        except OSError:
            if created:
                with contextlib.suppress(OSError):
                    path.rmdir()
            raise
        self.dirs[controller] = path
        counter = {"memory": OOM_COUNTER, "pids": PIDS_COUNTER}.get(controller)
        if counter is not None:
            self._counters[controller] = (path / counter[hierarchy.version - 1], counter[2])
        return path

    def attach(self, pid: int) -> None:
        """Move ``pid`` into every cgroup of the set it is not in yet (each move into a v1 hierarchy
        waits for an RCU grace period, so none is repeated)."""
        for path in dict.fromkeys(self.dirs.values()):
            if self._attached.get(path) != pid:
                (path / "cgroup.procs").write_text(str(pid))
                self._attached[path] = pid

    def counter(self, controller: str) -> int:
        """The OOM-kill (memory) or fork-refused (pids) count; 0 without such a cgroup."""
        entry = self._counters.get(controller)
        if entry is None:
            return 0
        file, key = entry
        with contextlib.suppress(OSError), open(file, "rb") as f:
            for line in f.read().decode().splitlines():
                name, _, value = line.partition(" ")
                if name == key:
                    return int(value)
        return 0

    def remove(self) -> None:
        """Remove every cgroup, SIGKILLing stragglers first; waits briefly for dying processes."""
        for path in dict.fromkeys(self.dirs.values()):
            remove_cgroup(path)
        for parent in {path.parent for path in self.dirs.values()}:
            _remove_parent(parent)
        self.dirs.clear()
        self._counters.clear()
        self._attached.clear()


def _make(path: Path, v2_controller: str | None) -> bool:
    """mkdir a sandbox cgroup (False if it exists: v2 shares one) and, on demand, its parent.

    Retried because the last sandbox to leave the parent, in another thread or process, rmdirs it.
    """
    for _ in range(PARENT_RETRIES - 1):
        with contextlib.suppress(FileNotFoundError):
            return _make_once(path, v2_controller)
    return _make_once(path, v2_controller)


def _make_once(path: Path, v2_controller: str | None) -> bool:
    with contextlib.suppress(FileExistsError):
        path.parent.mkdir()
    if v2_controller is not None:
        _enable_v2(path.parent, v2_controller)
    try:
        path.mkdir()
    except FileExistsError:
        return False
    return True


def _remove_parent(parent: Path) -> None:
    """rmdir the shared parent once it is empty, so no cgroup of ours outlives its sandboxes."""
    with contextlib.suppress(OSError):  # EBUSY: sandboxes of this or another process are still in it
        parent.rmdir()


def _enable_v2(parent: Path, controller: str) -> None:
    enabled = (parent / "cgroup.subtree_control").read_text().split()
    if controller not in enabled:
        try:
            (parent / "cgroup.subtree_control").write_text(f"+{controller}")
        except OSError as exc:
            if exc.errno == errno.EBUSY:
                why = f"cannot enable it below {parent}, which holds processes (give ARES its own cgroup)"
                raise OSError(exc.errno, why) from exc
            raise


def remove_cgroup(path: Path) -> bool:
    """rmdir a sandbox cgroup, killing what is left in it; False if it is still busy after a while."""
    deadline = time.monotonic() + REMOVE_PATIENCE_S
    while True:
        try:
            path.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                return False
        with contextlib.suppress(OSError, ValueError):
            for pid in (path / "cgroup.procs").read_text().split():
                os.kill(int(pid), signal.SIGKILL)
        time.sleep(0.01)


def sweep_stale() -> None:
    """Remove the sandbox cgroups of processes that no longer exist: the children of our ``PARENT``."""
    parents = {h.own / PARENT for h in available().values() if isinstance(h, Hierarchy)}
    for parent in parents:
        try:
            with os.scandir(parent) as entries:
                names = [e.name for e in entries if e.is_dir(follow_symlinks=False)]
        except OSError:  # no sandbox was ever made here, or we may not look
            continue
        for name in names:
            match = NAME.fullmatch(name)
            if match is not None and not process_alive(int(match.group(1))):
                remove_cgroup(parent / name)
        _remove_parent(parent)


def process_alive(pid: int) -> bool:
    """Whether ``pid`` exists (a pid that cannot be a process's counts as dead)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        return True
    return True
