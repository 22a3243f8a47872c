"""Caps on what a registry can make the client read: documents, oversized blobs, decompression bombs."""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

import aiohttp
import httpx
import pytest
import zstandard
from aiohttp import web
from oci_registry_kit import FAST_RETRY, Pushed, Registry, layer_tar, make_client, serve
from test_registry_proxy import forwarding_app

from ares.images.errors import ImageError
from ares.images.registry import (
    DockerConfigCredentials,
    Limits,
    RegistryClient,
    fetch_layer,
    fetch_layer_to_file,
    parse_reference,
    resolve,
)
from ares.images.registry.limits import GiB


def _json(value: object) -> bytes:
    import json

    return json.dumps(value, sort_keys=True).encode()


def limited(host: str, limits: Limits) -> RegistryClient:
    return RegistryClient(
        credentials=DockerConfigCredentials([]), insecure=[host], limits=limits, retry=FAST_RETRY
    )


def push_layer(registry: Registry, repository: str, blob: bytes, media_type: str, tar: bytes) -> None:
    """Push `repository:v1` with one layer stored as `blob` (`tar` compressed) through the registry API."""
    base = f"http://{registry.host}/v2/{repository}"
    with httpx.Client(timeout=10) as http:

        def upload(data: bytes) -> dict[str, object]:
            digest = f"sha256:{hashlib.sha256(data).hexdigest()}"
            start = http.post(f"{base}/blobs/uploads/")
            start.raise_for_status()
            location = httpx.URL(base).join(start.headers["location"])
            http.put(location.copy_merge_params({"digest": digest}), content=data).raise_for_status()
            return {"digest": digest, "size": len(data)}

        config = {
            "architecture": "amd64",
            "os": "linux",
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{hashlib.sha256(tar).hexdigest()}"]},
        }
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **upload(_json(config))},
            "layers": [{"mediaType": media_type, **upload(blob)}],
        }
        http.put(
            f"{base}/manifests/v1",
            content=_json(manifest),
            headers={"Content-Type": "application/vnd.oci.image.manifest.v1+json"},
        ).raise_for_status()


@pytest.fixture(scope="module")
def bombs(registry: Registry) -> dict[str, bytes]:
    """ares/bomb-gzip and ares/bomb-zstd: 8 MiB of zeros stored in a few KiB."""
    tar = layer_tar({"zeros": bytes(8 * 1024 * 1024)})
    push_layer(
        registry, "ares/bomb-gzip", gzip.compress(tar), "application/vnd.oci.image.layer.v1.tar+gzip", tar
    )
    zstd = zstandard.ZstdCompressor().compress(tar)
    push_layer(registry, "ares/bomb-zstd", zstd, "application/vnd.oci.image.layer.v1.tar+zstd", tar)
    return {"tar": tar}


@pytest.mark.parametrize("kind", ["gzip", "zstd"])
async def test_decompression_cap_names_the_layer(
    registry: Registry, bombs: dict[str, bytes], tmp_path: Path, kind: str
) -> None:
    ref = parse_reference(f"{registry.host}/ares/bomb-{kind}:v1")
    tight = Limits(layer_ratio=10, layer_floor=1024 * 1024)
    async with limited(registry.host, tight) as client:
        image = await resolve(client, ref)
        layer = image.layers[0]
        assert layer.size < 100 * 1024
        target = tmp_path / "layer.tar"
        with pytest.raises(ImageError, match=f"layer {layer.digest} inflates to more than 1048576 bytes"):
            await fetch_layer_to_file(client, image.reference, layer, image.diff_ids[0], target)
        assert list(tmp_path.iterdir()) == []
        # The same layer within a cap given per call, and within the default cap.
        out: list[bytes] = []
        await fetch_layer(
            client, image.reference, layer, image.diff_ids[0], out.append, max_uncompressed=9 * 2**20
        )
        assert b"".join(out) == bombs["tar"]
        assert max(len(piece) for piece in out) <= 4 * 1024 * 1024 + 128 * 1024  # delivered in pieces
    assert Limits().uncompressed_cap(layer.size) == GiB  # the floor
    assert Limits().uncompressed_cap(10 * GiB) == 64 * GiB  # the absolute cap
    async with make_client(registry.host) as client:
        await fetch_layer(client, image.reference, layer, image.diff_ids[0], lambda _: None)


async def test_manifest_and_config_caps(registry: Registry, images: dict[str, Pushed]) -> None:
    ref = parse_reference(f"{registry.host}/ares/gzip:v1")
    async with limited(registry.host, Limits(manifest_bytes=100)) as client:
        with pytest.raises(ImageError, match=r"announces \d+ bytes, over the 100-byte cap"):
            await resolve(client, ref)
    async with limited(registry.host, Limits(config_bytes=50)) as client:
        with pytest.raises(ImageError, match=r"image config is \d+ bytes, larger than 50"):
            await resolve(client, ref)

    async def chunked(request: web.Request, _: bytes) -> web.StreamResponse | None:
        """The manifest without Content-Length: the cap must hold while reading."""
        if "/manifests/" not in request.path:
            return None
        async with (
            aiohttp.ClientSession() as session,
            session.get(
                f"http://{registry.host}{request.path}", headers={"Accept": request.headers["Accept"]}
            ) as up,
        ):
            body = await up.read()
            response = web.StreamResponse(headers={"Content-Type": up.headers["Content-Type"]})
        response.enable_chunked_encoding()
        await response.prepare(request)
        for i in range(0, len(body), 64):
            await response.write(body[i : i + 64])
        await response.write_eof()
        return response

    app, _ = forwarding_app(registry.host, chunked)
    async with serve(app) as host:
        async with limited(host, Limits(manifest_bytes=100)) as client:
            with pytest.raises(ImageError, match="sent more than the 100-byte cap"):
                await resolve(client, parse_reference(f"{host}/ares/gzip:v1"))
        async with make_client(host) as client:
            assert (await resolve(client, parse_reference(f"{host}/ares/gzip:v1"))).diff_ids


@pytest.mark.parametrize("chunk", [False, True], ids=["content-length", "chunked"])
async def test_layer_bigger_than_its_descriptor_is_aborted(
    registry: Registry, images: dict[str, Pushed], chunk: bool
) -> None:
    async with make_client(registry.host) as client:
        image = await resolve(client, parse_reference(f"{registry.host}/ares/zstd:v1"))
    layer = image.layers[0]

    async def padded(request: web.Request, _: bytes) -> web.StreamResponse | None:
        if not request.path.endswith(layer.digest):
            return None
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://{registry.host}{request.path}") as up,
        ):
            body = await up.read() + b"\0" * 4096
        if not chunk:
            return web.Response(body=body)
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        await response.write(body)
        await response.write_eof()
        return response

    app, _ = forwarding_app(registry.host, padded)
    async with serve(app) as host, make_client(host) as client:
        pinned = parse_reference(f"{host}/ares/zstd@{image.manifest_digest}")
        what = "sent more" if chunk else f"announces {layer.size + 4096} bytes"
        with pytest.raises(ImageError, match=f"larger than the {layer.size} bytes .*{what}"):
            await fetch_layer(client, pinned, layer, image.diff_ids[0], lambda _: None)


async def test_docker_content_digest_is_checked_on_tag_pulls(
    registry: Registry, images: dict[str, Pushed]
) -> None:
    async def lie(request: web.Request, _: bytes) -> web.StreamResponse | None:
        if "/manifests/" not in request.path:
            return None
        async with (
            aiohttp.ClientSession() as session,
            session.get(
                f"http://{registry.host}{request.path}", headers={"Accept": request.headers["Accept"]}
            ) as up,
        ):
            body = await up.read()
            content_type = up.headers["Content-Type"]
        headers = {"Docker-Content-Digest": "sha256:" + "0" * 64, "Content-Type": content_type}
        return web.Response(body=body, headers=headers)

    app, _ = forwarding_app(registry.host, lie)
    async with serve(app) as host, make_client(host) as client:
        with pytest.raises(
            ImageError, match=r"says the manifest for v1 is sha256:0{64} \(Docker-Content-Digest\)"
        ):
            await resolve(client, parse_reference(f"{host}/ares/gzip:v1"))
