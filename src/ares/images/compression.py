"""Streaming layer decompression with both digests checked, shared by every image source.

A registry download, a blob in an OCI layout and a member of a ``docker save`` archive all go through
the same pipeline, so a layer is verified the same way (stored digest, then diff_id) whatever it came
from, and a cap on the uncompressed size stops decompression bombs the same way. It holds no I/O:
callers feed it chunks from a worker thread and deliver what it returns (and, if they set `emit`,
the pieces it hands on meanwhile).
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import zstandard

from ares.images.errors import ImageError

if TYPE_CHECKING:  # the registry package imports this module: no runtime import back
    from ares.images.registry.mediatypes import Compression

_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_PIECE = 4 * 1024 * 1024  # output is handed on in pieces of about this size


def sniff_compression(head: bytes) -> Compression:
    """How a blob is compressed, from its first bytes: for archives whose layers carry no media type."""
    if head.startswith(_GZIP_MAGIC):
        return "gzip"
    if head.startswith(_ZSTD_MAGIC):
        return "zstd"
    return "none"


class LayerPipeline:
    """Hash of the blob, decompression, hash of the result; fed chunk by chunk from a worker thread.

    `feed` returns the output of a chunk; when that grows past `_PIECE` bytes (a chunk that inflates
    enormously) the pieces go to `emit` from the worker thread as they come, so memory stays bounded,
    and the running total is checked against `cap` as it grows.
    """

    def __init__(self, compression: Compression | None, cap: int | None = None, label: str = "") -> None:
        self.blob = hashlib.sha256()
        self.diff = hashlib.sha256()
        self.compression = compression
        self.cap = cap
        self.label = label
        self.produced = 0
        self.emit: Callable[[bytes], None] | None = None  # set by the downloader; runs the sink
        # Corrupt data fails to decompress before the digest can be checked: remember the error, keep
        # hashing, and report the digest mismatch (the real cause) if there is one.
        self.broken: Exception | None = None
        self._gzip: Any = zlib.decompressobj(wbits=31) if compression == "gzip" else None
        self._zstd: Any = None
        if compression == "zstd":
            self._zstd = zstandard.ZstdDecompressor().stream_writer(self, write_size=_PIECE, closefd=False)
        self._pending: list[bytes] = []
        self._pending_size = 0

    def feed(self, chunk: bytes) -> bytes:
        self.blob.update(chunk)
        if self.compression is None:  # raw blob: no decompression, no diff_id
            return chunk
        if self.broken is None:
            try:
                if self._gzip is not None:
                    self._gunzip(chunk)
                elif self._zstd is not None:
                    self._zstd.write(chunk)  # calls self.write with each piece
                else:
                    self.write(chunk)
            except (zlib.error, zstandard.ZstdError) as exc:
                self.broken = exc
        out = b"".join(self._pending)
        self._pending.clear()
        self._pending_size = 0
        return out

    def write(self, piece: bytes) -> int:
        """One piece of uncompressed output: counted, hashed, kept or handed on."""
        self.produced += len(piece)
        if self.cap is not None and self.produced > self.cap:
            raise ImageError(
                f"{self.label} inflates to more than {self.cap} bytes (the cap for a layer of its size); "
                "refusing it as a decompression bomb — raise Limits.layer_ratio/layer_floor if it is genuine"
            )
        self.diff.update(piece)
        self._pending.append(piece)
        self._pending_size += len(piece)
        if self._pending_size >= _PIECE and self.emit is not None:
            self.emit(b"".join(self._pending))
            self._pending.clear()
            self._pending_size = 0
        return len(piece)

    def _gunzip(self, data: bytes) -> None:
        while True:
            if self._gzip.eof:  # concatenated gzip members (pigz, appends)
                data = self._gzip.unused_data + data
                if not data:
                    return
                self._gzip = zlib.decompressobj(wbits=31)
            out = self._gzip.decompress(data, _PIECE)
            data = self._gzip.unconsumed_tail
            if out:
                self.write(out)
            # A full piece may leave output inside zlib even when all input was consumed.
            if not data and not self._gzip.eof and len(out) < _PIECE:
                return

    def finish(self) -> bytes:
        if self._gzip is not None and self.broken is None:
            self.write(self._gzip.flush())
        out = b"".join(self._pending)
        self._pending.clear()
        return out
