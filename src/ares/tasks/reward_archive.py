"""/logs/verifier as a tar held in memory (a backend's ``archive``), read by ``reward_files``' rules.

The same rules as reading the host directory, so the records are the same: links and special files
are never read (a reward file that is one is an error), every size is bounded, files come in the
same sorted order and are kept as the same text. No host directory, no thread hop, no walk: a
verifier reading a few bytes of reward pays microseconds. Plain headers (ustar, GNU, v7 of the
plain types, checksum checked) are read here; an archive with anything else (pax or GNU extension
headers, long names, sparse files, hard links, base-256 sizes) goes through ``tarfile`` whole.
"""

from __future__ import annotations

import io
import os
import tarfile
import zlib

from ares.errors import VerifierError
from ares.tasks.reward_files import (
    LOGS_DIR,
    MAX_FILE_BYTES,
    MAX_FILES,
    MAX_REWARD_BYTES,
    MAX_TOTAL_BYTES,
    REWARD_FILES,
    LogFiles,
)

#: Path parts below the archive's top dir -> (kind, content of a regular file).
Entries = dict[tuple[str, ...], tuple[str, bytes]]

_BLOCK = tarfile.BLOCKSIZE
_EMPTY = bytes(_BLOCK)
#: Plain header types (no extension, no data elsewhere) and what the host walk calls them.
_KINDS = {
    tarfile.REGTYPE: "file", tarfile.AREGTYPE: "file", tarfile.CONTTYPE: "file", tarfile.DIRTYPE: "dir",
    tarfile.SYMTYPE: "symlink", tarfile.CHRTYPE: "special file", tarfile.BLKTYPE: "special file",
    tarfile.FIFOTYPE: "special file",
}  # fmt: skip
#: At most this many entries are kept from an archive (the host walk looks at 4 * MAX_FILES).
MAX_ENTRIES = 16 * MAX_FILES


def read_logs_archive(data: bytes) -> tuple[dict[str, str], LogFiles]:
    """The rewards (name -> text of reward.json / reward.txt) and the files of a tar of /logs/verifier
    whose members are named ``verifier/...``."""
    try:
        entries = _plain_entries(data)
        if entries is None:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
                entries = _tarfile_entries(tar)
    except tarfile.TarError as exc:
        raise VerifierError(f"{LOGS_DIR} came back as a malformed archive: {exc}") from exc
    rewards: dict[str, str] = {}
    for name in REWARD_FILES:
        kind, content = entries.get((name,), ("", b""))
        if not kind:
            continue
        if kind != "file":
            raise VerifierError(f"{LOGS_DIR}/{name} is not a regular file")
        if len(content) > MAX_REWARD_BYTES:
            raise VerifierError(f"{LOGS_DIR}/{name} is over {MAX_REWARD_BYTES} bytes; a reward is one number")
        rewards[name] = content.decode("utf-8", "replace")
    files: dict[str, str] = {}
    skipped: list[str] = []
    total = 0
    for parts in sorted(entries)[: 4 * MAX_FILES]:  # sorted by parts: the host walk's order
        kind, content = entries[parts]
        rel = "/".join(parts)
        if kind == "dir":
            continue
        if kind != "file" or len(files) >= MAX_FILES or total >= MAX_TOTAL_BYTES:
            skipped.append(rel if kind == "file" else f"{rel} ({kind})")
            continue
        kept = _bounded(content, min(MAX_FILE_BYTES, MAX_TOTAL_BYTES - total))
        total += len(kept)
        files[rel] = kept.decode("utf-8", "replace")
    return rewards, LogFiles(files, tuple(skipped))


def _parts(name: str) -> tuple[str, ...] | None:
    """A member's path below the top dir, spelled as the host walk spells names; None to ignore it."""
    parts = tuple(p for p in name.split("/") if p not in ("", "."))[1:]
    if not parts or ".." in parts:
        return None
    if not name.isascii():
        parts = tuple(os.fsencode(p).decode("utf-8", "backslashreplace") for p in parts)
    return parts


def _plain_entries(data: bytes) -> Entries | None:
    """The entries of an archive of plain headers only, read header by header; None as soon as a
    header is anything else (``tarfile`` then reads the whole archive, and judges it)."""
    entries: Entries = {}
    pos, end = 0, len(data)
    while pos + _BLOCK <= end:
        block = data[pos : pos + _BLOCK]
        if block == _EMPTY:
            return entries
        header = _plain_header(block)
        if header is None:
            return None
        name, kind, size = header
        pos += _BLOCK
        if kind == "file":
            if pos + size > end:
                return None
            content = data[pos : pos + size]
            pos += -(-size // _BLOCK) * _BLOCK
        parts = _parts(name)
        if parts is not None and len(entries) < MAX_ENTRIES:
            entries[parts] = (kind, content if kind == "file" else b"")
    return None  # no end-of-archive marker: let tarfile judge it


def _plain_header(block: bytes) -> tuple[str, str, int] | None:
    """(name, kind, size) of a ustar/GNU/v7 header of a plain type with a valid checksum and octal
    size; None for anything else."""
    kind = _KINDS.get(block[156:157])
    if kind is None or block[124] & 0x80:  # an extension header, or a base-256 size
        return None
    try:
        checksum = int(block[148:156].split(b"\0", 1)[0].strip() or b"-", 8)
        size = int(block[124:136].split(b"\0", 1)[0].strip() or b"0", 8) if kind == "file" else 0
    except ValueError:
        return None
    if checksum != _byte_sum(block) - sum(block[148:156]) + 256 or size < 0:  # the field counts as 8 spaces
        return None
    name = block[:100].split(b"\0", 1)[0]
    if block[257:265] == tarfile.POSIX_MAGIC:
        prefix = block[345:500].split(b"\0", 1)[0]
        if prefix:
            name = prefix + b"/" + name
    return name.decode(tarfile.ENCODING, "surrogateescape"), kind, size


def _byte_sum(block: bytes) -> int:
    """The sum of a header's 512 bytes, six times faster than ``sum()``: Adler-32's low half is 1 +
    the byte sum mod 65521, and 256 bytes sum to at most 65280, so each half's is exact."""
    return (zlib.adler32(block[:256]) & 0xFFFF) + (zlib.adler32(block[256:]) & 0xFFFF) - 2


def _tarfile_entries(tar: tarfile.TarFile) -> Entries:
    entries: Entries = {}
    for member in tar:
        parts = _parts(member.name)
        if parts is None or len(entries) >= MAX_ENTRIES:
            continue
        if member.isfile() or member.islnk():  # a hard link is a regular file under another name
            handle = tar.extractfile(member)
            entries[parts] = ("file", handle.read() if handle is not None else b"")
        else:
            entries[parts] = ("dir" if member.isdir() else _kind(member), b"")
    return entries


def _kind(info: tarfile.TarInfo) -> str:
    return "symlink" if info.issym() else "special file"


def _bounded(content: bytes, limit: int) -> bytes:
    """``content`` whole, or its head and tail with a marker when it is longer than ``limit`` (as
    ``reward_files`` reads a long file)."""
    size = len(content)
    if size <= limit:
        return content
    half = limit // 2
    omitted = f"\n[ares: {size - 2 * half} bytes of this file omitted]\n".encode()
    return content[:half] + omitted + content[size - half :]
