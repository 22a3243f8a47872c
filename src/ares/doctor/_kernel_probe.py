"""Kernel probes of ``ares doctor``, run as a throwaway process: ``python -I -S _kernel_probe.py MODE ...``.

Every mode unshares namespaces or mounts filesystems, which must never happen in the doctor's own
process: this one exits right after, and its mount namespace goes with it (with every mount made in
it; mounts are made private first, so none ever propagates to the host). Standalone on purpose
(stdlib only, no ``ares`` import) so that ``-I -S`` keeps start-up near 20 ms. Prints one JSON
object, ``{"ok": bool, "detail": str}``; the caller removes the dirs it passed.

Modes:
- ``userns``: create a user namespace and map uid/gid 0 in it to ours;
- ``overlay DIR``: in a user + mount namespace, mount an overlay (``userxattr``) of dirs in DIR, write
  through it;
- ``idmap LAYERS SCRATCH`` / ``idmap-tmpfs LAYERS SCRATCH`` (as root): an overlay whose lower layer
  (in LAYERS) and upper dir (in SCRATCH, or a tmpfs mounted there) are idmapped clones shifted by a
  user namespace mapping ``0 1879048192 65536``; a process that is root in that namespace must see
  the layer's files as its own, and what it creates must land on disk owned by 0.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import platform
import sys
from collections.abc import Callable

CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
MS_REC, MS_PRIVATE, MNT_DETACH = 0x4000, 1 << 18, 2
AT_FDCWD, AT_EMPTY_PATH = -100, 0x1000
OPEN_TREE_CLONE, MOVE_MOUNT_F_EMPTY_PATH, MOUNT_ATTR_IDMAP = 1, 4, 0x100000
#: (open_tree, move_mount, mount_setattr) numbers; the unified syscall table gives them everywhere.
SYSCALLS = {"x86_64": (428, 429, 442), "aarch64": (428, 429, 442)}
#: Where sandbox root lands on the host when ARES runs as root (the first block of its id ranges).
HOST_FIRST_ID, ID_COUNT = 0x7000_0000, 65_536
#: Why a step may fail with ENOSYS or EINVAL on an older kernel.
HINTS = {
    "open_tree": "the new mount API needs Linux >= 5.2",
    "mount_setattr": "idmapped mounts need Linux >= 5.12 and a filesystem that supports them",
    "tmpfs": "tmpfs supports idmapped mounts from Linux 6.3",
    "overlay-idmapped": "overlayfs accepts idmapped layers from Linux 5.19",
    "overlay-tmpfs": "overlayfs accepts idmapped layers from Linux 5.19, a tmpfs upper dir in a user "
    "namespace (user xattrs on tmpfs) from 6.6",
    "overlay-userxattr": "overlayfs in a user namespace (userxattr) needs Linux >= 5.11",
}

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


class Failed(Exception):
    """A step of a probe failed; the message says which step and why."""


class MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


def checked(rc: int, step: str, hint: str | None = None) -> int:
    """``rc`` unless it reports a failure, which becomes a Failed naming the step and the errno."""
    if rc >= 0:
        return rc
    err = ctypes.get_errno()
    extra = f"; {HINTS[hint]}" if hint and err in (errno.ENOSYS, errno.EINVAL, errno.EPERM) else ""
    raise Failed(f"{step}: {os.strerror(err)} ({errno.errorcode.get(err, err)}){extra}")


def write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def map_ids(pid: str, uid: int, gid: int, count: int = 1, deny_setgroups: bool = True) -> None:
    if deny_setgroups:
        write(f"/proc/{pid}/setgroups", "deny")
    write(f"/proc/{pid}/uid_map", f"0 {uid} {count}\n")
    write(f"/proc/{pid}/gid_map", f"0 {gid} {count}\n")


def mount(source: str, target: str, fstype: str, options: str, hint: str | None = None) -> None:
    data = options.encode()
    rc = libc.mount(source.encode(), target.encode(), fstype.encode(), ctypes.c_ulong(0), data)
    checked(rc, f"mount -t {fstype} at {target}", hint)


def private_mount_namespace() -> None:
    """Enter a new mount namespace whose mounts never propagate back to the host's."""
    checked(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    checked(libc.mount(b"none", b"/", None, ctypes.c_ulong(MS_REC | MS_PRIVATE), None), "make / private")


def userns() -> str:
    uid, gid = os.geteuid(), os.getegid()
    checked(libc.unshare(CLONE_NEWUSER), "unshare(CLONE_NEWUSER)")
    map_ids("self", uid, gid)
    if os.getuid() != 0:
        raise Failed(f"the uid map was written but uid inside is {os.getuid()}, not 0")
    return f"created one; uid 0 inside is uid {uid} outside"


def overlay(base: str) -> str:
    uid, gid = os.geteuid(), os.getegid()
    lower, upper, work, merged = (os.path.join(base, n) for n in ("lower", "upper", "work", "merged"))
    for path in (lower, upper, work, merged):
        os.mkdir(path)
    write(os.path.join(lower, "probe"), "lower")
    checked(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare(CLONE_NEWUSER | CLONE_NEWNS)")
    map_ids("self", uid, gid)
    checked(libc.mount(b"none", b"/", None, ctypes.c_ulong(MS_REC | MS_PRIVATE), None), "make / private")
    options = f"lowerdir={lower},upperdir={upper},workdir={work},userxattr"
    mount("overlay", merged, "overlay", options, "overlay-userxattr")
    try:
        with open(os.path.join(merged, "probe")) as f:
            if f.read() != "lower":
                raise Failed("the overlay does not show its lower layer's file")
        write(os.path.join(merged, "created"), "upper")
        if not os.path.exists(os.path.join(upper, "created")):
            raise Failed("a file written through the overlay is missing from its upper dir")
    finally:
        libc.umount2(merged.encode(), MNT_DETACH)
    return "mounted one (userxattr) in a user namespace and wrote through it"


def idmap(layers: str, scratch: str, on_tmpfs: bool = False) -> str:
    numbers = SYSCALLS.get(platform.machine())
    if numbers is None:
        raise Failed(f"no known syscall numbers for {platform.machine()}")
    lower = os.path.join(layers, "lower")
    rw, lower_id, rw_id, merged = (os.path.join(scratch, n) for n in ("rw", "lower-id", "rw-id", "merged"))
    for path in (lower, rw, lower_id, rw_id, merged):
        os.mkdir(path)
    write(os.path.join(lower, "probe"), "lower")
    os.chmod(scratch, 0o711)  # sandbox root resolves the overlay's paths from here
    userns_fd = idmap_namespace()
    mounted: list[str] = []
    try:
        private_mount_namespace()
        if on_tmpfs:
            mount("tmpfs", rw, "tmpfs", "size=1m,mode=0755")
            mounted.append(rw)
        os.mkdir(os.path.join(rw, "upper"))
        os.mkdir(os.path.join(rw, "work"))
        idmapped_clone(numbers, lower, lower_id, userns_fd)
        mounted.append(lower_id)
        idmapped_clone(numbers, rw, rw_id, userns_fd, "tmpfs" if on_tmpfs else "mount_setattr")
        mounted.append(rw_id)
        as_sandbox_root(scratch, userns_fd, "overlay-tmpfs" if on_tmpfs else "overlay-idmapped")
        st = os.stat(os.path.join(rw, "upper", "created"))
        if (st.st_uid, st.st_gid) != (0, 0):
            raise Failed(
                f"a file sandbox root created landed on disk owned by {st.st_uid}:{st.st_gid}, not 0"
            )
    finally:
        for path in reversed(mounted):
            libc.umount2(path.encode(), MNT_DETACH)
        os.close(userns_fd)
    upper = "a tmpfs upper dir" if on_tmpfs else "an upper dir"
    return (
        f"overlay of an idmapped layer and {upper} (0 -> {HOST_FIRST_ID}, {ID_COUNT} ids): sandbox root "
        "owns the layer's files, and its new files are stored owned by 0"
    )


def idmap_namespace() -> int:
    """An fd of a new user namespace mapping 0 to HOST_FIRST_ID (its maps written from out here)."""
    ready_r, ready_w = os.pipe()
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready_r)
        os.close(done_w)
        ok = libc.unshare(CLONE_NEWUSER) == 0
        os.write(ready_w, b"1" if ok else str(ctypes.get_errno()).encode())
        os.read(done_r, 1)
        os._exit(0)
    os.close(ready_w)
    os.close(done_r)
    try:
        answer = os.read(ready_r, 16)
        if answer != b"1":
            err = int(answer or errno.EIO)
            raise Failed(f"unshare(CLONE_NEWUSER): {os.strerror(err)}")
        map_ids(str(pid), HOST_FIRST_ID, HOST_FIRST_ID, ID_COUNT, deny_setgroups=False)
        return os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(ready_r)
        os.close(done_w)
        os.waitpid(pid, 0)


def idmapped_clone(
    numbers: tuple[int, int, int], source: str, target: str, userns_fd: int, hint: str = "mount_setattr"
) -> None:
    """Mount at ``target`` a clone of ``source`` whose ids are shifted by the namespace's map."""
    open_tree, move_mount, mount_setattr = numbers
    flags = ctypes.c_uint(OPEN_TREE_CLONE | os.O_CLOEXEC)
    fd = checked(
        libc.syscall(open_tree, ctypes.c_long(AT_FDCWD), source.encode(), flags), "open_tree", "open_tree"
    )
    try:
        attr = MountAttr(MOUNT_ATTR_IDMAP, 0, 0, userns_fd)
        rc = libc.syscall(
            mount_setattr, ctypes.c_long(fd), b"", ctypes.c_uint(AT_EMPTY_PATH), ctypes.byref(attr),
            ctypes.c_size_t(ctypes.sizeof(attr)),
        )  # fmt: skip
        checked(rc, f"mount_setattr(MOUNT_ATTR_IDMAP) of {source}", hint)
        rc = libc.syscall(
            move_mount, ctypes.c_long(fd), b"", ctypes.c_long(AT_FDCWD), target.encode(),
            ctypes.c_uint(MOVE_MOUNT_F_EMPTY_PATH),
        )  # fmt: skip
        checked(rc, f"move_mount to {target}")
    finally:
        os.close(fd)


def as_sandbox_root(scratch: str, userns_fd: int, hint: str) -> None:
    """In a child that is root of the idmap namespace, as a sandbox's init is: mount the overlay of the
    idmapped layers in a mount namespace of its own, check who owns the layer's file, create one."""
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(err_r)
        try:
            os.chdir(scratch)  # before leaving host root: the path to it may be closed to sandbox root
            checked(libc.setns(userns_fd, CLONE_NEWUSER), "setns into the idmap user namespace")
            os.setgroups([])
            os.setresgid(0, 0, 0)
            os.setresuid(0, 0, 0)
            checked(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS) as sandbox root")
            options = "lowerdir=lower-id,upperdir=rw-id/upper,workdir=rw-id/work,userxattr"
            mount("overlay", "merged", "overlay", options, hint)
            st = os.stat("merged/probe")
            if (st.st_uid, st.st_gid) != (0, 0):
                raise Failed(f"sandbox root sees the layer's root-owned file as {st.st_uid}:{st.st_gid}")
            write("merged/created", "upper")
        except BaseException as exc:
            os.write(err_w, describe(exc).encode())
            os._exit(1)
        os._exit(0)
    os.close(err_w)
    with os.fdopen(err_r, "rb") as f:
        message = f.read().decode()
    _, status = os.waitpid(pid, 0)
    if status != 0:
        raise Failed(message or f"the sandbox-root process failed (wait status {status})")


def describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.filename or 'a step'}: {exc.strerror}"
    return str(exc) or type(exc).__name__


MODES: dict[str, Callable[..., str]] = {
    "userns": userns,
    "overlay": overlay,
    "idmap": idmap,
    "idmap-tmpfs": lambda layers, scratch: idmap(layers, scratch, on_tmpfs=True),
}


def main(argv: list[str]) -> None:
    try:
        result = {"ok": True, "detail": MODES[argv[1]](*argv[2:])}
    except (Failed, OSError) as exc:
        result = {"ok": False, "detail": describe(exc)}
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv)
