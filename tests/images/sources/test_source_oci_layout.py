"""`oci:PATH[:TAG]`: layouts written by skopeo (plain, gzip, zstd, Docker schema2, two platforms)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from oci_registry_kit import layer_tar, write_layout
from source_kit import (
    blob,
    read_all,
    require_skopeo,
    rewrite_config,
    sha256,
    skopeo,
    top_manifest,
    untar,
)

from ares.images.errors import ImageError
from ares.images.registry.manifest import Platform
from ares.images.sources.oci_layout import OciLayoutSource

FILES = {"etc/name": b"layout\n", "usr/bin/tool": b"#!/bin/sh\necho hi\n"}
DIFF_ID = sha256(layer_tar(FILES))


@pytest.fixture
def plain(tmp_path: Path) -> Path:
    write_layout(tmp_path / "plain", [("amd64", FILES)])
    return tmp_path / "plain"


@pytest.mark.parametrize(
    ("flags", "media_type"),
    [
        ([], "application/vnd.oci.image.layer.v1.tar"),
        (["--dest-compress-format", "gzip"], "application/vnd.oci.image.layer.v1.tar+gzip"),
        (["--dest-compress-format", "zstd"], "application/vnd.oci.image.layer.v1.tar+zstd"),
        (["--format", "v2s2"], "application/vnd.docker.image.rootfs.diff.tar.gzip"),
    ],
    ids=["uncompressed", "gzip", "zstd", "docker-v2s2"],
)
async def test_reads_every_layer_format_skopeo_writes(
    plain: Path, tmp_path: Path, flags: list[str], media_type: str
) -> None:
    layout = plain
    if flags:
        require_skopeo()
        layout = tmp_path / "copy"
        skopeo(*flags, f"oci:{plain}:img", f"oci:{layout}:v1")
    source = OciLayoutSource(layout, "v1" if flags else "img")
    image = await source.resolve()

    index = json.loads((layout / "index.json").read_text())
    assert image.manifest_digest == index["manifests"][0]["digest"]
    assert image.transport == "oci"
    assert image.config["rootfs"]["diff_ids"] == [DIFF_ID]
    assert image.config["config"]["Cmd"] == ["/bin/sh"]
    [layer] = image.layers
    assert (layer.diff_id, layer.media_type) == (DIFF_ID, media_type)
    assert layer.size == blob(layout, layer.digest).stat().st_size

    data, reports = await read_all(source, layer)
    assert sha256(data) == DIFF_ID
    assert untar(data) == FILES
    assert reports[-1] == (layer.size, layer.size)
    await source.aclose()


async def test_platform_is_selected_from_a_nested_index(tmp_path: Path) -> None:
    arm = {"arch": b"arm64\n"}
    write_layout(tmp_path / "multi", [("amd64", {"arch": b"amd64\n"}), ("arm64/v8", arm)])
    source = OciLayoutSource(tmp_path / "multi", "img", Platform("linux", "arm64", "v8"))
    image = await source.resolve()
    assert image.config["architecture"] == "arm64"
    data, _ = await read_all(source, image.layers[0])
    assert untar(data) == arm

    offered = r"no image for platform linux/s390x \(it has: linux/amd64, linux/arm64/v8\)"
    with pytest.raises(ImageError, match=offered):
        await OciLayoutSource(tmp_path / "multi", "img", Platform("linux", "s390x")).resolve()


async def test_tags_choose_the_image_and_ambiguity_is_an_error(plain: Path, tmp_path: Path) -> None:
    require_skopeo()
    layout = tmp_path / "two"
    other = tmp_path / "other"
    write_layout(other, [("amd64", {"other": b"2\n"})])
    skopeo(f"oci:{plain}:img", f"oci:{layout}:one")
    skopeo(f"oci:{other}:img", f"oci:{layout}:two")

    image = await OciLayoutSource(layout, "two").resolve()
    assert image.name == f"oci:{layout}:two"
    assert image.layers[0].diff_id == sha256(layer_tar({"other": b"2\n"}))
    with pytest.raises(ImageError, match=r"it holds several images; name one of: 'one', 'two'"):
        await OciLayoutSource(layout).resolve()
    with pytest.raises(ImageError, match=r"no image tagged 'three'; it has: 'one', 'two'"):
        await OciLayoutSource(layout, "three").resolve()
    # With one image, the tag may be left out.
    assert (await OciLayoutSource(plain).resolve()).layers[0].diff_id == DIFF_ID


async def test_a_tampered_layer_is_refused_naming_it(plain: Path) -> None:
    source = OciLayoutSource(plain, "img")
    [layer] = (await source.resolve()).layers
    path = blob(plain, layer.digest)
    data = bytearray(path.read_bytes())
    data[600] ^= 0x01  # in the padding after the first file: still a valid tar, another digest
    path.write_bytes(bytes(data))
    with pytest.raises(ImageError, match=rf"layer {layer.digest} failed verification"):
        await read_all(source, layer)


async def test_a_config_that_lies_about_diff_ids_is_refused(plain: Path) -> None:
    forged = sha256(b"something else")
    rewrite_config(plain, lambda config: config["rootfs"].update(diff_ids=[forged]))
    source = OciLayoutSource(plain, "img")
    [layer] = (await source.resolve()).layers
    with pytest.raises(ImageError, match=rf"decompresses to {DIFF_ID}, but the image config says {forged}"):
        await read_all(source, layer)


async def test_a_config_with_more_diff_ids_than_layers_is_refused(plain: Path) -> None:
    rewrite_config(plain, lambda config: config["rootfs"]["diff_ids"].append(DIFF_ID))
    with pytest.raises(ImageError, match=r"lists 2 diff_ids for 1 layers"):
        await OciLayoutSource(plain, "img").resolve()


async def test_tampered_config_and_missing_blobs_are_refused(plain: Path) -> None:
    _, manifest = top_manifest(plain)
    config = blob(plain, manifest["config"]["digest"])
    config.write_bytes(config.read_bytes().replace(b"/bin/sh", b"/bin/ZZ"))
    with pytest.raises(ImageError, match=r"image config sha256:[0-9a-f]{64} failed verification"):
        await OciLayoutSource(plain, "img").resolve()

    config.unlink()
    with pytest.raises(ImageError, match=r"blob sha256:[0-9a-f]{64} is missing from the layout"):
        await OciLayoutSource(plain, "img").resolve()


async def test_a_missing_layer_blob_is_refused(plain: Path) -> None:
    source = OciLayoutSource(plain, "img")
    [layer] = (await source.resolve()).layers
    blob(plain, layer.digest).unlink()
    with pytest.raises(ImageError, match=rf"blob {layer.digest} is missing from the layout"):
        await read_all(source, layer)


async def test_digests_that_would_escape_the_layout_are_refused(plain: Path) -> None:
    index = json.loads((plain / "index.json").read_text())
    index["manifests"][0]["digest"] = "sha256:../../../../etc/passwd"
    (plain / "index.json").write_text(json.dumps(index))
    with pytest.raises(ImageError, match=r"invalid digest 'sha256:\.\./\.\./"):
        await OciLayoutSource(plain, "img").resolve()


async def test_a_blob_symlinked_outside_the_layout_is_refused(plain: Path, tmp_path: Path) -> None:
    source = OciLayoutSource(plain, "img")
    [layer] = (await source.resolve()).layers
    path = blob(plain, layer.digest)
    outside = tmp_path / "outside"
    outside.write_bytes(path.read_bytes())  # even the right bytes: a layout may not point out of itself
    path.unlink()
    os.symlink(outside, path)
    with pytest.raises(ImageError, match=rf"blob {layer.digest} is a symlink to .*outside the layout"):
        await read_all(source, layer)


async def test_a_directory_that_is_not_a_layout_version_1_is_refused(plain: Path, tmp_path: Path) -> None:
    with pytest.raises(ImageError, match=r"is not an OCI image layout \(no oci-layout file\)"):
        await OciLayoutSource(tmp_path).resolve()
    (plain / "oci-layout").write_text('{"imageLayoutVersion": "2.0.0"}')
    with pytest.raises(ImageError, match=r"image layout version '2.0.0' is not 1.x"):
        await OciLayoutSource(plain).resolve()
