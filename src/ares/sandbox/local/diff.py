"""A stopped sandbox's filesystem diff (its overlay upper dirs), read and split on the host.

The verifier uses it twice: to list what the agent changed outside the task's outputs (so a human
can spot a hack in the viewer), and to carry only the outputs over into a layer on the pristine
image. The upper dirs were written by the agent, so nothing here follows a symlink in them, and
walks are bounded.
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

from ares.sandbox.base import DiffSummary
from ares.sandbox.local.rootfs import OverlayMount

OPAQUE_XATTRS = ("user.overlay.opaque", "trusted.overlay.opaque")
#: Entries a summary walks at most (an agent may leave millions of files).
MAX_WALK = 100_000
#: Paths a summary keeps by name.
KEEP_PATHS = 20


def mount_of(path: str, mounts: Sequence[OverlayMount]) -> tuple[OverlayMount, str]:
    """The mount holding sandbox ``path`` (the deepest target above it) and the path relative to it."""
    best = max((m for m in mounts if _within(path, m.target)), key=lambda m: len(m.target))
    return best, posixpath.relpath(path, best.target)


def _within(path: str, top: str) -> bool:
    return top == "/" or path == top or path.startswith(top.rstrip("/") + "/")


def summarize_outside(
    upper: Path, mounts: Sequence[OverlayMount], outputs: Sequence[str], keep: int = KEEP_PATHS
) -> DiffSummary:
    """The changes in ``upper`` (one dir per mount key) outside ``outputs`` (absolute paths)."""
    inside = tuple(posixpath.normpath(p) for p in outputs)
    count, paths, walked = 0, [], 0
    for mount in mounts:
        top = upper / mount.key
        for path, label in _changes(top, mount.target):
            walked += 1
            if walked > MAX_WALK:
                return DiffSummary(count, tuple(paths), truncated=True)
            if label is None or any(_within(path, p) for p in inside):
                continue
            count += 1
            if len(paths) < keep:
                paths.append(path + label)
    return DiffSummary(count, tuple(paths))


def _changes(top: Path, target: str) -> Iterator[tuple[str, str | None]]:
    """(sandbox path, label) for every entry below ``top`` in sorted pre-order; label None for a
    directory that only holds other changes (overlay copies parents up)."""
    try:
        entries = sorted(os.scandir(top), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        path = posixpath.join(target, _printable(entry.name))
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            opaque = _is_opaque(entry.path)
            children = _changes(Path(entry.path), path)
            first = next(children, None)
            if opaque:
                yield path, " (replaced)"
            elif first is None:
                yield path, ""
            else:
                yield path, None
            if first is not None:
                yield first
                yield from children
        elif stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
            yield path, " (deleted)"
        else:
            yield path, ""


def _is_opaque(path: str) -> bool:
    for name in OPAQUE_XATTRS:
        try:
            if os.getxattr(path, name, follow_symlinks=False) == b"y":
                return True
        except OSError:
            continue
    return False


def _printable(name: str) -> str:
    """A file name as text that survives any JSON/UTF-8 writer (undecodable bytes escaped)."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def carry_outputs(upper: Path, mounts: Sequence[OverlayMount], outputs: Sequence[str], layer: Path) -> None:
    """Move each output path's changes from ``upper`` into ``layer`` (same layout: one dir per mount
    key), ready to stack on the pristine image. Parent dirs are recreated with their owner and mode,
    never their opaque mark, so the image's other files stay visible. An output whose path in the
    diff crosses a symlink, or is one, is not carried (it would point elsewhere in the pristine image).
    """
    for output in sorted({posixpath.normpath(p) for p in outputs}):
        mount, rel = mount_of(output, mounts)
        source, dest = upper / mount.key, layer / mount.key
        if rel == ".":  # the output is a whole mount: its upper dir is the layer
            if source.is_dir() and not dest.exists():
                dest.parent.mkdir(parents=True, exist_ok=True)
                os.rename(source, dest)
            continue
        dest.mkdir(parents=True, exist_ok=True)
        parts = rel.split("/")
        for i, part in enumerate(parts):
            source = source / part
            try:
                st = os.lstat(source)
            except FileNotFoundError:
                break
            last = i == len(parts) - 1
            if stat.S_ISLNK(st.st_mode) or (not last and not stat.S_ISDIR(st.st_mode)):
                break
            if last:
                os.rename(source, dest / part)
                break
            dest = dest / part
            if not dest.exists():
                dest.mkdir()
                os.chown(dest, st.st_uid, st.st_gid)
                os.chmod(dest, stat.S_IMODE(st.st_mode))
