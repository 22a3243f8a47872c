"""Random access to the members of an uncompressed tar, with names confined to the archive.

`tarfile` is used once to list the members and where each one's data starts; reads then open the
archive afresh and read that byte range, so concurrent layer reads never share a file position and
nothing is extracted. Archive names are untrusted: a member or a link that climbs out with `..` or
an absolute name is refused, and links are followed only to other members. Blocking: run in a thread.
"""

from __future__ import annotations

import posixpath
import tarfile
from dataclasses import dataclass
from pathlib import Path

from ares.images.errors import ImageError
from ares.images.sources._stream import MAX_DOCUMENT

_MAX_MEMBERS = 500_000
_MAX_LINKS = 16
_COMPRESSED = {b"\x1f\x8b": "gzip", b"\x28\xb5\x2f\xfd": "zstd", b"\xfd7zXZ": "xz", b"BZh": "bzip2"}
_DECOMPRESS = {"gzip": "gunzip -k", "zstd": "zstd -d", "xz": "unxz -k", "bzip2": "bunzip2 -k"}


@dataclass(frozen=True, slots=True)
class _Member:
    offset: int  # where the data starts; -1 for a link
    size: int
    link: str | None = None  # for a link: the member it points to, already normalized


class _Range:
    """`size` bytes of `path` from `offset`, read like a file."""

    def __init__(self, path: Path, offset: int, size: int) -> None:
        self._handle = path.open("rb")
        self._handle.seek(offset)
        self._left = size

    def read(self, size: int = -1, /) -> bytes:
        want = self._left if size < 0 else min(size, self._left)
        data = self._handle.read(want)
        self._left -= len(data)
        return data

    def close(self) -> None:
        self._handle.close()


class TarIndex:
    """The regular files and links of one uncompressed tar, by normalized name."""

    def __init__(self, path: Path, members: dict[str, _Member], where: str) -> None:
        self._path = path
        self._members = members
        self._where = where

    @classmethod
    def build(cls, path: Path, where: str) -> TarIndex:
        if not path.is_file():
            raise ImageError(f"{where}: {path} is not a file")
        with path.open("rb") as handle:
            head = handle.read(6)
        for magic, kind in _COMPRESSED.items():
            if head.startswith(magic):
                raise ImageError(
                    f"{where}: the archive is {kind}-compressed; ARES reads archive members in place and "
                    f"needs the plain tar — run `{_DECOMPRESS[kind]} {path}` and use the .tar it writes"
                )
        members: dict[str, _Member] = {}
        try:
            with tarfile.open(path, "r:") as tar:
                for info in tar:
                    if len(members) >= _MAX_MEMBERS:
                        raise ImageError(f"{where}: the archive has over {_MAX_MEMBERS} members; refusing it")
                    name = _confined(info.name, where, "member")
                    if info.issym() or info.islnk():
                        # A symlink is relative to its directory, a hardlink to the archive root.
                        base = posixpath.dirname(name) if info.issym() else ""
                        target = posixpath.join(base, info.linkname)
                        link = _confined(target, where, f"link {name} →", strict=False)
                        members[name] = _Member(-1, 0, link)
                    elif info.isreg() and not info.issparse():
                        members[name] = _Member(info.offset_data, info.size)
        except tarfile.TarError as exc:
            raise ImageError(f"{where}: {path} is not a readable tar archive ({exc})") from exc
        return cls(path, members, where)

    def has(self, name: str) -> bool:
        return posixpath.normpath(name) in self._members

    def target(self, name: str) -> str:
        """The regular member `name` is, or links to (within the archive)."""
        current = _confined(name, self._where, "manifest.json entry")
        for _ in range(_MAX_LINKS):
            member = self._members.get(current)
            if member is None:
                raise ImageError(
                    f"{self._where}: the archive has no member {current!r}"
                    + (f" (reached from {name!r})" if current != name else "")
                    + "; it is incomplete — save the image again"
                )
            if member.link is None:
                return current
            current = member.link
        raise ImageError(f"{self._where}: {name!r} is a chain of over {_MAX_LINKS} links; refusing it")

    def size(self, name: str) -> int:
        return self._members[self.target(name)].size

    def open(self, name: str) -> _Range:
        member = self._members[self.target(name)]
        return _Range(self._path, member.offset, member.size)

    def head(self, name: str, count: int) -> bytes:
        handle = self.open(name)
        try:
            return handle.read(count)
        finally:
            handle.close()

    def read_small(self, name: str) -> bytes:
        """A JSON member, whole; documents are small, so a big one is refused."""
        if self.size(name) > MAX_DOCUMENT:
            raise ImageError(f"{self._where}: {name} is larger than {MAX_DOCUMENT} bytes; refusing it")
        return self.head(name, MAX_DOCUMENT)


def _confined(name: str, where: str, what: str, *, strict: bool = True) -> str:
    """`name` normalized (no `./`), refused if absolute or if it climbs out with `..`.

    `strict` (member names, manifest entries) refuses any `..` at all: no tool writes one, so it is a
    crafted archive. A link target is judged after normalization: `../<hex>.tar` is how legacy
    `<id>/layer.tar` symlinks point at a sibling.
    """
    normal = posixpath.normpath(name)
    climbs = "/../" in f"/{name}/" if strict else normal == ".." or normal.startswith("../")
    if normal.startswith("/") or climbs:
        raise ImageError(f"{where}: {what} {name!r} points outside the archive; refusing it")
    return normal
