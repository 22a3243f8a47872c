"""Who sandbox root is on the host: id ranges for root-run sandboxes and idmapped image layers.

When ARES runs as root, sandbox root must not be host root. Each sandbox gets its own block of 65,536
host ids (``0 -> BASE + slot * 65536``), like Podman's ``--userns=auto``: its processes and the files
it creates are owned by ids no other sandbox and no host account uses, so one escaped sandbox does not
own the files or processes of another. A slot is held by an ``flock`` on ``LOCK_DIR/<slot>`` for the
sandbox's lifetime, so concurrent ARES processes on a machine never share one, and a crashed process's
slots free themselves.

Layers on disk stay canonical (owned by 0, as image layers and the host's /usr are): the host gives
the sandbox idmapped clones of every layer and of its scratch dir (``open_tree`` + ``mount_setattr``,
Linux >= 5.19; tmpfs scratch dirs need >= 6.3), so files look root-owned inside and a sandbox's diff
is written to disk with canonical owners, ready to be a layer under any other sandbox's range.

Unprivileged, sandbox root is the invoking user (one id mapped), as before.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from ares.errors import SandboxUnavailableError

#: First host id of the blocks (0x70000000: above regular, system and subordinate ids, below 2^31).
BASE = 0x7000_0000
BLOCK = 65_536
SLOTS = 4_095
LOCK_DIR = Path("/run/ares/idranges")

SYS_OPEN_TREE, SYS_MOUNT_SETATTR = 428, 442  # the same on every architecture (unified table)
OPEN_TREE_CLONE, OPEN_TREE_CLOEXEC = 1, os.O_CLOEXEC
AT_FDCWD, AT_EMPTY_PATH = -100, 0x1000
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID, MOUNT_ATTR_NODEV, MOUNT_ATTR_NOEXEC = 0x1, 0x2, 0x4, 0x8
MOUNT_ATTR_IDMAP = 0x100000
#: Flags of a bind mount (the sandbox cannot clear them): read-only binds, and writable ones.
BIND_READ_ONLY = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV
BIND_WRITABLE = MOUNT_ATTR_NOEXEC | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV

_libc = ctypes.CDLL(None, use_errno=True)


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


@dataclass(frozen=True, slots=True)
class IdRange:
    """A block of host ids held for one sandbox: in-sandbox id ``i`` is host id ``first + i``."""

    first: int
    size: int
    lock_fd: int

    def map_line(self) -> str:
        return f"0 {self.first} {self.size}\n"

    def release(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.lock_fd)


def root_mapped() -> bool:
    """Whether sandboxes of this process get an id range (ARES runs as host root)."""
    return os.geteuid() == 0


def allocate() -> IdRange:
    """Hold a free slot's lock and return its id range. Raises when all slots are taken."""
    directory = _lock_dir()
    start = secrets.randbelow(SLOTS)
    for step in range(SLOTS):
        slot = (start + step) % SLOTS
        fd = os.open(directory / str(slot), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return IdRange(BASE + slot * BLOCK, BLOCK, fd)
    raise SandboxUnavailableError(f"all {SLOTS} sandbox id ranges are in use on this machine")


def _lock_dir() -> Path:
    """``LOCK_DIR``, created root-only; refused if someone else owns it."""
    with contextlib.suppress(FileExistsError):
        LOCK_DIR.parent.mkdir(mode=0o755, exist_ok=True)
        LOCK_DIR.mkdir(mode=0o700)
    st = os.lstat(LOCK_DIR)
    if not os.path.isdir(LOCK_DIR) or os.path.islink(LOCK_DIR) or st.st_uid != 0 or st.st_mode & 0o022:
        raise SandboxUnavailableError(
            f"{LOCK_DIR} must be a directory owned by root and writable only by it; remove it and retry"
        )
    return LOCK_DIR


def idmapped_clone(path: str, userns_fd: int, *, flags: int = 0) -> int:
    """A detached clone of the mount at ``path`` whose ids are shifted by the user namespace's map,
    with the mount ``flags`` (``MOUNT_ATTR_*``) added."""
    fd = _libc.syscall(SYS_OPEN_TREE, AT_FDCWD, path.encode(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC)
    if fd < 0:
        raise _error(f"open_tree {path}")
    attr = _MountAttr(MOUNT_ATTR_IDMAP | flags, 0, 0, userns_fd)
    if _libc.syscall(SYS_MOUNT_SETATTR, fd, b"", AT_EMPTY_PATH, ctypes.byref(attr), ctypes.sizeof(attr)) < 0:
        err = _error(f"idmapped mount of {path}")
        os.close(fd)
        raise err
    return fd


def _error(what: str) -> SandboxUnavailableError:
    err = ctypes.get_errno()
    return SandboxUnavailableError(
        f"{what}: {os.strerror(err)}. Running the local sandbox as root needs idmapped mounts "
        "(Linux >= 5.19, and >= 6.3 for a disk limit's tmpfs); run ARES as an unprivileged user or use "
        "the docker backend on older kernels (see `ares doctor`)"
    )
