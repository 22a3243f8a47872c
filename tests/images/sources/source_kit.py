"""Helpers for the image-source tests: real artifacts made with skopeo, read back through a source."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest

from ares.images.sources.base import ImageSource, SourceLayer


def require_skopeo() -> None:
    if shutil.which("skopeo") is None:
        pytest.skip("needs skopeo (apt-get install skopeo) to write layouts and archives")


def skopeo(*args: str) -> None:
    subprocess.run(["skopeo", "copy", "--quiet", *args], check=True, capture_output=True, timeout=120)


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


async def read_all(source: ImageSource, layer: SourceLayer) -> tuple[bytes, list[tuple[int, int | None]]]:
    """A layer's uncompressed bytes (small test layers only) and the progress reports."""
    chunks: list[bytes] = []
    reports: list[tuple[int, int | None]] = []

    async def sink(data: bytes) -> None:
        chunks.append(data)

    await source.read_layer(layer, sink, lambda done, total: reports.append((done, total)))
    return b"".join(chunks), reports


def untar(data: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}  # type: ignore[union-attr]


def blob(layout: Path, digest: str) -> Path:
    return layout / "blobs" / digest.replace(":", "/", 1)


def write_blob(layout: Path, data: bytes) -> dict[str, Any]:
    digest = sha256(data)
    blob(layout, digest).write_bytes(data)
    return {"digest": digest, "size": len(data)}


def top_manifest(layout: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(index.json, the manifest its single entry names) of a one-image layout."""
    index = json.loads((layout / "index.json").read_text())
    manifest = json.loads(blob(layout, index["manifests"][0]["digest"]).read_bytes())
    return index, manifest


def rewrite_config(layout: Path, change: Any) -> None:
    """Change a one-image layout's config and re-pin config, manifest and index.json to it.

    The result is consistent by digest but lies about its layers, as a forged image would.
    """
    index, manifest = top_manifest(layout)
    config = json.loads(blob(layout, manifest["config"]["digest"]).read_bytes())
    change(config)
    manifest["config"].update(write_blob(layout, json.dumps(config).encode()))
    index["manifests"][0].update(write_blob(layout, json.dumps(manifest).encode()))
    (layout / "index.json").write_text(json.dumps(index))


def write_tar(path: Path, members: dict[str, bytes | tuple[str, str]]) -> None:
    """A tar of regular files (bytes) and links (("sym" | "hard", target)), in order."""
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, content in members.items():
            info = tarfile.TarInfo(name)
            if isinstance(content, tuple):
                kind, info.linkname = content
                info.type = tarfile.SYMTYPE if kind == "sym" else tarfile.LNKTYPE
                tar.addfile(info)
            else:
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))


def read_tar(path: Path) -> dict[str, bytes | tuple[str, str]]:
    """The members of an archive as `write_tar` takes them (directories dropped)."""
    out: dict[str, bytes | tuple[str, str]] = {}
    with tarfile.open(path, "r:") as tar:
        for member in tar:
            if member.issym():
                out[member.name] = ("sym", member.linkname)
            elif member.islnk():
                out[member.name] = ("hard", member.linkname)
            elif member.isfile():
                out[member.name] = tar.extractfile(member).read()  # type: ignore[union-attr]
    return out
