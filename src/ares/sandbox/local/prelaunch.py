"""Pre-launched inits: sandbox inits forked by the zygote and already in cgroups of their own before
any sandbox asks for one.

Why: moving a process into a cgroup v1 hierarchy waits for an RCU grace period (5-13 ms on a
2-core VM, not CPU time), and every sandbox start paid it on its critical path, twice per RL
episode (the agent's sandbox and the verifier's). A background thread keeps up to
``$ARES_SANDBOX_PRELAUNCH`` inits (default 0: off; measured quietly, 2 take 6-7 ms off a lone
episode's reset but nothing off episodes/s at concurrency 2 or more, since the refill spends that
CPU anyway: docs/benchmarks.md) waiting for their config, each
attached to a fresh set of empty memory/pids cgroups. ``take()`` hands one to a starting sandbox,
whose limits then write their settings into exactly those cgroups before the init forks pid 1, as
for an init attached on the spot: the init has not unshared, mounted or been told anything yet,
so nothing of a sandbox exists until a sandbox adopts it. Its output goes to an anonymous file
(a memfd) that the adopting sandbox quotes if the start fails; a waiting init leaves no file behind.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
from dataclasses import dataclass
from pathlib import Path

from ares.sandbox.local import cgroups, janitor, zygote

ENV_SIZE = "ARES_SANDBOX_PRELAUNCH"
DEFAULT_SIZE = 0
#: The controllers a sandbox's default limits use (memory, pids); others are attached on start.
CONTROLLERS = ("memory", "pids")


@dataclass(frozen=True, slots=True)
class Prelaunched:
    """An init waiting for its config (its control socket, process, log memfd) and its cgroups."""

    sock: socket.socket
    proc: zygote.ZygoteInit
    log_fd: int
    cgroups: cgroups.CgroupSet

    @property
    def log(self) -> Path:
        """The init's output, readable through this process's fd table while ``log_fd`` is open."""
        return Path(f"/proc/self/fd/{self.log_fd}")

    @property
    def janitor_id(self) -> str:
        return f"prelaunched-{self.cgroups.name}"

    def alive(self) -> bool:
        """Whether it still waits (a zygote that died took its inits with it)."""
        return not self.proc.exited()

    def discard(self) -> None:
        """Kill it, wait for it, and remove its cgroups and log (blocking)."""
        janitor.unregister(self.janitor_id)
        self.sock.close()
        self.proc.kill_blocking()
        self.cgroups.remove()
        os.close(self.log_fd)

    def adopted(self) -> None:
        """A sandbox owns it now (its processes, cgroups and log fd go with that sandbox)."""
        janitor.unregister(self.janitor_id)


def size() -> int:
    """How many inits to keep waiting ($ARES_SANDBOX_PRELAUNCH, default 0; 0 or junk: none)."""
    value = os.environ.get(ENV_SIZE, str(DEFAULT_SIZE))
    return int(value) if value.isdigit() else 0


_lock = threading.Lock()
_ready: list[Prelaunched] = []
_stale: list[Prelaunched] = []  # dead ones (their zygote died), discarded by the filling thread
_filling = False


def waiting() -> int:
    """How many inits wait right now (for diagnostics and tests)."""
    with _lock:
        return len(_ready)


def waiting_pids() -> list[int]:
    """The host pids of the inits waiting right now (they are no sandbox's yet)."""
    with _lock:
        return [item.proc.pid for item in _ready]


def filling() -> bool:
    """Whether the background thread is launching (or discarding) inits at the moment."""
    with _lock:
        return _filling


def take() -> Prelaunched | None:
    """A waiting init for a sandbox that is starting (None: none is ready; start one directly).
    Whatever it took is refilled in the background."""
    if size() == 0 or not zygote.enabled():  # a direct spawn was asked for: never a zygote's child
        return None
    found = None
    with _lock:
        while _ready and found is None:
            item = _ready.pop()
            if item.alive():
                found = item
            else:
                _stale.append(item)
    if found is not None:
        found.adopted()
    _refill()
    return found


def _refill() -> None:
    """Start the filling thread unless it runs already."""
    global _filling
    with _lock:
        if _filling or (len(_ready) >= size() and not _stale) or not _hierarchies():
            return
        _filling = True
    try:
        threading.Thread(target=_fill, name="ares-sandbox-prelaunch", daemon=True).start()
    except RuntimeError:  # no thread can be started now (interpreter shutting down)
        with _lock:
            _filling = False


def _fill() -> None:
    global _filling
    try:
        with _lock:
            stale, _stale[:] = list(_stale), []
        for item in stale:
            item.discard()
        while True:
            with _lock:
                if len(_ready) >= size():
                    return
            item = _launch_one()
            if item is None:
                return
            with _lock:
                _ready.append(item)
    finally:
        with _lock:
            _filling = False


def _hierarchies() -> dict[str, cgroups.Hierarchy]:
    found = cgroups.available()
    return {c: h for c in CONTROLLERS if isinstance(h := found[c], cgroups.Hierarchy)}


def _launch_one() -> Prelaunched | None:
    """An init from the zygote, attached to new empty cgroups; None if any step fails."""
    log_fd = os.memfd_create("ares-init-log", os.MFD_CLOEXEC)
    started = zygote.start_init_blocking(log_fd)
    if started is None:
        os.close(log_fd)
        return None
    sock, proc = started
    group = cgroups.CgroupSet(f"ares-{os.getpid()}-{secrets.token_hex(6)}")
    item = Prelaunched(sock, proc, log_fd, group)
    janitor.register(item.janitor_id, [proc.pid], None, group.remove)
    try:
        for controller, hierarchy in _hierarchies().items():
            group.add(controller, hierarchy, ())
        group.attach(proc.pid)
    except OSError:
        item.discard()
        return None
    return item


def _after_fork_in_child() -> None:
    """A fork()ed child neither owns the parent's waiting inits nor may kill them."""
    global _lock, _filling
    _lock = threading.Lock()
    _filling = False
    for item in (*_ready, *_stale):
        item.sock.close()
        item.proc.forget()
        os.close(item.log_fd)
    _ready.clear()
    _stale.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)
