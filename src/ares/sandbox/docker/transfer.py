"""Files in and out of a docker sandbox's container, through the engine's archive API.

``upload`` puts a tar of the files (making the target dir with the sandbox's ``exec`` when the
engine says it does not exist); ``download`` and ``read_file`` get an archive of the path, which
works on a halted container too, and unpack it on the host (``read_file`` follows symlinks itself,
like ``cat`` would).
"""

from __future__ import annotations

import asyncio
import io
import os
import posixpath
import shlex
import shutil
import tarfile
from collections.abc import Awaitable, Callable
from pathlib import Path, PurePosixPath
from typing import Any

import docker
import docker.errors

from ares.errors import SandboxCrashedError, SandboxError
from ares.sandbox.base import ExecResult, FileMap
from ares.sandbox.docker.client import api_message, run_blocking
from ares.sandbox.docker.execution import API_ERRORS
from ares.sandbox.files import extract_tar, tar_files

#: Gets ``(archive, base name)`` of a path in the container; the second argument names the operation.
GetArchive = Callable[[str, str], Awaitable[tuple[bytes, str]]]


async def upload(
    api: docker.APIClient,
    container: str,
    src: Path | FileMap,
    dest: str,
    *,
    mkdir: Callable[..., Awaitable[ExecResult]],
    call: Callable[..., Awaitable[Any]],
) -> None:
    """Put ``src`` at ``dest`` in ``container``; ``mkdir`` is the sandbox's ``exec``, ``call`` its
    API wrapper (errors that mean the container is gone become crashes)."""
    target = PurePosixPath("/", dest)
    if isinstance(src, Path) and await asyncio.to_thread(src.is_file):
        archive = await asyncio.to_thread(tar_files, src, target.name)
        directory = str(target.parent)
    else:
        archive = await asyncio.to_thread(tar_files, src)
        directory = str(target)
    put = api.put_archive
    try:
        await run_blocking(put, container, directory, archive)
        return
    except docker.errors.NotFound:  # the directory does not exist yet
        pass
    except API_ERRORS as exc:
        raise SandboxError(f"upload to {dest} failed: {api_message(exc)}") from exc
    made = await mkdir(f"mkdir -p -- {shlex.quote(directory)}", cwd="/")
    if not made.ok:
        raise SandboxError(f"upload to {dest} failed: {made.stderr.strip()}")
    try:
        await call(f"upload to {dest}", put, container, directory, archive)
    except SandboxCrashedError:
        raise
    except SandboxError as exc:
        raise SandboxError(f"upload to {dest} failed: {exc}") from exc


async def download(get_archive: GetArchive, src: str, dest: Path) -> None:
    archive, name = await get_archive(src, "download")
    staging = dest.parent / f".{dest.name}.ares-download"
    try:
        await asyncio.to_thread(extract_tar, archive, staging)
    except tarfile.TarError as exc:  # a link out of the archive, a FIFO or a device
        await asyncio.to_thread(shutil.rmtree, staging, ignore_errors=True)
        raise SandboxError(f"cannot download {src}: {exc}") from exc
    try:
        await asyncio.to_thread(os.replace, staging / name, dest)
    finally:
        await asyncio.to_thread(shutil.rmtree, staging, ignore_errors=True)


async def read_file(get_archive: GetArchive, path: str) -> bytes:
    current = posixpath.join("/", path)
    for _ in range(16):  # follow symlinks like cat would
        archive, _ = await get_archive(current, "read")
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            member = tar.next()
            if member is None:
                raise SandboxError(f"cannot read {path}: the engine returned an empty archive")
            if member.issym():
                current = posixpath.normpath(posixpath.join(posixpath.dirname(current), member.linkname))
                continue
            handle = tar.extractfile(member)
            if handle is None:
                raise SandboxError(f"cannot read {path}: not a regular file")
            return handle.read()
    raise SandboxError(f"cannot read {path}: too many levels of symbolic links")


async def get_archive(api: docker.APIClient, container: str, path: str, what: str) -> tuple[bytes, str]:
    """The archive API's tar of ``path`` and its base name (``what``: the operation, for errors)."""
    absolute = posixpath.join("/", path)

    def fetch() -> bytes:
        stream, _stat = api.get_archive(container, absolute)
        return b"".join(stream)

    try:
        archive = await run_blocking(fetch)
    except docker.errors.NotFound as exc:
        raise SandboxError(f"cannot {what} {path}: no such file or directory") from exc
    except API_ERRORS as exc:
        raise SandboxError(f"cannot {what} {path}: {api_message(exc)}") from exc
    return archive, posixpath.basename(absolute.rstrip("/")) or "."
