"""Image references parse like podman's and print back to the same reference."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import ares.images
from ares.images.errors import ImageError
from ares.images.registry import Reference, parse_reference
from ares.images.registry.reference import DOCKER_HUB_ENDPOINT

DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize(
    ("text", "registry", "repository", "tag", "digest"),
    [
        ("ubuntu", "docker.io", "library/ubuntu", "latest", None),
        ("ubuntu:22.04", "docker.io", "library/ubuntu", "22.04", None),
        ("docker.io/ubuntu", "docker.io", "library/ubuntu", "latest", None),
        ("index.docker.io/library/ubuntu", "docker.io", "library/ubuntu", "latest", None),
        ("bitnami/redis:7", "docker.io", "bitnami/redis", "7", None),
        ("quay.io/org/sub/img:v1.2-rc_3", "quay.io", "org/sub/img", "v1.2-rc_3", None),
        ("localhost/ares-debian:bookworm", "localhost", "ares-debian", "bookworm", None),
        ("127.0.0.1:5000/a/b", "127.0.0.1:5000", "a/b", "latest", None),
        ("myhost:5000/img:tag", "myhost:5000", "img", "tag", None),
        (f"ghcr.io/x/y@{DIGEST}", "ghcr.io", "x/y", None, DIGEST),
        (f"ghcr.io/x/y:t@{DIGEST}", "ghcr.io", "x/y", "t", DIGEST),
        ("a__b/c-d.e", "docker.io", "a__b/c-d.e", "latest", None),
    ],
)
def test_parse(text: str, registry: str, repository: str, tag: str | None, digest: str | None) -> None:
    ref = parse_reference(text)
    assert (ref.registry, ref.repository, ref.tag, ref.digest) == (registry, repository, tag, digest)
    assert parse_reference(str(ref)) == ref


def test_docker_hub_endpoint_and_str() -> None:
    ref = parse_reference("ubuntu")
    assert ref.endpoint == DOCKER_HUB_ENDPOINT == "registry-1.docker.io"
    assert str(ref) == "docker.io/library/ubuntu:latest"
    assert parse_reference("127.0.0.1:5000/a").endpoint == "127.0.0.1:5000"
    assert str(ref.with_digest(DIGEST)) == f"docker.io/library/ubuntu:latest@{DIGEST}"
    with pytest.raises(AttributeError):
        ref.tag = "x"  # type: ignore[misc]


@pytest.mark.parametrize(
    "text",
    [
        "Ubuntu",  # uppercase repository
        "ubuntu@sha256:abc",  # short digest
        "ubuntu@md5:" + "a" * 32,  # unsupported algorithm
        f"ubuntu@sha256:{'AB' * 32}",  # uppercase hex
        "ubuntu:bad/tag",
        "ubuntu:",
        "quay.io/",
        "a//b",
        "ubuntu:" + "x" * 200,
    ],
)
def test_invalid_references_name_the_problem(text: str) -> None:
    with pytest.raises(ImageError, match="invalid"):
        parse_reference(text)


def test_reference_is_a_value() -> None:
    assert Reference("docker.io", "library/a") == parse_reference("a")
    assert len({parse_reference("a"), parse_reference("docker.io/library/a:latest")}) == 1


def test_images_never_imports_sandbox() -> None:
    """`ares/__init__` loads the sandbox anyway, so check the sources rather than sys.modules."""
    root = Path(ares.images.__file__).parent
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            assert not any(n.startswith("ares.sandbox") for n in names), path
