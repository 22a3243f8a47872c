"""Writing a layer dir entry by entry without ever following a link it made.

Used for every tree ARES did not write itself: image layers from a registry or an archive, snapshot
archives, a sandbox's committed diff. Paths are ``<mount key>/<path in the mount>``; deletions are
overlay whiteouts (character devices 0/0) and hidden dirs carry the opaque xattr, as overlayfs
itself writes them.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import stat
from pathlib import Path

from ares.images.rootfs import OPAQUE_XATTR

COPY_CHUNK = 1 << 20


class UnsafeEntry(ValueError):
    """An entry a layer must not get (a path through a non-directory, a duplicate, ...)."""


class LayerWriter:
    """Creates a new layer dir below ``root`` (which must not exist yet) entry by entry.

    Paths are relative to ``root`` (``<mount key>/<path in the mount>``). Every parent must be a dir
    this writer made (missing ones are made 0755), so nothing it writes can land outside ``root``
    through a symlink, and no entry is written twice. Owners are set when this process may (root),
    otherwise files stay owned by the invoking user, which is sandbox root unprivileged. Dir times
    are set by ``finish()``, after their content.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.kinds: dict[str, str] = {"": "dir"}
        self._dir_times: list[tuple[str, float]] = []
        self._root_user = os.geteuid() == 0
        root.mkdir(mode=0o755)

    def host_path(self, rel: str) -> str:
        return os.path.join(self.root, rel)

    def _parent(self, rel: str) -> None:
        if not rel or rel.startswith("/") or any(p in ("", ".", "..") for p in rel.split("/")):
            raise UnsafeEntry(f"{rel!r} is not a plain relative path")
        if rel in self.kinds and not (self.kinds[rel] == "dir"):
            raise UnsafeEntry(f"{rel!r} appears twice")
        parent = posixpath.dirname(rel)
        missing: list[str] = []
        while self.kinds.get(parent) is None:
            missing.append(parent)
            parent = posixpath.dirname(parent)
        if self.kinds[parent] != "dir":
            raise UnsafeEntry(f"{rel!r} lies below {parent!r}, which is not a directory")
        for path in reversed(missing):
            os.mkdir(self.host_path(path), 0o755)
            self.kinds[path] = "dir"

    def _own(self, path: str, uid: int, gid: int, fd: int | None = None) -> None:
        if not self._root_user and (uid, gid) != (os.geteuid(), os.getegid()):
            return
        if fd is not None:
            os.fchown(fd, uid, gid)
        else:
            os.lchown(path, uid, gid)

    def directory(self, rel: str, mode: int, uid: int, gid: int, mtime: float, opaque: bool = False) -> None:
        """A dir (or new attributes for one an earlier entry implied)."""
        self._parent(rel)
        path = self.host_path(rel)
        if rel not in self.kinds:
            os.mkdir(path, 0o700)
            self.kinds[rel] = "dir"
        self._own(path, uid, gid)
        os.chmod(path, stat.S_IMODE(mode), follow_symlinks=False)
        if opaque:
            self.opaque(rel)
        self._dir_times.append((path, mtime))

    def opaque(self, rel: str) -> None:
        if self.kinds.get(rel) != "dir":
            self._parent(rel)
            os.mkdir(self.host_path(rel), 0o755)
            self.kinds[rel] = "dir"
        os.setxattr(self.host_path(rel), OPAQUE_XATTR, b"y", follow_symlinks=False)

    def file(self, rel: str, mode: int, uid: int, gid: int, mtime: float, content: object, size: int) -> None:
        """A regular file from ``content``: a readable binary stream of ``size`` bytes."""
        self._parent(rel)
        path = self.host_path(rel)
        if rel in self.kinds:
            raise UnsafeEntry(f"{rel!r} appears twice")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        self.kinds[rel] = "file"
        try:
            left = size
            while left > 0:
                chunk = content.read(min(COPY_CHUNK, left))  # type: ignore[attr-defined]
                if not chunk:
                    raise UnsafeEntry(f"{rel!r} is shorter than its declared size")
                os.write(fd, chunk) if len(chunk) < 65536 else _write_all(fd, chunk)
                left -= len(chunk)
            self._own(path, uid, gid, fd)
            os.fchmod(fd, stat.S_IMODE(mode))
            os.utime(fd, (mtime, mtime))
        finally:
            os.close(fd)

    def copy(self, rel: str, source: str, st: os.stat_result) -> None:
        """A regular file with the content, mode, owner and time of host file ``source`` (a frozen layer
        entry): a hard link when both are on one filesystem (layers are never written), else a copy."""
        self._parent(rel)
        if rel in self.kinds:
            raise UnsafeEntry(f"{rel!r} appears twice")
        path = self.host_path(rel)
        try:
            os.link(source, path, follow_symlinks=False)
        except OSError:
            src = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                with os.fdopen(src, "rb", closefd=False) as stream:
                    self.file(rel, st.st_mode, st.st_uid, st.st_gid, st.st_mtime, stream, st.st_size)
            finally:
                os.close(src)
            return
        self.kinds[rel] = "file"

    def hardlink(self, rel: str, target: str) -> None:
        """A second name for ``target``, a regular file this writer already wrote."""
        self._parent(rel)
        if self.kinds.get(target) != "file":
            raise UnsafeEntry(f"hard link {rel!r} -> {target!r}: the target is not a file of this layer")
        if rel in self.kinds:
            raise UnsafeEntry(f"{rel!r} appears twice")
        os.link(self.host_path(target), self.host_path(rel), follow_symlinks=False)
        self.kinds[rel] = "file"

    def symlink(self, rel: str, target: str, uid: int, gid: int, mtime: float) -> None:
        """A symlink (resolved only inside the sandbox, never on the host)."""
        self._parent(rel)
        if rel in self.kinds:
            raise UnsafeEntry(f"{rel!r} appears twice")
        if not target or "\0" in target or len(target) >= 4096:
            raise UnsafeEntry(f"symlink {rel!r} has an invalid target")
        path = self.host_path(rel)
        os.symlink(target, path)
        self.kinds[rel] = "symlink"
        self._own(path, uid, gid)
        with contextlib.suppress(OSError):
            os.utime(path, (mtime, mtime), follow_symlinks=False)

    def fifo(self, rel: str, mode: int, uid: int, gid: int, mtime: float) -> None:
        self._parent(rel)
        if rel in self.kinds:
            raise UnsafeEntry(f"{rel!r} appears twice")
        path = self.host_path(rel)
        os.mkfifo(path, 0o600)
        self.kinds[rel] = "fifo"
        self._own(path, uid, gid)
        os.chmod(path, stat.S_IMODE(mode), follow_symlinks=False)
        os.utime(path, (mtime, mtime), follow_symlinks=False)

    def whiteout(self, rel: str) -> None:
        """A deletion: a character device 0/0, as overlayfs writes it (allowed unprivileged, Linux >= 5.8)."""
        self._parent(rel)
        if rel in self.kinds:
            raise UnsafeEntry(f"{rel!r} appears twice")
        os.mknod(self.host_path(rel), stat.S_IFCHR | 0o000, os.makedev(0, 0))
        self.kinds[rel] = "whiteout"

    def finish(self) -> None:
        for path, mtime in reversed(self._dir_times):
            with contextlib.suppress(OSError):
                os.utime(path, (mtime, mtime), follow_symlinks=False)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
