"""``ADD <url>``: files downloaded on the host (httpx, honouring the proxy environment), checked and
handed to the COPY machinery as a one-file tar.

Docker's semantics: the file lands with mode 600 (``--chmod`` overrides) and owned by root (``--chown``
overrides); a remote archive is *not* unpacked; a destination ending in ``/`` gets the URL's file name.
Cache identity: with ``--checksum=sha256:<hex>`` the checksum (not the URL); without it the URL plus
the server's ``ETag``/``Last-Modified`` (from a HEAD request), or, if the server sends neither, the
sha256 of the downloaded content.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import hashlib
import io
import re
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit

import httpx

from ares.errors import ImageBuildError

_CHECKSUM = re.compile(r"sha256:([0-9a-f]{64})")
#: The largest file ``ADD <url>`` downloads (a bomb guard, not a quota).
MAX_ADD_BYTES = 8 << 30


def is_url(source: str) -> bool:
    return source.startswith(("http://", "https://"))


def parse_checksum(value: str | None, line: int) -> str | None:
    if not value:
        return None
    match = _CHECKSUM.fullmatch(value.strip())
    if match is None:
        raise ImageBuildError(f"line {line}: --checksum must be sha256:<64 hex digits>, got {value!r}")
    return match.group(1)


def url_file_name(url: str) -> str:
    name = PurePosixPath(unquote(urlsplit(url).path)).name
    return name or "index.html"


@dataclass(frozen=True, slots=True)
class Download:
    """A downloaded file in the build's scratch space."""

    path: Path
    sha256: str
    mtime: float


def _client() -> httpx.AsyncClient:
    return httpx.AsyncClient(
        follow_redirects=True, trust_env=True, timeout=httpx.Timeout(300.0, connect=30.0)
    )


async def probe(url: str) -> str | None:
    """``etag=…;last-modified=…`` from a HEAD request, or None if the server gives neither."""
    try:
        async with _client() as client:
            response = await client.head(url)
    except httpx.HTTPError:
        return None
    if not response.is_success:
        return None
    etag, modified = response.headers.get("etag"), response.headers.get("last-modified")
    if not etag and not modified:
        return None
    return f"etag={etag or ''};last-modified={modified or ''}"


async def download(url: str, dest: Path, *, checksum: str | None, line: int) -> Download:
    """Stream ``url`` into ``dest``; ImageBuildError on an HTTP error or a checksum mismatch."""
    digest = hashlib.sha256()
    size = 0
    try:
        async with _client() as client, client.stream("GET", url) as response:
            if not response.is_success:
                raise ImageBuildError(f"line {line}: ADD {url}: HTTP {response.status_code}")
            modified = response.headers.get("last-modified")
            with open(dest, "wb") as out:  # noqa: ASYNC230 - writes of chunks already in memory
                async for chunk in response.aiter_bytes(1 << 20):
                    size += len(chunk)
                    if size > MAX_ADD_BYTES:
                        raise ImageBuildError(f"line {line}: ADD {url}: larger than {MAX_ADD_BYTES} bytes")
                    digest.update(chunk)
                    await asyncio.to_thread(out.write, chunk)
    except httpx.HTTPError as exc:
        raise ImageBuildError(f"line {line}: ADD {url}: download failed ({exc!r})") from exc
    got = digest.hexdigest()
    if checksum is not None and got != checksum:
        await asyncio.to_thread(dest.unlink, missing_ok=True)
        raise ImageBuildError(
            f"line {line}: ADD {url}: checksum mismatch: expected sha256:{checksum}, got sha256:{got}"
        )
    mtime = time.time()
    if modified:
        with contextlib.suppress(TypeError, ValueError):
            mtime = email.utils.parsedate_to_datetime(modified).timestamp()
    return Download(dest, got, mtime)


def file_tar(file: Download, target: PurePosixPath, *, mode: int) -> bytes:
    """A tar holding ``file`` at ``target`` (relative to ``/``), owned by root, with ``mode``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as out:
        info = tarfile.TarInfo(str(target).lstrip("/"))
        info.size = file.path.stat().st_size
        info.mode, info.mtime = mode, int(file.mtime)
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        with open(file.path, "rb") as f:
            out.addfile(info, f)
    return buffer.getvalue()
