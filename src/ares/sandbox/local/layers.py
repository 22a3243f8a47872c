"""Overlay diffs on the host: read a stack of frozen layers as one diff, and write a layer dir.

A diff dir (a sandbox's upper, a snapshot layer, an image layer) holds one subdir per overlay mount
key. Deletions are whiteouts (character devices 0/0) and a directory whose lower content is hidden
carries an opaque xattr. ``merged`` reads several such dirs, top first, as the single diff they make
against the image below them (what export writes and what the verifier's summary lists);
``LayerWriter`` creates a layer dir entry by entry, never following a symlink, for import, for the
verifier's outputs and for ``commit``. Both walk trees an agent wrote: nothing here follows a link
in them, and walks are iterative (depth does not bound them).
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ares.errors import OutputRefusedError
from ares.images.layer_writer import LayerWriter
from ares.images.rootfs import OPAQUE_XATTR, OverlayMount
from ares.sandbox.carry_bounds import CarryBudget

OPAQUE_XATTRS = (OPAQUE_XATTR, "trusted.overlay.opaque")


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of a merged diff: ``path`` inside the sandbox (no leading "/"), its ``kind`` (dir,
    file, symlink, fifo, whiteout, other), the host path and lstat of the layer entry that defines it,
    and for a dir whether it hides what lies below it (``opaque``)."""

    path: str
    kind: str
    source: str
    st: os.stat_result
    opaque: bool = False


def kind_of(st: os.stat_result) -> str:
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISCHR(mode) and st.st_rdev == 0:
        return "whiteout"
    return "other"


def is_opaque(path: str) -> bool:
    for name in OPAQUE_XATTRS:
        try:
            if os.getxattr(path, name, follow_symlinks=False) == b"y":
                return True
        except OSError:
            continue
    return False


class DirTooLarge(Exception):
    """A dir of the diff holds more entries than a walk's ``max_dir_entries``: it was not read
    whole (an agent can leave millions of files in one dir, and listing them is the cost)."""

    def __init__(self, path: str, limit: int) -> None:
        super().__init__(f"/{path} holds more than {limit} entries")
        self.path, self.limit = "/" + path, limit


def merged(
    sources: Sequence[Path],
    mounts: Sequence[OverlayMount],
    prune: Callable[[str], bool] | None = None,
    max_dir_entries: int | None = None,
) -> Iterator[Entry]:
    """The entries of ``sources`` (diff dirs, topmost first) stacked as overlay would stack them, in
    sorted pre-order, mount by mount (in plan order). A path is defined by the topmost layer that has
    it; a dir merges the same dir of the layers below until one of them is opaque or has a non-dir
    there, and counts as opaque (replacing the image's dir) when any of that is the case. Entries of
    a mount's diff that lie where another mount is mounted are invisible in the sandbox and skipped.
    A dir whose sandbox path (with a leading "/") ``prune`` names is yielded, its content never read.
    A dir whose layers list more than ``max_dir_entries`` names raises ``DirTooLarge`` before any of
    them is stat'ed or sorted.
    """
    targets = {m.target for m in mounts}
    for mount in mounts:
        tops = [str(s / mount.key) for s in sources if (s / mount.key).is_dir()]
        if tops:
            base = mount.target.strip("/")
            yield from _walk(tops, base, targets - {mount.target}, prune, max_dir_entries)


def _walk(
    tops: list[str],
    base: str,
    hidden: set[str],
    prune: Callable[[str], bool] | None = None,
    limit: int | None = None,
) -> Iterator[Entry]:
    stack = [iter(_children(tops, base, hidden, limit))]
    while stack:
        item = next(stack[-1], None)
        if item is None:
            stack.pop()
            continue
        entry, below = item
        yield entry
        if below and (prune is None or not prune("/" + entry.path)):
            stack.append(iter(_children(below, entry.path, hidden, limit)))


def _children(
    dirs: list[str], rel: str, hidden: set[str], limit: int | None = None
) -> list[tuple[Entry, list[str]]]:
    """The merged entries of dir ``rel`` (its host dirs ``dirs``, topmost first), each with the host
    dirs that make up its content when it is a dir."""
    chains: dict[str, list[str]] = {}
    for directory in dirs:
        try:
            with os.scandir(directory) as it:
                for item in it:
                    chains.setdefault(item.name, []).append(item.path)
                    if limit is not None and len(chains) > limit:
                        raise DirTooLarge(rel, limit)
        except OSError:
            continue
    out: list[tuple[Entry, list[str]]] = []
    for name in sorted(chains):
        path = f"{rel}/{name}" if rel else name
        if "/" + path in hidden:
            continue
        chain = chains[name]
        try:
            st = os.lstat(chain[0])
        except OSError:
            continue
        kind = kind_of(st)
        if kind != "dir":
            out.append((Entry(path, kind, chain[0], st), []))
            continue
        opaque = is_opaque(chain[0])
        below = [chain[0]]
        if not opaque:
            for lower in chain[1:]:
                try:
                    lower_st = os.lstat(lower)
                except OSError:
                    continue
                if not stat.S_ISDIR(lower_st.st_mode):  # a whiteout or a file: the image's dir is gone
                    opaque = True
                    break
                below.append(lower)
                if is_opaque(lower):
                    opaque = True
                    break
        out.append((Entry(path, "dir", chain[0], st, opaque), below))
    return out


def write_merged(
    sources: Sequence[Path],
    mounts: Sequence[OverlayMount],
    dest: Path,
    keep: Sequence[str] | None = None,
    check: CarryBudget | None = None,
) -> int:
    """Write the merged diff of ``sources`` (topmost first) as one layer dir ``dest``; returns the
    number of entries written. ``keep`` (absolute paths) restricts it to those paths, as the
    verifier's outputs: their parent dirs are written plain (owner and mode, never an opaque mark,
    so the image's other files stay visible), and a path that is, or lies below, a symlink or a
    non-directory in the diff is left out (it would point elsewhere in the image). ``check`` bounds
    the entries below ``keep`` before any is written (``OutputRefusedError``)."""
    outputs = None if keep is None else tuple(posixpath.normpath(p).strip("/") for p in keep)
    # Dirs off the outputs' paths are never read, and a dir past the bound is refused unread.
    prune = None if outputs is None else (lambda path: _role(path.strip("/"), outputs) is None)
    entries = merged(sources, mounts, prune, None if check is None else check.bounds.max_entries)
    try:
        return _write_entries(entries, mounts, LayerWriter(dest), outputs, check)
    except DirTooLarge as exc:
        if check is None:
            raise
        raise OutputRefusedError("too_many_entries", str(exc)) from exc


def _write_entries(
    entries: Iterator[Entry],
    mounts: Sequence[OverlayMount],
    writer: LayerWriter,
    outputs: tuple[str, ...] | None,
    check: CarryBudget | None,
) -> int:
    written = 0
    links: dict[tuple[int, int], str] = {}
    skip_below: str | None = None
    for entry in entries:
        if skip_below is not None and entry.path.startswith(skip_below):
            continue
        skip_below = None
        mount, rel = mount_of("/" + entry.path, mounts)
        target = f"{mount.key}/{rel}"
        opaque = entry.opaque
        if outputs is not None:
            role = _role(entry.path, outputs)
            if role is None:
                if entry.kind == "dir":
                    skip_below = entry.path + "/"
                continue
            if role == "parent":
                if entry.kind != "dir":
                    skip_below = entry.path + "/"
                    continue
                opaque = False
            elif entry.path in outputs and entry.kind == "symlink":
                continue
            elif check is not None:
                path = "/" + entry.path
                check.visit(path, entry.path.count("/"))  # depth below / (at least that below the output)
                check.check_stat(path, entry.st)
        st = entry.st
        if entry.kind == "dir":
            writer.directory(target, st.st_mode, st.st_uid, st.st_gid, st.st_mtime, opaque)
        elif entry.kind == "file":
            first = links.get((st.st_dev, st.st_ino)) if st.st_nlink > 1 else None
            if first is not None:
                writer.hardlink(target, first)
            else:
                writer.copy(target, entry.source, st)
                if st.st_nlink > 1:
                    links[(st.st_dev, st.st_ino)] = target
        elif entry.kind == "symlink":
            writer.symlink(target, os.readlink(entry.source), st.st_uid, st.st_gid, st.st_mtime)
        elif entry.kind == "fifo":
            writer.fifo(target, st.st_mode, st.st_uid, st.st_gid, st.st_mtime)
        elif entry.kind == "whiteout":
            writer.whiteout(target)
        else:
            continue
        written += 1
    writer.finish()
    return written


def _role(path: str, outputs: Sequence[str]) -> str | None:
    """ "output" for a path at or below an output, "parent" for a dir above one, else None."""
    for output in outputs:
        if output == "" or path == output or path.startswith(output + "/"):
            return "output"
    for output in outputs:
        if output.startswith(path + "/"):
            return "parent"
    return None


def mount_of(path: str, mounts: Sequence[OverlayMount]) -> tuple[OverlayMount, str]:
    """The mount holding sandbox ``path`` (the deepest target above it) and the path relative to it."""
    best = max((m for m in mounts if within(path, m.target)), key=lambda m: len(m.target))
    return best, posixpath.relpath(path, best.target)


def within(path: str, top: str) -> bool:
    return top == "/" or path == top or path.startswith(top.rstrip("/") + "/")
