"""The Debian bookworm base (debootstrap, built once per cache) and apt inside a RUN step."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from ares.images.cache import ImageCache
from ares.sandbox.local.images import image_sandbox, local_builder

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not (shutil.which("debootstrap") or Path("/usr/sbin/debootstrap").exists()),
    reason="the Debian base needs root and debootstrap (.ci/run installs it)",
)


@pytest.fixture(scope="module")
def debian_cache(tmp_path_factory: pytest.TempPathFactory) -> ImageCache:
    """One cache for the module, so debootstrap runs once (~25 s)."""
    return ImageCache(Path(os.environ.get("ARES_CACHE_DIR") or tmp_path_factory.mktemp("debian-cache")))


async def test_debian_style_bases_build_with_apt(debian_cache: ImageCache, tmp_path: Path) -> None:
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(
        "FROM debian:bookworm-slim\n"
        "RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends jq >/dev/null\n"
        "RUN useradd --create-home agent\n"
        "USER agent\n"
        "WORKDIR /home/agent\n"
    )
    lines: list[str] = []
    image = await local_builder(debian_cache, on_log=lines.append).build(ctx)
    async with image_sandbox(image) as sandbox:
        assert (await sandbox.exec("echo '{\"a\": 41}' | jq '.a + 1'")).stdout == "42\n"
        assert (await sandbox.exec("id -un && pwd && echo $HOME")).stdout.split() == [
            "agent",
            "/home/agent",
            "/home/agent",
        ]
        assert "bookworm" in (await sandbox.read_file("/etc/os-release")).decode()
        # Nothing of the host leaks into a debootstrap root.
        assert not (await sandbox.exec("test -e /work || test -e /root/.pyenv")).ok

    ubuntu = tmp_path / "ubuntu"
    ubuntu.mkdir()
    (ubuntu / "Dockerfile").write_text("FROM ubuntu:22.04\nRUN test -f /etc/debian_version\n")
    notes: list[str] = []
    image = await local_builder(debian_cache, on_log=notes.append).build(ubuntu)
    assert image.base == "ares/debian:bookworm" and image.served_by == "ares/debian:bookworm"
    assert image.substitutions[0].requested == "ubuntu:22.04"
    assert any("ubuntu:22.04 was served by the stand-in ares/debian:bookworm" in line for line in notes)
