"""The sandbox's filesystem, built by the init: the overlays of the mount plan, binds, a minimal /dev
and resolv.conf (outer init), then as pid 1 the switch into that root, a masked /proc and the
dropped capabilities and seccomp filter. Standard library only."""

import contextlib
import ctypes
import errno
import fcntl
import os
import socket
import stat
import struct

from .kernel import (
    AT_FDCWD,
    MNT_DETACH,
    MOVE_MOUNT_F_EMPTY_PATH,
    MS_BIND,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    MS_REMOUNT,
    PR_CAPBSET_DROP,
    PR_SET_DUMPABLE,
    PR_SET_NO_NEW_PRIVS,
    PR_SET_SECCOMP,
    SECCOMP_MODE_FILTER,
    SYS_MOVE_MOUNT,
    SYS_PIVOT_ROOT,
    SockFprog,
    check,
    libc,
    mount,
)

# Capabilities a sandboxed root keeps (the usual container default); all others leave the bounding set.
KEEP_CAPS = {0, 1, 3, 4, 5, 6, 7, 8, 10, 13, 18, 27, 29, 31}


DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")


# /proc as runc leaves it: kernel knobs read-only, files that leak host state masked.
PROC_READONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs")


PROC_MASKED = ("kcore", "keys", "timer_list", "kmsg", "latency_stats", "sched_debug", "acpi", "scsi")


# ---------------------------------------------------------------------- filesystem (outer init)
def setup_filesystem(cfg: dict, fds: list[int], resolv: str | None) -> None:
    """Mount every overlay of the plan on ``root/`` of the sandbox dir, plus a minimal /dev.

    Layers and the scratch dir are first attached under a private staging tmpfs (idmapped clones
    from the host, or bind mounts when unprivileged) and named relative to it, so the overlays'
    mount options show no host path; the staging mounts are detached once the overlays hold them.
    Paths are relative to the sandbox dir: once this process is the namespace's root (a host id that
    may not search the host's state dir), only the sandbox dir and below are reachable.
    """
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    os.chdir(cfg["scratch"])
    become_namespace_root(cfg)
    mount("tmpfs", "stage", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=755,size=64k")
    os.chdir("stage")
    sources = [*cfg["layers"], cfg["scratch"]]
    for index, source in enumerate(sources):
        name = f"l{index}" if index < len(cfg["layers"]) else "s"
        os.mkdir(name)
        if cfg["idmapped"]:
            check(libc.syscall(SYS_MOVE_MOUNT, fds[index], b"", AT_FDCWD, name.encode(),
                               MOVE_MOUNT_F_EMPTY_PATH), f"attach layer {index}")  # fmt: skip
        else:
            mount(source, name, None, MS_BIND)
    if resolv is not None:
        with open("resolv.conf", "w") as f:
            f.write(resolv)
    for m in cfg["mounts"]:
        lower = ":".join(f"l{i}" for i in m["layers"])
        opts = f"lowerdir={lower},upperdir=s/upper/{m['key']},workdir=s/work/{m['key']},userxattr"
        mount("overlay", "../root" + m["target"].rstrip("/"), "overlay", 0, opts)
    attach_binds(cfg, fds[len(sources) :])
    setup_dev("../root")
    if resolv is not None:
        bind_resolv_conf("../root", "resolv.conf")
    os.chdir("..")
    check(libc.umount2(b"stage", MNT_DETACH), "detach the staging mounts")


def attach_binds(cfg: dict, fds: list[int]) -> None:
    """Show host dirs inside (the verifier's tests read-only, its reward dir writable): idmapped
    clones made by the host, or plain binds when unprivileged. The host created each target as a
    real directory in the upper dir, so no component of its path is a symlink."""
    for index, bind in enumerate(cfg["binds"]):
        target = "../root" + bind["target"]
        locked = MS_NOSUID | MS_NODEV | (MS_RDONLY if bind["readonly"] else MS_NOEXEC)
        if cfg["idmapped"]:
            check(libc.syscall(SYS_MOVE_MOUNT, fds[index], b"", AT_FDCWD, target.encode(),
                               MOVE_MOUNT_F_EMPTY_PATH), f"attach {bind['target']}")  # fmt: skip
        else:
            mount(bind["source"], target, None, MS_BIND)
            mount(None, target, None, MS_BIND | MS_REMOUNT | locked)


def setup_dev(root: str) -> None:
    dev = root + "/dev"
    mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755,size=65536k")
    for node in DEV_NODES:
        path = f"{dev}/{node}"
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o666))
        mount(f"/dev/{node}", path, None, MS_BIND)
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
        ("ptmx", "pts/ptmx"),
    ):
        os.symlink(target, f"{dev}/{name}")
    os.mkdir(f"{dev}/shm")
    mount("tmpfs", f"{dev}/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=262144k")
    os.mkdir(f"{dev}/pts")
    with contextlib.suppress(OSError):  # pseudo-terminals are a nicety; commands run without a tty
        mount("devpts", f"{dev}/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620")


def bind_resolv_conf(root: str, source: str) -> None:
    """The user-mode network's resolver, read-only over /etc/resolv.conf (created if the image has none)."""
    target = root + "/etc/resolv.conf"
    if os.path.islink(target) or not os.path.isfile(target):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(target)
        os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
    mount(source, target, None, MS_BIND)
    mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)


# ---------------------------------------------------------------------- pid 1
def enter_root(cfg: dict) -> None:
    """As pid 1 (in the sandbox dir): mount and mask /proc, pivot into root/ and detach the host's root."""
    root = "root"
    proc = root + "/proc"
    mount("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    mask_proc(proc, root + "/dev/null")
    os.chdir(root)
    nr = SYS_PIVOT_ROOT.get(os.uname().machine)
    if nr is None:
        raise OSError(errno.ENOSYS, f"pivot_root syscall number unknown for {os.uname().machine}")
    check(libc.syscall(nr, b".", b"."), "pivot_root")
    check(libc.umount2(b".", MNT_DETACH), "umount old root")
    os.chdir("/")


def remove_files(paths: list) -> None:
    """Delete start-up hooks the verifier's sandbox must not honour (``/etc/ld.so.preload``), from
    its own upper dir: resolved inside the sandbox's root, so a symlink cannot point outside."""
    for path in paths:
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            if stat.S_ISDIR(os.lstat(path).st_mode):
                os.rename(path, f"{path}.ares-ignored")
            else:
                os.unlink(path)


def mask_proc(proc: str, null: str) -> None:
    locked = MS_NOSUID | MS_NODEV | MS_NOEXEC
    for name in PROC_READONLY:
        path = f"{proc}/{name}"
        if os.path.exists(path):
            mount(path, path, None, MS_BIND | MS_REC)
            mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | locked)
    for name in PROC_MASKED:
        path = f"{proc}/{name}"
        if os.path.isdir(path):
            mount("tmpfs", path, "tmpfs", MS_RDONLY | locked, "size=4k,mode=555")
        elif os.path.exists(path):
            mount(null, path, None, MS_BIND)


def harden(cfg: dict) -> None:
    name = cfg["hostname"].encode()
    check(libc.sethostname(name, len(name)), "sethostname")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:  # bring loopback up
        ifreq = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, 0x8913, ifreq))[1]
        fcntl.ioctl(s, 0x8914, struct.pack("16sH14x", b"lo", flags | 1))
    for cap in range(cfg["cap_last"] + 1):
        if cap not in KEEP_CAPS:
            check(libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"drop capability {cap}")
    check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    check(libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "not dumpable")  # no ptrace of init from inside
    if cfg.get("seccomp"):
        program = cfg["seccomp"]
        buf = ctypes.create_string_buffer(program, len(program))
        fprog = SockFprog(len(program) // 8, ctypes.addressof(buf))
        check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "seccomp filter")


# ---------------------------------------------------------------------- start-up
def become_namespace_root(cfg: dict) -> None:
    """Root-run sandboxes: take uid/gid 0 of the new namespace (a host id of the sandbox's range)."""
    if cfg["idmapped"]:
        os.setgroups([])
        os.setresgid(0, 0, 0)
        os.setresuid(0, 0, 0)
