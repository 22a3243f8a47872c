"""Pulls from a real registry: every manifest format and compression, platforms, and verification."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import httpx
import pytest
from oci_registry_kit import Pushed, Registry, make_client

from ares.images.errors import ImageError
from ares.images.registry import (
    Platform,
    RegistryClient,
    RetryPolicy,
    fetch_blob,
    fetch_layer,
    fetch_layer_to_file,
    gather_bounded,
    parse_reference,
    resolve,
)
from ares.images.registry import mediatypes as mt


def untar(data: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


async def pull_files(
    client: RegistryClient, ref_text: str, platform: Platform | None = None
) -> dict[str, bytes]:
    image = await resolve(client, parse_reference(ref_text), platform)
    chunks: list[bytes] = []
    await fetch_layer(client, image.reference, image.layers[0], image.diff_ids[0], chunks.append)
    return untar(b"".join(chunks))


@pytest.mark.parametrize(
    ("name", "manifest_type", "layer_type"),
    [
        ("gzip", mt.OCI_MANIFEST, "application/vnd.oci.image.layer.v1.tar+gzip"),
        ("zstd", mt.OCI_MANIFEST, "application/vnd.oci.image.layer.v1.tar+zstd"),
        ("v2s2", mt.DOCKER_MANIFEST, "application/vnd.docker.image.rootfs.diff.tar.gzip"),
        ("raw", mt.OCI_MANIFEST, "application/vnd.oci.image.layer.v1.tar"),
    ],
)
async def test_pull_each_format(
    client: RegistryClient,
    registry: Registry,
    images: dict[str, Pushed],
    name: str,
    manifest_type: str,
    layer_type: str,
) -> None:
    pushed = images[name]
    image = await resolve(client, parse_reference(f"{registry.host}/{pushed.repository}:v1"))
    assert image.media_type == manifest_type
    assert [layer.media_type for layer in image.layers] == [layer_type]
    assert image.diff_ids == (pushed.diff_id,)
    assert image.config["os"] == "linux"
    assert image.reference.digest == image.manifest_digest and image.reference.tag == "v1"
    assert image.index_digest is None
    chunks: list[bytes] = []
    await fetch_layer(client, image.reference, image.layers[0], image.diff_ids[0], chunks.append)
    assert untar(b"".join(chunks)) == pushed.files


async def test_pull_by_digest_records_and_checks_it(
    client: RegistryClient, registry: Registry, images: dict[str, Pushed]
) -> None:
    by_tag = await resolve(client, parse_reference(f"{registry.host}/ares/gzip:v1"))
    by_digest = await resolve(client, parse_reference(f"{registry.host}/ares/gzip@{by_tag.manifest_digest}"))
    assert by_digest.manifest_digest == by_tag.manifest_digest
    assert by_digest.layers == by_tag.layers
    async with httpx.AsyncClient() as http:
        head = await http.head(
            f"http://{registry.host}/v2/ares/gzip/manifests/v1", headers={"Accept": mt.MANIFEST_ACCEPT}
        )
    assert head.headers["docker-content-digest"] == by_tag.manifest_digest


async def test_index_selects_platform(
    client: RegistryClient, registry: Registry, images: dict[str, Pushed]
) -> None:
    ref = f"{registry.host}/ares/multi:v1"
    amd = await resolve(client, parse_reference(ref), Platform("linux", "amd64"))
    assert amd.index_digest is not None and amd.manifest_digest != amd.index_digest
    assert amd.config["architecture"] == "amd64"
    assert await pull_files(client, ref) == images["multi"].files  # the host's platform (amd64 here)
    assert await pull_files(client, ref, Platform("linux", "arm64", "v8")) == images["multi-arm64"].files
    assert await pull_files(client, ref, Platform("linux", "arm64")) == images["multi-arm64"].files
    with pytest.raises(
        ImageError, match=r"no image for platform linux/s390x \(it has: linux/amd64, linux/arm64/v8\)"
    ):
        await resolve(client, parse_reference(ref), Platform("linux", "s390x"))


async def test_missing_image_says_not_found(client: RegistryClient, registry: Registry) -> None:
    with pytest.raises(ImageError, match=r"not found .*HTTP 404.*MANIFEST_UNKNOWN"):
        await resolve(client, parse_reference(f"{registry.host}/ares/gzip:nope"))


async def test_plain_http_is_never_implicit(registry: Registry, images: dict[str, Pushed]) -> None:
    quick = RetryPolicy(attempts=1)
    async with make_client(retry=quick) as client:  # loopback, but not listed as insecure
        with pytest.raises(ImageError, match="ARES_INSECURE_REGISTRIES"):
            await resolve(client, parse_reference(f"{registry.host}/ares/gzip:v1"))


async def test_blob_progress_to_file_and_parallel(
    client: RegistryClient, registry: Registry, images: dict[str, Pushed], tmp_path: Path
) -> None:
    names = ["gzip", "zstd", "v2s2", "raw"]
    resolved = [await resolve(client, parse_reference(f"{registry.host}/ares/{n}:v1")) for n in names]
    seen: dict[str, list[tuple[int, int]]] = {}

    def progress(digest: str, done: int, total: int) -> None:
        seen.setdefault(digest, []).append((done, total))

    def job(i: int):
        image = resolved[i]
        path = tmp_path / f"{names[i]}.tar"
        return lambda: fetch_layer_to_file(
            client, image.reference, image.layers[0], image.diff_ids[0], path, progress=progress
        )

    await gather_bounded([job(i) for i in range(len(names))], limit=2)
    for name, image in zip(names, resolved, strict=True):
        assert untar((tmp_path / f"{name}.tar").read_bytes()) == images[name].files
        layer = image.layers[0]
        assert seen[layer.digest][-1] == (layer.size, layer.size)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{n}.tar" for n in names)

    compressed: list[bytes] = []
    await fetch_blob(client, resolved[0].reference, resolved[0].layers[0], compressed.append)
    assert b"".join(compressed)[:2] == b"\x1f\x8b"


async def test_gather_bounded_limits_concurrency() -> None:
    import asyncio

    running = peak = 0

    async def work(i: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1
        return i

    assert await gather_bounded([lambda i=i: work(i) for i in range(10)], limit=3) == list(range(10))
    assert peak == 3


async def test_tampered_blob_is_rejected_and_file_removed(
    client: RegistryClient, registry: Registry, images: dict[str, Pushed], tmp_path: Path
) -> None:
    image = await resolve(client, parse_reference(f"{registry.host}/ares/tamper:v1"))
    layer = image.layers[0]
    stored = registry.blob_path(layer.digest)
    original = stored.read_bytes()
    try:
        stored.write_bytes(bytes(b ^ 0xFF for b in original))  # same size, different content
        target = tmp_path / "layer.tar"
        with pytest.raises(ImageError, match=f"blob {layer.digest} .*(failed verification|corrupt)"):
            await fetch_layer_to_file(client, image.reference, layer, image.diff_ids[0], target)
        assert list(tmp_path.iterdir()) == []
        with pytest.raises(ImageError, match=f"blob {layer.digest} failed verification"):
            await fetch_blob(client, image.reference, layer, lambda _: None)
    finally:
        stored.write_bytes(original)


async def test_wrong_diff_id_is_rejected(
    client: RegistryClient, registry: Registry, images: dict[str, Pushed]
) -> None:
    image = await resolve(client, parse_reference(f"{registry.host}/ares/gzip:v1"))
    with pytest.raises(ImageError, match=r"decompresses to .* but the image config says"):
        await fetch_layer(client, image.reference, image.layers[0], "sha256:" + "0" * 64, lambda _: None)


async def test_tampered_manifest_fails_digest_pull(
    client: RegistryClient, registry: Registry, images: dict[str, Pushed]
) -> None:
    image = await resolve(client, parse_reference(f"{registry.host}/ares/tamper:v1"))
    stored = registry.blob_path(image.manifest_digest)
    original = stored.read_bytes()
    try:
        stored.write_bytes(original.replace(b'"schemaVersion":2', b'"schemaVersion":2 '))
        assert stored.read_bytes() != original
        pinned = parse_reference(f"{registry.host}/ares/tamper@{image.manifest_digest}")
        with pytest.raises(ImageError, match=f"served for {image.manifest_digest} has digest sha256:"):
            await resolve(client, pinned)
    finally:
        stored.write_bytes(original)
