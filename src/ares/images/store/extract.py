"""Turning a layer's uncompressed tar stream into an overlay lower dir, safely.

The tar is read in a worker thread from a ``BytePipe`` (see ``pipe.py``) and written through
``LayerWriter``, which never follows a link the layer made and refuses duplicates and paths through
non-directories. Here the OCI rules are applied on top: ``.wh.NAME`` becomes an overlay whiteout and
``.wh..wh..opq`` an opaque dir; device nodes (other than 0/0 whiteouts) are refused, except below
``/dev``, where images built with debootstrap carry them: those are skipped, never created (a sandbox
mounts a /dev of its own); hard links must
name a file of the same layer; PAX xattrs (file capabilities among them) are kept where the kernel
allows. The bytes are hashed as they stream, so the caller can compare them with the diff_id, and
counted against the caps that stop a decompression bomb.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import logging
import os
import posixpath
import stat
import tarfile
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ares.images.layer_writer import LayerWriter, UnsafeEntry

_log = logging.getLogger(__name__)

WHITEOUT_PREFIX = ".wh."
OPAQUE_MARKER = ".wh..wh..opq"
#: aufs bookkeeping some old layers carry (``.wh..wh.plnk``, ``.wh..wh.aufs``): meaningless here.
AUFS_META = ".wh..wh."
#: Owners must be real ids (-1 means "unchanged" to chown).
_ID_LIMIT = (1 << 32) - 1
#: Xattrs a layer may not set: overlay's own (they would redirect or hide lower content) and trusted.*.
_FORBIDDEN_XATTRS = ("trusted.", "user.overlay.", "security.selinux")
_DRAIN = 1 << 16


class LayerRefused(Exception):
    """The layer is hostile or broken; ``str()`` says which member and why."""


@dataclass(frozen=True, slots=True)
class LayerLimits:
    """Caps against decompression bombs; generous enough for real images (CUDA layers are ~10 GB)."""

    max_bytes: int = 64 << 30
    max_members: int = 4_000_000


@dataclass(frozen=True, slots=True)
class ExtractStats:
    """What a layer turned out to be: the hash of its tar, and what it put on disk."""

    diff_id: str
    tar_bytes: int
    entries: int
    size_bytes: int


class _HashingReader:
    """The pipe as a file for tarfile: hashes and counts every byte, and stops at the byte cap."""

    def __init__(self, read: Callable[[int], bytes], max_bytes: int) -> None:
        self._read = read
        self.hash = hashlib.sha256()
        self.count = 0
        self._max = max_bytes

    def read(self, size: int = -1) -> bytes:
        data = self._read(size if size >= 0 else _DRAIN)
        self.count += len(data)
        if self.count > self._max:
            raise LayerRefused(f"its tar is larger than the cap of {self._max} bytes (a decompression bomb?)")
        self.hash.update(data)
        return data


def member_path(name: str) -> str:
    """A member name as a plain relative path ("" for the root); LayerRefused if it could escape."""
    if "\0" in name or len(name) > 4096:
        raise LayerRefused("its name is not a valid path")
    if name.startswith("/"):
        raise LayerRefused("it has an absolute path")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise LayerRefused("its path contains '..'")
    return "/".join(parts)


def extract_layer(read: Callable[[int], bytes], dest: Path, limits: LayerLimits) -> ExtractStats:
    """Extract the tar that ``read`` delivers into the new dir ``dest`` (an overlay lower).

    Raises LayerRefused naming the offending member; the caller removes ``dest`` then. Runs in a
    worker thread: everything here blocks.
    """
    reader = _HashingReader(read, limits.max_bytes)
    writer = LayerWriter(dest)
    extractor = _Extractor(writer, limits)
    try:
        with tarfile.open(fileobj=reader, mode="r|", errorlevel=2) as tar:  # type: ignore[call-overload]
            for member in tar:
                try:
                    extractor.add(tar, member)
                except (LayerRefused, UnsafeEntry) as exc:
                    raise LayerRefused(f"member {member.name[:300]!r}: {exc}") from None
                except OSError as exc:
                    raise LayerRefused(
                        f"member {member.name[:300]!r} could not be written: {exc.strerror or exc}"
                    ) from exc
    except tarfile.TarError as exc:
        raise LayerRefused(f"it is not a valid tar ({exc})") from exc
    while reader.read(_DRAIN):  # the padding after the end-of-archive blocks counts for the diff_id
        pass
    extractor.finish()
    return ExtractStats("sha256:" + reader.hash.hexdigest(), reader.count, extractor.entries, extractor.size)


class _Extractor:
    def __init__(self, writer: LayerWriter, limits: LayerLimits) -> None:
        self.writer = writer
        self.limits = limits
        self.entries = 0
        self.size = 0
        self._dir_modes: dict[str, int] = {}
        self._root_user = os.geteuid() == 0

    def add(self, tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
        self.entries += 1
        if self.entries > self.limits.max_members:
            raise LayerRefused(f"the layer has more than {self.limits.max_members} members")
        rel = member_path(member.name)
        base, parent = posixpath.basename(rel), posixpath.dirname(rel)
        if base.startswith(WHITEOUT_PREFIX):
            self._whiteout(member, rel, base, parent)
            return
        if not rel:  # the layer's root dir: the image's / keeps the lower layers' attributes
            return
        for value in (member.uid, member.gid):
            if not 0 <= value < _ID_LIMIT:
                raise LayerRefused(f"its owner id {value} is out of range")
        uid, gid = (member.uid, member.gid) if self._root_user else (os.geteuid(), os.getegid())
        mode, mtime, w = member.mode, float(member.mtime), self.writer
        if member.isdir():
            # Written 07xx so the owner can fill it (and set xattrs) unprivileged; real mode at the end.
            w.directory(rel, mode | 0o700, uid, gid, mtime)
            self._dir_modes[rel] = stat.S_IMODE(mode)
        elif member.isreg():
            stream = tar.extractfile(member)
            assert stream is not None
            w.file(rel, mode, uid, gid, mtime, stream, member.size)
            self.size += member.size
        elif member.islnk():
            w.hardlink(rel, member_path(member.linkname))
        elif member.issym():
            w.symlink(rel, member.linkname, uid, gid, mtime)
        elif member.ischr() and member.devmajor == 0 and member.devminor == 0:
            w.whiteout(rel)  # already in overlay form (some exporters write them so)
            return
        elif member.isfifo():
            w.fifo(rel, mode, uid, gid, mtime)
        elif (member.ischr() or member.isblk()) and rel.startswith("dev/"):
            # debootstrap'd images carry /dev/null & co; sandboxes mount a /dev of their own.
            _log.debug("layer member %r: device node under /dev not created", member.name)
            return
        else:
            raise LayerRefused("it is a device node or special file, which an image may not carry")
        self._xattrs(member, rel)

    def _whiteout(self, member: tarfile.TarInfo, rel: str, base: str, parent: str) -> None:
        if not member.isreg():
            raise LayerRefused("a whiteout must be an empty regular file")
        if base == OPAQUE_MARKER:
            if not parent:
                raise LayerRefused("an opaque marker for the image root is not supported")
            self.writer.opaque(parent)
        elif base.startswith(AUFS_META):
            _log.debug("layer member %r: aufs metadata, skipped", member.name)
        else:
            target = base[len(WHITEOUT_PREFIX) :]
            if target in ("", ".", ".."):
                raise LayerRefused("it is not a valid whiteout")
            self.writer.whiteout(posixpath.join(parent, target) if parent else target)

    def _xattrs(self, member: tarfile.TarInfo, rel: str) -> None:
        for key, value in member.pax_headers.items():
            if key.startswith("SCHILY.xattr."):
                name, raw = key[len("SCHILY.xattr.") :], value.encode("utf-8", "surrogateescape")
            elif key.startswith("LIBARCHIVE.xattr."):
                name = urllib.parse.unquote(key[len("LIBARCHIVE.xattr.") :])
                raw = base64.b64decode(value + "=" * (-len(value) % 4))
            else:
                continue
            if name.startswith(_FORBIDDEN_XATTRS) or "." not in name:
                _log.info("layer member %r: xattr %s not applied (not for images)", member.name, name)
                continue
            try:
                os.setxattr(self.writer.host_path(rel), name, raw, follow_symlinks=False)
            except OSError as exc:
                _log.info(
                    "layer member %r: xattr %s not applied (%s; needs privileges this process lacks)",
                    member.name, name, exc.strerror or exc,
                )  # fmt: skip

    def finish(self) -> None:
        for rel, mode in sorted(self._dir_modes.items(), key=lambda item: -item[0].count("/")):
            with contextlib.suppress(FileNotFoundError):
                os.chmod(self.writer.host_path(rel), mode, follow_symlinks=False)
        self.writer.finish()
