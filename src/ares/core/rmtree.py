"""rm -rf for trees an adversary wrote: a sandbox's overlay upper dirs, full of what the agent made.

Every operation is relative to a directory fd opened with O_NOFOLLOW, so no symlink in the tree is
followed and renaming a dir while the walk runs cannot point an operation outside the tree. The walk
is iterative and holds one directory fd at a time (it climbs back through ``..`` and checks that it
arrived where it came from), so neither the depth of a tree nor RLIMIT_NOFILE bounds it. A failure
on one entry is recorded and the walk goes on with the others.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

logger = logging.getLogger(__name__)

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_HANDLE_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: Give up on a tree whose dirs keep moving under the walk after this many restarts from its top.
MAX_RESTARTS = 100
#: How many failures the log line of one ``remove_tree`` call quotes.
LOGGED_FAILURES = 5

Ident = tuple[int, int]  # (st_dev, st_ino) of a directory


def remove_tree(path: Path | str) -> list[str]:
    """Delete ``path`` and everything below it; returns what could not be deleted (empty when all went).

    A symlink (or file) at ``path`` is removed itself. Mount points inside the tree are left alone.
    Problems inside the tree are logged and returned, never raised. ``path``'s parent is trusted (it
    is one of the host's own dirs) and opened normally.
    """
    path = Path(os.path.abspath(path))
    if not path.name:
        raise ValueError("refusing to remove /")
    walk = _Walk(str(path))
    try:
        parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return []
    except OSError as exc:
        return [f"{path.parent}: {exc.strerror}"]
    try:
        walk.remove(parent, path.name)
    finally:
        os.close(parent)
    if walk.failures:
        shown = "; ".join(walk.failures[:LOGGED_FAILURES])
        logger.warning("could not remove %d entries of %s: %s", len(walk.failures), path, shown)
    return walk.failures


@dataclass(slots=True)
class _Level:
    """A directory on the walk's current path: its identity, its name in its parent, subdirs to do."""

    ident: Ident
    name: str
    pending: list[str] = field(default_factory=list)


class _Walk:
    def __init__(self, top: str) -> None:
        self.top = top
        self.failures: list[str] = []
        self._skip: set[tuple[Ident, str]] = set()  # (dir, name) of entries that already failed
        self._levels: list[_Level] = []

    def remove(self, parent: int, name: str) -> None:
        """Remove the entry ``name`` of the open dir ``parent``: a dir with all its contents, or a non-dir."""
        try:
            st = os.stat(name, dir_fd=parent, follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode):
                os.unlink(name, dir_fd=parent)
                return
            top = _open_dir(parent, name)
            try:
                self._clear(top)
            finally:
                os.close(top)
            os.rmdir(name, dir_fd=parent)
        except FileNotFoundError:
            pass
        except OSError as exc:  # about the top itself: failures inside were recorded by _clear
            self._levels = []
            self._fail(exc, None)

    def _clear(self, top: int) -> None:
        """Empty the open dir ``top`` (depth first, one fd at a time)."""
        top_ident = _prepare(top)
        fd = os.dup(top)
        try:
            self._levels = [_Level(top_ident, "", self._scan(fd, top_ident))]
            restarts = 0
            while True:
                level = self._levels[-1]
                if level.pending:
                    name = level.pending.pop()
                    if (entered := self._enter(fd, level.ident, name)) is not None:
                        os.close(fd)
                        fd, ident = entered
                        self._levels.append(_Level(ident, name))
                        self._levels[-1].pending = self._scan(fd, ident)
                    continue
                if len(self._levels) == 1:
                    return
                up = self._climb(fd)
                os.close(fd)
                if up is None:  # a dir on our path moved: start over from the top, keeping what failed
                    fd = os.dup(top)
                    restarts += 1
                    if restarts > MAX_RESTARTS:
                        self.failures.append(f"{self.top}: its dirs kept moving during removal; gave up")
                        return
                    self._levels = [_Level(top_ident, "", self._scan(fd, top_ident))]
                    continue
                fd = up
                child = self._levels.pop()
                try:
                    os.rmdir(child.name, dir_fd=fd)
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    self._fail(exc, child.name)
                    self._skip.add((self._levels[-1].ident, child.name))
        finally:
            os.close(fd)

    def _scan(self, fd: int, ident: Ident) -> list[str]:
        """Unlink every non-dir in the open dir ``fd``; return its subdirs."""
        subdirs: list[str] = []
        try:
            with os.scandir(fd) as entries:
                for entry in entries:
                    if (ident, entry.name) in self._skip:
                        continue
                    try:
                        is_dir = entry.is_dir(follow_symlinks=False)
                    except OSError:
                        is_dir = False
                    if is_dir:
                        subdirs.append(entry.name)
                    else:
                        self._unlink(fd, entry.name, ident, subdirs)
        except OSError as exc:
            self._fail(exc, None)
        return subdirs

    def _unlink(self, fd: int, name: str, ident: Ident, subdirs: list[str] | None = None) -> None:
        try:
            os.unlink(name, dir_fd=fd)
        except FileNotFoundError:
            pass
        except IsADirectoryError:
            if subdirs is not None:  # it became a dir since it was listed
                subdirs.append(name)
        except OSError as exc:
            self._fail(exc, name)
            self._skip.add((ident, name))

    def _enter(self, fd: int, parent: Ident, name: str) -> tuple[int, Ident] | None:
        """Open subdir ``name`` of ``fd`` (fd and identity), or None after recording why not."""
        try:
            sub = _open_dir(fd, name)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # no longer a dir (a symlink now): unlink it
                self._unlink(fd, name, parent)
            else:
                self._fail(exc, name)
                self._skip.add((parent, name))
            return None
        try:
            ident = _prepare(sub)
        except OSError as exc:
            os.close(sub)
            self._fail(exc, name)
            self._skip.add((parent, name))
            return None
        if ident[0] != parent[0]:
            os.close(sub)
            self.failures.append(f"{self._where(name)}: a mount point; left in place")
            self._skip.add((parent, name))
            return None
        return sub, ident

    def _climb(self, fd: int) -> int | None:
        """The fd of the parent of ``fd`` if it is still the dir we came from, else None."""
        try:
            up = os.open("..", _DIR_FLAGS, dir_fd=fd)
        except OSError:
            return None
        try:
            st = os.fstat(up)
        except OSError:
            st = None
        if st is None or (st.st_dev, st.st_ino) != self._levels[-2].ident:
            os.close(up)
            return None
        return up

    def _fail(self, exc: OSError, name: str | None) -> None:
        self.failures.append(f"{self._where(name)}: {exc.strerror or exc}")

    def _where(self, name: str | None) -> str:
        """The path of ``name`` in the current dir, middle elided when the tree is deep."""
        parts = [level.name for level in self._levels[1:]] + ([name] if name else [])
        if len(parts) > 8:
            parts = [*parts[:2], f"...({len(parts) - 6} levels)...", *parts[-4:]]
        return "/".join([self.top, *parts])


def _open_dir(fd: int, name: str) -> int:
    """Open dir ``name`` of ``fd`` without following a symlink; a dir we may not read is chmodded first.

    The chmod goes through an O_PATH handle (``/proc/self/fd/N`` names that very inode), since Linux
    has no chmod that refuses to follow a symlink.
    """
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=fd)
    except PermissionError:
        pass
    handle = os.open(name, _HANDLE_FLAGS, dir_fd=fd)
    try:
        os.chmod(f"/proc/self/fd/{handle}", 0o700)
        return os.open(".", _DIR_FLAGS, dir_fd=handle)
    finally:
        os.close(handle)


def _prepare(fd: int) -> Ident:
    """Make the open dir ``fd`` writable and searchable by its owner (we are deleting it); its identity."""
    st = os.fstat(fd)
    if st.st_mode & 0o700 != 0o700:
        with contextlib.suppress(OSError):  # the unlinks that need it fail and say why
            os.fchmod(fd, stat.S_IMODE(st.st_mode) | 0o700)
    return (st.st_dev, st.st_ino)
