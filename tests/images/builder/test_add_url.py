"""``ADD <url>`` against a loopback HTTP server: checksum checked, mode 600, archives not unpacked,
cached by checksum (or by ETag when no checksum is given)."""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from ares.errors import ImageBuildError
from ares.images.build.standins import host_python_version
from ares.images.cache import ImageCache
from ares.sandbox.local.images import image_sandbox, local_builder

PY = ".".join((host_python_version() or "3.11").split(".")[:2])
DATA = b"payload from the loopback server\n"
ARCHIVE = gzip.compress(b"not really a tar, and it must not be unpacked")


@pytest.fixture
async def server(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[str, list[str]]]:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    hits: list[str] = []

    async def serve(request: web.Request) -> web.Response:
        hits.append(f"{request.method} {request.path}")
        body = ARCHIVE if request.path.endswith(".tar.gz") else DATA
        return web.Response(body=body, headers={"ETag": '"v1"'})

    app = web.Application()
    app.router.add_route("*", "/{name}", serve)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}", hits
    finally:
        await runner.cleanup()


def context(root: Path, dockerfile: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "Dockerfile").write_text(dockerfile)
    return root


async def test_add_url_with_the_right_checksum(server: tuple[str, list[str]], tmp_path: Path) -> None:
    url, hits = server
    good = hashlib.sha256(DATA).hexdigest()
    text = (
        f"FROM python:{PY}-slim\n"
        f"ADD --checksum=sha256:{good} {url}/data.bin /dl/\n"
        f"ADD {url}/bundle.tar.gz /dl/bundle.tar.gz\n"
    )
    builder = local_builder(ImageCache(tmp_path / "cache"))
    image = await builder.build(context(tmp_path / "ctx", text))
    async with image_sandbox(image) as sandbox:
        assert await sandbox.read_file("/dl/data.bin") == DATA
        assert (await sandbox.exec("stat -c '%a %U' /dl/data.bin")).stdout == "600 root\n"
        assert await sandbox.read_file("/dl/bundle.tar.gz") == ARCHIVE  # a remote archive stays a file
    # Rebuilt: the checksummed ADD is cached without a request; the other asks for the ETag only.
    hits.clear()
    again = await builder.build(context(tmp_path / "ctx", text))
    assert again.cached and hits == ["HEAD /bundle.tar.gz"]


async def test_add_url_with_a_wrong_checksum_fails(server: tuple[str, list[str]], tmp_path: Path) -> None:
    url, _ = server
    bad = "0" * 64
    text = f"FROM python:{PY}-slim\nADD --checksum=sha256:{bad} {url}/data.bin /data.bin\n"
    builder = local_builder(ImageCache(tmp_path / "cache"))
    with pytest.raises(ImageBuildError, match=f"checksum mismatch: expected sha256:{bad}, got sha256:"):
        await builder.build(context(tmp_path / "ctx", text))
    with pytest.raises(ImageBuildError, match="--checksum must be sha256"):
        await builder.build(
            context(tmp_path / "ctx2", f"FROM python:{PY}-slim\nADD --checksum=md5:1 {url}/x /x\n")
        )
