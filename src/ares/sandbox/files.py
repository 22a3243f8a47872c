"""Tar archives for moving files in and out of sandboxes, shared by every backend."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path, PurePosixPath

from ares.errors import SandboxError
from ares.sandbox.base import FileMap


def tar_files(src: Path | FileMap, arcname: str | None = None) -> bytes:
    """Pack a host path (file or directory contents) or in-memory files into a tar archive.

    A directory is packed as its contents; a single file as ``arcname`` (default: its name).
    """
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        if isinstance(src, Path):
            if src.is_dir():
                for child in sorted(src.iterdir()):
                    tar.add(child, arcname=child.name)
            elif src.is_file():
                tar.add(src, arcname=arcname or src.name)
            else:
                raise SandboxError(f"cannot upload {src}: no such file or directory")
        else:
            for rel, content in sorted(src.items()):
                data = content.encode() if isinstance(content, str) else content
                info = tarfile.TarInfo(_safe_relpath(rel))
                info.size = len(data)
                info.mode = 0o755 if rel.endswith(".sh") else 0o644
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def write_files(dest: Path, files: FileMap) -> None:
    """Write in-memory files below ``dest`` (dirs 0755, files 0644, ``*.sh`` 0755), as uploads do."""
    for rel, content in sorted(files.items()):
        path = dest / _safe_relpath(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        path.chmod(0o755 if rel.endswith(".sh") else 0o644)


def extract_tar(data: bytes, dest: Path) -> None:
    """Unpack an archive produced inside a sandbox, refusing links or paths that leave ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        tar.extractall(dest, filter="data")


def _safe_relpath(rel: str) -> str:
    path = PurePosixPath(rel)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise SandboxError(f"refusing file path {rel!r}: paths must be relative and stay inside the target")
    return os.path.normpath(rel)
