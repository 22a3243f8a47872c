"""Real registries on loopback for the image tests, holding small images in every format the client reads."""

from __future__ import annotations

import secrets
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator

import pytest
from oci_registry_kit import (
    PASSWORD,
    USER,
    Pushed,
    Registry,
    htpasswd_section,
    make_client,
    push_raw,
    require_tools,
    skopeo_push,
    start_registry,
    write_layout,
)

from ares.images.registry import RegistryClient


@pytest.fixture(scope="session")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    require_tools()
    root = tmp_path_factory.mktemp("registry")
    reg = start_registry(root / "anon")
    try:
        yield reg
    finally:
        reg.stop()


@pytest.fixture(scope="session")
def images(registry: Registry, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Pushed]:
    """gzip / zstd / Docker schema2 / uncompressed images and a linux amd64 + arm64/v8 index."""
    root = tmp_path_factory.mktemp("layouts")
    nonce = secrets.token_hex(8).encode()  # unique layers: skopeo's blob cache would reuse old ones
    out: dict[str, Pushed] = {}
    variants = {
        "gzip": [],
        "zstd": ["--dest-compress-format", "zstd"],
        "v2s2": ["--format", "v2s2"],
        "tamper": [],
    }
    for name, flags in variants.items():
        files = {"etc/name": name.encode() + b"\n", "nonce": nonce + name.encode()}
        write_layout(root / name, [("amd64", files)])
        skopeo_push(root / name, registry, f"ares/{name}:v1", *flags)
        out[name] = Pushed(f"ares/{name}", files)
    amd = {"arch": b"amd64\n", "nonce": nonce + b"amd"}
    arm = {"arch": b"arm64\n", "nonce": nonce + b"arm"}
    write_layout(root / "multi", [("amd64", amd), ("arm64/v8", arm)])
    skopeo_push(root / "multi", registry, "ares/multi:v1")
    out["multi"] = Pushed("ares/multi", amd)
    out["multi-arm64"] = Pushed("ares/multi", arm)
    raw = {"raw": b"uncompressed\n", "nonce": nonce + b"raw"}
    push_raw(registry, "ares/raw", "v1", raw)
    out["raw"] = Pushed("ares/raw", raw)
    return out


@pytest.fixture
async def client(registry: Registry) -> AsyncIterator[RegistryClient]:
    async with make_client(registry.host) as c:
        yield c


@pytest.fixture(scope="session")
def basic_registry(
    registry: Registry, images: dict[str, Pushed], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Registry]:
    """A second registry on the same storage that requires Basic auth."""
    root = tmp_path_factory.mktemp("basic")
    reg = start_registry(root, auth=htpasswd_section(root, USER, PASSWORD), storage=registry.root)
    reg.creds = (USER, PASSWORD)
    yield reg
    reg.stop()


DEBIAN = "localhost/ares-debian:bookworm"


@pytest.fixture(scope="session")
def debian_image(registry: Registry) -> Iterator[str]:
    """A real distro image on the registry: the Debian bookworm (with python3) that
    `scripts/podman-engine.sh image` puts in podman's storage, pushed by podman. Skipped without them."""
    if shutil.which("podman") is None:
        pytest.skip(f"needs podman (apt-get install podman) to push {DEBIAN}")
    if subprocess.run(["podman", "image", "exists", DEBIAN], check=False).returncode:
        pytest.skip(f"needs {DEBIAN} in podman's storage (scripts/podman-engine.sh image makes it)")
    ref = f"{registry.host}/ares/debian:bookworm"
    push = ["podman", "push", "--quiet", "--tls-verify=false", DEBIAN, f"docker://{ref}"]
    subprocess.run(push, check=True, capture_output=True, timeout=300)
    yield ref
    # A test may have pulled it into the engine: untag that name only (the image is the shared one).
    subprocess.run(["podman", "untag", ref, ref], capture_output=True, check=False)
