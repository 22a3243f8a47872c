"""`docker-archive:PATH`: archives written by skopeo (and variants of them a hostile sender could craft)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from oci_registry_kit import layer_tar, write_layout
from source_kit import read_all, read_tar, require_skopeo, sha256, skopeo, untar, write_tar

from ares.images.errors import ImageError
from ares.images.sources.docker_archive import DockerArchiveSource

FILES = {"etc/name": b"archive\n", "bin/tool": b"#!/bin/sh\necho hi\n"}
DIFF_ID = sha256(layer_tar(FILES))
TAG = "ares/test:v1"


@pytest.fixture
def layout(tmp_path: Path) -> Path:
    write_layout(tmp_path / "layout", [("amd64", FILES)])
    return tmp_path / "layout"


@pytest.fixture
def archive(layout: Path, tmp_path: Path) -> Path:
    """`skopeo copy oci:… docker-archive:…`: `<diff_id>.tar`, `<config digest>.json`, a legacy symlink."""
    require_skopeo()
    path = tmp_path / "image.tar"
    skopeo(f"oci:{layout}:img", f"docker-archive:{path}:{TAG}")
    return path


def edit(archive: Path, change: object) -> dict[str, bytes | tuple[str, str]]:
    """Rewrite `archive` after `change(members, manifest_entry)`; returns the new members."""
    members = read_tar(archive)
    manifest = json.loads(members["manifest.json"])  # type: ignore[arg-type]
    change(members, manifest[0])  # type: ignore[operator]
    members["manifest.json"] = json.dumps(manifest).encode()
    write_tar(archive, members)
    return members


async def test_a_skopeo_archive_resolves_and_streams_its_layer(archive: Path) -> None:
    members = read_tar(archive)
    assert any(isinstance(v, tuple) and v[0] == "sym" for v in members.values()), "expected a legacy symlink"
    source = DockerArchiveSource(archive)
    image = await source.resolve()
    assert image.transport == "docker-archive"
    assert image.name == f"docker-archive:{archive}:docker.io/{TAG}"
    assert image.config["rootfs"]["diff_ids"] == [DIFF_ID]
    assert image.config_digest == sha256(members[f"{image.config_digest.removeprefix('sha256:')}.json"])  # type: ignore[arg-type]
    [layer] = image.layers
    assert (layer.digest, layer.diff_id) == (DIFF_ID, DIFF_ID)  # stored uncompressed: the blob is the tar
    assert layer.media_type == "application/vnd.docker.image.rootfs.diff.tar"

    data, reports = await read_all(source, layer)
    assert sha256(data) == DIFF_ID
    assert untar(data) == FILES
    assert reports[-1] == (layer.size, layer.size)

    # The synthesized manifest digest depends on the image only, not on the archive's file names.
    canonical = json.dumps({"config": image.config_digest, "diff_ids": [DIFF_ID]}, separators=(",", ":"))
    assert image.manifest_digest == sha256(canonical.encode())
    assert (await DockerArchiveSource(archive, TAG).resolve()).manifest_digest == image.manifest_digest


async def test_an_oci_archive_is_read_like_a_layout(layout: Path, tmp_path: Path) -> None:
    require_skopeo()
    path = tmp_path / "oci.tar"
    skopeo(f"oci:{layout}:img", f"oci-archive:{path}:v1")
    source = DockerArchiveSource(path, "v1")
    image = await source.resolve()
    [layer] = image.layers
    assert layer.media_type == "application/vnd.oci.image.layer.v1.tar+gzip"  # skopeo compresses
    assert layer.diff_id == DIFF_ID
    data, _ = await read_all(source, layer)
    assert untar(data) == FILES
    with pytest.raises(ImageError, match=r"no image tagged 'v2'; it has: 'v1'"):
        await DockerArchiveSource(path, "v2").resolve()


async def test_a_gzip_compressed_layer_inside_the_archive_is_read(archive: Path) -> None:
    def compress(members: dict[str, bytes | tuple[str, str]], entry: dict[str, object]) -> None:
        members["layer.tar.gz"] = gzip.compress(layer_tar(FILES), mtime=0)
        entry["Layers"] = ["layer.tar.gz"]

    members = edit(archive, compress)
    source = DockerArchiveSource(archive)
    [layer] = (await source.resolve()).layers
    assert layer.media_type == "application/vnd.docker.image.rootfs.diff.tar.gzip"
    assert layer.digest == sha256(members["layer.tar.gz"])  # type: ignore[arg-type]
    data, _ = await read_all(source, layer)
    assert sha256(data) == DIFF_ID


async def test_images_are_chosen_by_repo_tag(archive: Path, tmp_path: Path) -> None:
    other_files = {"other": b"2\n"}
    write_layout(tmp_path / "other", [("amd64", other_files)])
    other = tmp_path / "other.tar"
    skopeo(f"oci:{tmp_path / 'other'}:img", f"docker-archive:{other}:ares/other:v2")
    both = read_tar(archive) | {k: v for k, v in read_tar(other).items() if k != "manifest.json"}
    both["manifest.json"] = json.dumps(
        json.loads(read_tar(archive)["manifest.json"]) + json.loads(read_tar(other)["manifest.json"])  # type: ignore[arg-type]
    ).encode()
    write_tar(archive, both)

    image = await DockerArchiveSource(archive, "docker.io/ares/other:v2").resolve()
    assert image.layers[0].diff_id == sha256(layer_tar(other_files))
    assert (await DockerArchiveSource(archive, TAG).resolve()).layers[0].diff_id == DIFF_ID
    names = r"'docker.io/ares/test:v1', 'docker.io/ares/other:v2'"
    with pytest.raises(ImageError, match=rf"the archive holds 2 images; name one of: {names}"):
        await DockerArchiveSource(archive).resolve()
    with pytest.raises(ImageError, match=rf"no image here is tagged 'ares/test:v9'; it has: {names}"):
        await DockerArchiveSource(archive, "ares/test:v9").resolve()


async def test_a_tampered_layer_is_refused_naming_it(archive: Path) -> None:
    def tamper(members: dict[str, bytes | tuple[str, str]], entry: dict[str, object]) -> None:
        name = f"{DIFF_ID.removeprefix('sha256:')}.tar"
        data = bytearray(members[name])  # type: ignore[arg-type]
        data[600] ^= 0x01
        members[name] = bytes(data)

    edit(archive, tamper)
    source = DockerArchiveSource(archive)
    [layer] = (await source.resolve()).layers
    with pytest.raises(ImageError, match=rf"layer {DIFF_ID} failed verification"):
        await read_all(source, layer)


async def test_a_config_that_lies_is_refused(archive: Path) -> None:
    forged = sha256(b"forged")

    def lie(members: dict[str, bytes | tuple[str, str]], entry: dict[str, object]) -> None:
        config = json.loads(members.pop(str(entry["Config"])))  # type: ignore[arg-type]
        config["rootfs"]["diff_ids"] = [forged]
        members["config.json"] = json.dumps(config).encode()
        entry["Config"] = "config.json"

    edit(archive, lie)
    source = DockerArchiveSource(archive)
    [layer] = (await source.resolve()).layers
    # Stored uncompressed, the layer's only identity is the diff_id the config gives it.
    assert layer.digest == forged
    with pytest.raises(
        ImageError, match=rf"layer {forged} failed verification \(its content hashes to {DIFF_ID}\)"
    ):
        await read_all(source, layer)


async def test_a_config_whose_name_claims_another_digest_is_refused(archive: Path) -> None:
    def swap(members: dict[str, bytes | tuple[str, str]], entry: dict[str, object]) -> None:
        name = str(entry["Config"])
        members[name] = members[name].replace(b"/bin/sh", b"/bin/ZZ")  # type: ignore[union-attr]

    edit(archive, swap)
    with pytest.raises(ImageError, match=r"hashes to sha256:[0-9a-f]{64}, not the digest its name claims"):
        await DockerArchiveSource(archive).resolve()


async def test_diff_ids_and_layers_must_pair_up(archive: Path) -> None:
    edit(archive, lambda members, entry: entry["Layers"].append(entry["Layers"][0]))
    with pytest.raises(ImageError, match=r"lists 1 diff_ids for 2 layers"):
        await DockerArchiveSource(archive).resolve()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda m, e: e.update(Layers=["../outside.tar"]), r"'\.\./outside\.tar' points outside the archive"),
        (lambda m, e: e.update(Layers=["/etc/passwd"]), r"'/etc/passwd' points outside the archive"),
        (lambda m, e: m.update({"../evil": b"x"}), r"member '\.\./evil' points outside the archive"),
        (
            lambda m, e: m.update({"escape.tar": ("sym", "../../etc/passwd")}),
            r"link escape\.tar → '\.\./\.\./etc/passwd' points outside the archive",
        ),
        (lambda m, e: e.update(Layers=["missing.tar"]), r"the archive has no member 'missing\.tar'"),
    ],
    ids=["dotdot-layer", "absolute-layer", "dotdot-member", "symlink-out", "missing-layer"],
)
async def test_hostile_archives_are_refused(archive: Path, change: object, message: str) -> None:
    edit(archive, change)
    with pytest.raises(ImageError, match=message):
        await DockerArchiveSource(archive).resolve()


async def test_a_compressed_archive_is_refused_with_the_fix(archive: Path, tmp_path: Path) -> None:
    packed = tmp_path / "image.tar.gz"
    packed.write_bytes(gzip.compress(archive.read_bytes()))
    with pytest.raises(ImageError, match=rf"gzip-compressed; .* run `gunzip -k {packed}`"):
        await DockerArchiveSource(packed).resolve()
    not_tar = tmp_path / "junk.tar"
    not_tar.write_bytes(b"not a tar at all" * 100)
    with pytest.raises(ImageError, match=r"is not a readable tar archive"):
        await DockerArchiveSource(not_tar).resolve()
