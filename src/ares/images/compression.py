"""Streaming layer decompression with both digests checked, shared by every image source.

A registry download, a blob in an OCI layout and a member of a ``docker save`` archive all go through
the same pipeline, so a layer is verified the same way (stored digest, then diff_id) whatever it came
from. It holds no I/O: callers feed it chunks from a worker thread and deliver what it returns.
"""

from __future__ import annotations

import hashlib
import zlib
from typing import TYPE_CHECKING, Any

import zstandard

if TYPE_CHECKING:  # the registry package imports this module: no runtime import back
    from ares.images.registry.mediatypes import Compression

_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def sniff_compression(head: bytes) -> Compression:
    """How a blob is compressed, from its first bytes: for archives whose layers carry no media type."""
    if head.startswith(_GZIP_MAGIC):
        return "gzip"
    if head.startswith(_ZSTD_MAGIC):
        return "zstd"
    return "none"


class LayerPipeline:
    """Hash of the blob, decompression, hash of the result; fed chunk by chunk from one thread."""

    def __init__(self, compression: Compression | None) -> None:
        self.blob = hashlib.sha256()
        self.diff = hashlib.sha256()
        self.compression = compression
        # Corrupt data fails to decompress before the digest can be checked: remember the error, keep
        # hashing, and report the digest mismatch (the real cause) if there is one.
        self.broken: Exception | None = None
        self._gzip: Any = zlib.decompressobj(wbits=31) if compression == "gzip" else None
        self._zstd: Any = None
        if compression == "zstd":
            self._zstd = zstandard.ZstdDecompressor().decompressobj(read_across_frames=True)

    def feed(self, chunk: bytes) -> bytes:
        self.blob.update(chunk)
        if self.compression is None:  # raw blob: no decompression, no diff_id
            return chunk
        if self.broken is not None:
            return b""
        try:
            if self._gzip is not None:
                out = self._gunzip(chunk)
            elif self._zstd is not None:
                out = self._zstd.decompress(chunk)
            else:
                out = chunk
        except (zlib.error, zstandard.ZstdError) as exc:
            self.broken = exc
            return b""
        self.diff.update(out)
        return out

    def _gunzip(self, chunk: bytes) -> bytes:
        parts = [self._gzip.decompress(chunk)]
        while self._gzip.eof and self._gzip.unused_data:  # concatenated gzip members (pigz, appends)
            rest = self._gzip.unused_data
            self._gzip = zlib.decompressobj(wbits=31)
            parts.append(self._gzip.decompress(rest))
        return b"".join(parts)

    def finish(self) -> bytes:
        if self._gzip is not None and self.broken is None:
            tail = self._gzip.flush()
            self.diff.update(tail)
            return tail
        return b""
