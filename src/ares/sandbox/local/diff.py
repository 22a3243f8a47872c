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
from collections.abc import Sequence
from pathlib import Path

from ares.images.rootfs import OverlayMount
from ares.sandbox.base import DiffSummary
from ares.sandbox.local import layers

OPAQUE_XATTRS = layers.OPAQUE_XATTRS
#: Entries a summary walks at most (an agent may leave millions of files).
MAX_WALK = 100_000
#: Paths a summary keeps by name.
KEEP_PATHS = 20

mount_of = layers.mount_of
_within = layers.within


def summarize_outside(
    upper: Path | Sequence[Path],
    mounts: Sequence[OverlayMount],
    outputs: Sequence[str],
    keep: int = KEEP_PATHS,
) -> DiffSummary:
    """The changes in ``upper`` (one dir per mount key) outside ``outputs`` (absolute paths).

    ``upper`` may be a stack of diff dirs, topmost first (a sandbox's upper over its snapshot
    layers): they are read as the one diff they make together against the image.
    """
    sources = [upper] if isinstance(upper, Path) else list(upper)
    inside = tuple(posixpath.normpath(p) for p in outputs)
    # The outputs' own content is never listed, so a flood inside them costs nothing here.
    entries = layers.merged(
        sources, mounts, prune=lambda path: any(_within(path, p) for p in inside), max_dir_entries=MAX_WALK
    )
    count, paths, walked = 0, [], 0
    try:
        entry = next(entries, None)
        while entry is not None:
            following = next(entries, None)
            walked += 1
            if walked > MAX_WALK:
                return DiffSummary(count, tuple(paths), truncated=True)
            path = "/" + _printable(entry.path)
            label = _label(entry, following)
            entry = following
            if label is None or any(_within(path, p) for p in inside):
                continue
            count += 1
            if len(paths) < keep:
                paths.append(path + label)
    except layers.DirTooLarge as exc:  # one dir of more entries than a whole summary walks
        if len(paths) < keep:
            paths.append(f"{_printable(exc.path)} (over {exc.limit} entries, not listed)")
        return DiffSummary(count + 1, tuple(paths), truncated=True)
    return DiffSummary(count, tuple(paths))


def _label(entry: layers.Entry, following: layers.Entry | None) -> str | None:
    """How a change reads in a summary; None for a directory that only holds other changes
    (overlay copies parents up)."""
    if entry.kind == "whiteout":
        return " (deleted)"
    if entry.kind != "dir":
        return ""
    if entry.opaque:
        return " (replaced)"
    if following is not None and following.path.startswith(entry.path + "/"):
        return None
    return ""


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
