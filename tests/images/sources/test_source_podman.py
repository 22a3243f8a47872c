"""A real image saved by `podman save` reads back as podman knows it (one lean test: the image is ~260 MB)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ares.images.sources.base import ImageSource, SourceLayer
from ares.images.sources.docker_archive import DockerArchiveSource
from ares.images.sources.oci_layout import OciLayoutSource

IMAGE = "localhost/ares-debian:bookworm"


@pytest.fixture
def saved(tmp_path: Path) -> tuple[dict[str, Any], Path, Path]:
    """podman's own view of the image, and the image saved as a docker-archive and as an oci-dir."""
    if shutil.which("podman") is None:
        pytest.skip("needs podman to save a real image")
    out = subprocess.run(["podman", "image", "inspect", IMAGE], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        pytest.skip(f"{IMAGE} is not in podman's storage (scripts/podman-engine.sh imports it)")
    archive, layout = tmp_path / "image.tar", tmp_path / "layout"
    for fmt, dest in (("docker-archive", archive), ("oci-dir", layout)):
        subprocess.run(
            ["podman", "save", "--quiet", "--format", fmt, "-o", str(dest), IMAGE], check=True, timeout=300
        )
    return json.loads(out.stdout)[0], archive, layout


async def _diff_id(source: ImageSource, layer: SourceLayer) -> str:
    digest = hashlib.sha256()

    async def sink(data: bytes) -> None:
        digest.update(data)

    await source.read_layer(layer, sink)
    return "sha256:" + digest.hexdigest()


async def test_podman_save_archive_and_oci_dir_read_back_as_podman_sees_the_image(
    saved: tuple[dict[str, Any], Path, Path],
) -> None:
    info, archive, layout = saved

    for source in (DockerArchiveSource(archive, IMAGE), OciLayoutSource(layout, IMAGE)):
        image = await source.resolve()
        assert image.config_digest == f"sha256:{info['Id']}"
        assert [layer.diff_id for layer in image.layers] == info["RootFS"]["Layers"]
        assert image.config["config"].get("Env") == info["Config"].get("Env")
        for layer in image.layers:
            assert await _diff_id(source, layer) == layer.diff_id
        await source.aclose()
