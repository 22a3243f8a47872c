"""Files in and out of a local sandbox, through its own ``tar`` and ``cat`` run as commands.

The archive is packed or unpacked inside the sandbox, so it only ever sees the sandbox's view of its
files; on the host, downloads are unpacked with ``files.extract_tar`` (no links out, no devices).
"""

from __future__ import annotations

import asyncio
import os
import shlex
from collections.abc import Awaitable, Callable
from pathlib import Path, PurePosixPath

from ares.errors import SandboxError
from ares.sandbox.base import ExecResult, FileMap
from ares.sandbox.files import extract_tar, tar_files
from ares.sandbox.local import janitor
from ares.sandbox.local.channel import Reply


async def upload(exec_: Callable[..., Awaitable[ExecResult]], src: Path | FileMap, dest: str) -> None:
    """Put ``src`` at ``dest`` (made if missing): a tar unpacked by the sandbox's own ``tar`` (``exec_``)."""
    if isinstance(src, Path) and await asyncio.to_thread(src.is_file):
        target = PurePosixPath(dest)
        archive = await asyncio.to_thread(tar_files, src, target.name)
        directory = str(target.parent)
    else:
        archive = await asyncio.to_thread(tar_files, src)
        directory = dest
    quoted = shlex.quote(directory)
    # Plain words run without a shell (see init/commands.py): into an existing dir (the workdir,
    # which every sandbox has from its start) that is one process instead of bash, mkdir and tar.
    result = await exec_(f"tar -xf - -C {quoted}", cwd="/", stdin=archive)
    if not result.ok:  # most likely no such dir yet: tar extracted nothing
        result = await exec_(f"mkdir -p {quoted} && tar -xf - -C {quoted}", cwd="/", stdin=archive)
    if not result.ok:
        raise SandboxError(f"upload to {dest} failed: {result.stderr.strip()}")


async def download(run: Callable[..., Awaitable[Reply]], src: str, dest: Path) -> None:
    """Copy ``src`` to ``dest`` on the host: a tar made by the sandbox's ``tar`` (``run``), unpacked here."""
    path = PurePosixPath(src)
    archive = f"tar -cf - -C {shlex.quote(str(path.parent))} {shlex.quote(path.name)}"
    reply = await run(archive, cwd="/")
    if reply.exit_code != 0:
        raise SandboxError(f"download of {src} failed: {reply.stderr.decode(errors='replace').strip()}")
    staging = dest.parent / f".{dest.name}.ares-download"
    await asyncio.to_thread(extract_tar, reply.stdout, staging)
    await asyncio.to_thread(os.replace, staging / path.name, dest)
    await asyncio.to_thread(janitor.remove_tree, staging)


async def read_file(run: Callable[..., Awaitable[Reply]], path: str) -> bytes:
    reply = await run(f"cat -- {shlex.quote(path)}", cwd="/")
    if reply.exit_code != 0:
        raise SandboxError(f"cannot read {path}: {reply.stderr.decode(errors='replace').strip()}")
    return reply.stdout
