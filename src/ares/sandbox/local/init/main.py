"""The init's start-up: new namespaces, the filesystem and cgroups in the dialogue with the host
(see the protocol in ``ares.sandbox.local._init``), then the fork of pid 1, which serves commands.
Standard library only."""

import contextlib
import ctypes
import os
import signal
import socket

from .filesystem import enter_root, harden, remove_files, setup_filesystem
from .kernel import (
    CLONE_NEWCGROUP,
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUSER,
    CLONE_NEWUTS,
    PR_SET_PDEATHSIG,
    check,
    libc,
)
from .serve import serve
from .wire import Wire


def scrub_cmdline() -> None:
    """Overwrite this process's argv memory with "ares-init", so /proc/1/cmdline inside the sandbox
    shows no host path (the interpreter and this script's location)."""
    with open("/proc/self/stat", "rb") as f:
        stat = f.read()
    fields = stat[stat.rfind(b")") + 2 :].split()
    start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end (fields 48 and 49 of stat)
    title = b"ares-init"[: end - start - 1]
    ctypes.memset(start, 0, end - start)
    ctypes.memmove(start, title, len(title))


def main(ctl_fd: int, parent: int, zygote_child: bool = False) -> None:
    """Run the init on control socket ``ctl_fd``; ``parent`` (the host, or the zygote that forked us)
    must still be our parent once PR_SET_PDEATHSIG is set, or its death went unnoticed."""
    ctl = socket.socket(fileno=ctl_fd)
    scrub_cmdline()
    tie_to_parent(parent)
    try:
        cfg = build_sandbox(ctl, parent, zygote_child)
    except Exception as exc:
        Wire.stage(ctl, Wire.STAGE_ERROR, error=f"{type(exc).__name__}: {exc}")
        os._exit(1)
    pid1 = os.fork()
    if pid1:  # stay as the parent so pid 1 dies with us (and we die with the host)
        Wire.stage(ctl, Wire.STAGE_FORKED, pid=pid1)
        ctl.close()
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        _, status = os.waitpid(pid1, 0)
        os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    try:
        shell = become_pid1(cfg)
        Wire.stage(ctl, Wire.STAGE_READY, shell=shell)
    except Exception as exc:
        Wire.stage(ctl, Wire.STAGE_ERROR, error=f"{type(exc).__name__}: {exc}")
        os._exit(1)
    serve(ctl, shell)
    os._exit(0)


def build_sandbox(ctl: socket.socket, parent: int, zygote_child: bool) -> dict:
    """The outer init's start-up steps (see the protocol above): new namespaces, id maps, the
    filesystem, cgroups. Returns the host's config."""
    fds: list[int] = []
    cfg = Wire.recv(ctl, fds)
    # Out of the OOM killer's reach, for pid 1 and every shepherd (needs root; unprivileged they
    # stay at 0, still below the commands' 500).
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as f:
        f.write(str(cfg["oom_score_adj"]))
    with open("/proc/sys/kernel/cap_last_cap") as f:
        cfg["cap_last"] = int(f.read())
    flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET
    check(libc.unshare(flags), "unshare")
    Wire.stage(ctl, Wire.STAGE_UNSHARED)
    mapped = Wire.recv(ctl, fds)
    if mapped.get(Wire.OP) != Wire.OP_MAPPED:
        os._exit(1)
    setup_filesystem(cfg, fds, mapped.get("resolv"))
    if zygote_child:
        # Becoming the namespace's root (a new host euid) cleared PR_SET_PDEATHSIG. A direct
        # child relies on its control socket closing with the host; a zygote's must die with
        # the zygote, and the zygote is single-threaded and lives as long as the host.
        tie_to_parent(parent)
    for fd in fds:
        os.close(fd)
    if Wire.recv(ctl, fds).get(Wire.OP) != Wire.OP_LIMITED:
        os._exit(1)
    # Now that the host has put us in the sandbox's cgroups, they become the root of what
    # /proc/self/cgroup shows inside (no host cgroup path).
    check(libc.unshare(CLONE_NEWCGROUP), "unshare cgroup namespace")
    return cfg


def become_pid1(cfg: dict) -> str:
    """As pid 1: enter the sandbox's root, drop what a sandbox must not have; returns its shell."""
    enter_root(cfg)
    remove_files(cfg.get("remove", ()))
    harden(cfg)
    shell = next((s for s in ("/bin/bash", "/bin/sh") if os.path.exists(s)), None)
    if shell is None:
        raise FileNotFoundError("the image has neither /bin/bash nor /bin/sh")
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1):
        signal.signal(sig, signal.SIG_DFL)  # a pid namespace's init never gets these from inside
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps orphans for pid 1
    return shell


def tie_to_parent(parent: int) -> None:
    """SIGKILL when ``parent`` dies; exit now if it already has (we were re-parented meanwhile)."""
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)
