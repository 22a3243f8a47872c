"""The SWE fixture images in a Docker API engine, offline: ``ares/host-python`` and the project images.

The fixture Dockerfiles start ``FROM ares/host-python``, a stand-in the local builder makes from the
host's system dirs. An engine has no such image, so this builds its equivalent there: the Debian base
of the engine kit plus the host's own Debian packages of git, patch, pip (and what pip needs), copied
from the files ``dpkg -L`` lists (the host is Debian bookworm too), pip unlocked and ``python`` on
PATH as the stand-in does. The project images (``ares-swe/<project>:<release>``) are then built from
their Dockerfiles by the engine; their ``pip install`` reaches PyPI through the host network. The
per-instance images are left to the docker backend (``--sandbox docker`` builds them on first use).

Run as a script to prepare an engine by hand: ``python tests/tasks/swe/swe_docker_images.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import docker
import docker.errors

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "swe"
STANDIN = "ares/host-python"
BASE_IMAGE = "localhost/ares-debian:bookworm"
PROJECTS = {
    "toolz": "1.2.0",
    "tomlkit": "0.15.2",
    "marshmallow": "4.4.0",
    "boltons": "26.2.0",
    "click": "8.5.1",
}
HOST_PACKAGES = (
    "git", "patch", "ca-certificates", "python3-pip", "python3-setuptools", "python3-wheel",
    "python3-distutils", "python3-lib2to3",
)  # fmt: skip
#: The host's CA bundle (update-ca-certificates writes it; no package lists it), so pip trusts the
#: same TLS proxies the host does.
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
SKIPPED = ("/usr/share/doc/", "/usr/share/man/", "/usr/share/locale/", "/usr/share/lintian/")
DOCKERFILE = f"""\
FROM {BASE_IMAGE}
ADD host-packages.tar /
RUN rm -f /usr/lib/python3*/EXTERNALLY-MANAGED \\
 && ln -sf /usr/bin/python3 /usr/local/bin/python && ln -sf /usr/bin/pip3 /usr/local/bin/pip
ENV LANG=C.UTF-8
LABEL ares.test.stand-in=1
"""


def _host_files() -> list[str]:
    listed = subprocess.run(
        ["dpkg", "-L", *HOST_PACKAGES], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    return sorted({p for p in [*listed, CA_BUNDLE] if p.startswith("/") and not p.startswith(SKIPPED)})


def _build(client: docker.DockerClient, context: Path, tag: str) -> None:
    log: list[str] = []
    for chunk in client.api.build(
        path=str(context), tag=tag, rm=True, forcerm=True, network_mode="host", decode=True
    ):
        log.append(str(chunk.get("stream") or chunk.get("error") or ""))
        if "error" in chunk:
            raise RuntimeError(f"building {tag} failed:\n{''.join(log)[-3000:]}")


def _has(client: docker.DockerClient, name: str) -> bool:
    try:
        client.api.inspect_image(name)
    except docker.errors.ImageNotFound:
        return False
    return True


def ensure_standin(client: docker.DockerClient) -> None:
    """``ares/host-python`` in the engine (built once; kept for later sessions)."""
    if _has(client, STANDIN):
        return
    with tempfile.TemporaryDirectory(prefix="ares-host-python-") as tmp:
        context = Path(tmp)
        with tarfile.open(context / "host-packages.tar", "w") as tar:
            for path in _host_files():
                if os.path.isdir(path) and not os.path.islink(path):
                    continue  # parents come with their files; the base has the system dirs
                if os.path.lexists(path):
                    tar.add(path, arcname=path.lstrip("/"), recursive=False)
        (context / "Dockerfile").write_text(DOCKERFILE)
        _build(client, context, f"{STANDIN}:latest")


def ensure_project_images(client: docker.DockerClient) -> list[str]:
    """Every project image of the fixtures in the engine; returns the tags."""
    ensure_standin(client)
    tags = []
    for name, release in PROJECTS.items():
        tag = f"ares-swe/{name}:{release}"
        if not _has(client, tag):
            _build(client, FIXTURES / "images" / name, tag)
        tags.append(tag)
    return tags


if __name__ == "__main__":
    engine = docker.DockerClient(base_url=os.environ.get("DOCKER_HOST", "unix:///run/podman/podman.sock"))
    print("\n".join(ensure_project_images(engine)), file=sys.stdout)
