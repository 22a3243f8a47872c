"""A real distribution registry on loopback, and tiny images pushed into it with skopeo.

Images are written as OCI layouts by hand (one small layer each), so the tests need neither a network
nor podman's store; skopeo does the pushing and the compression, the registry the serving.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import socket
import ssl
import subprocess
import tarfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from aiohttp import web

from ares.images.registry import DockerConfigCredentials, RegistryClient, RetryPolicy

TOOLS = ("docker-registry", "skopeo")
USER, PASSWORD = "alice", "s3cret"


def require_tools() -> None:
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (apt-get install docker-registry skopeo)")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@dataclass
class Registry:
    """A running `docker-registry serve` with filesystem storage under `root`."""

    root: Path
    port: int
    proc: subprocess.Popen[bytes]
    creds: tuple[str, str] | None = None
    pushed: dict[str, str] = field(default_factory=dict)

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def blob_path(self, digest: str) -> Path:
        hexdigest = digest.removeprefix("sha256:")
        return self.root / "docker/registry/v2/blobs/sha256" / hexdigest[:2] / hexdigest / "data"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def start_registry(root: Path, *, auth: str = "", storage: Path | None = None) -> Registry:
    """Start a registry; `auth` is a YAML `auth:` section, `storage` another registry's to serve."""
    port = free_port()
    root.mkdir(parents=True, exist_ok=True)
    storage = storage or root / "storage"
    storage.mkdir(parents=True, exist_ok=True)
    config = root / "config.yml"
    config.write_text(
        "version: 0.1\n"
        "log:\n  level: error\n"
        f"storage:\n  filesystem:\n    rootdirectory: {storage}\n  delete:\n    enabled: true\n"
        f"http:\n  addr: 127.0.0.1:{port}\n" + auth
    )
    log = (root / "registry.log").open("wb")
    proc = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=log, stderr=log)
    registry = Registry(storage, port, proc)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"docker-registry exited: {(root / 'registry.log').read_text()}")
        try:
            if httpx.get(f"http://{registry.host}/v2/", timeout=1).status_code in (200, 401):
                return registry
        except httpx.TransportError:
            time.sleep(0.05)
    registry.stop()
    raise RuntimeError("docker-registry did not come up within 20 s")


def _blob(layout: Path, data: bytes) -> dict[str, object]:
    digest = hashlib.sha256(data).hexdigest()
    (layout / "blobs/sha256" / digest).write_bytes(data)
    return {"digest": f"sha256:{digest}", "size": len(data)}


def layer_tar(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, content in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            info.mtime = 0
            tar.addfile(info, io.BytesIO(content))
    return buf.getvalue()


def _image(layout: Path, files: dict[str, bytes], arch: str, variant: str | None = None) -> dict[str, object]:
    tar = layer_tar(files)
    layer = {"mediaType": "application/vnd.oci.image.layer.v1.tar", **_blob(layout, tar)}
    platform = {"architecture": arch, "os": "linux", **({"variant": variant} if variant else {})}
    config = {
        **platform,
        "config": {"Env": ["PATH=/usr/bin:/bin"], "Cmd": ["/bin/sh"]},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{hashlib.sha256(tar).hexdigest()}"]},
    }
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **_blob(layout, _json(config))},
        "layers": [layer],
    }
    return {
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "platform": platform,
        **_blob(layout, _json(manifest)),
    }


def _json(value: object) -> bytes:
    return json.dumps(value, sort_keys=True).encode()


def write_layout(layout: Path, platforms: list[tuple[str, dict[str, bytes]]]) -> None:
    """An OCI layout tagged `img`: one image, or an index of one image per (arch[/variant], files)."""
    (layout / "blobs/sha256").mkdir(parents=True)
    (layout / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    images = [_image(layout, files, *arch.split("/")) for arch, files in platforms]
    if len(images) == 1:
        top = dict(images[0])
        top.pop("platform")
    else:
        kind = "application/vnd.oci.image.index.v1+json"
        index = {"schemaVersion": 2, "mediaType": kind, "manifests": images}
        top = {"mediaType": kind, **_blob(layout, _json(index))}
    top["annotations"] = {"org.opencontainers.image.ref.name": "img"}
    (layout / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [top]}))


def skopeo_push(layout: Path, registry: Registry, target: str, *extra: str) -> None:
    """`skopeo copy --all oci:LAYOUT:img docker://REGISTRY/TARGET` with extra flags."""
    creds = ["--dest-creds", ":".join(registry.creds)] if registry.creds else []
    subprocess.run(
        [
            "skopeo",
            "copy",
            "--quiet",
            "--all",
            "--dest-tls-verify=false",
            *creds,
            *extra,
            f"oci:{layout}:img",
            f"docker://{registry.host}/{target}",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )


def push_raw(registry: Registry, repository: str, tag: str, files: dict[str, bytes]) -> None:
    """Push an image with an uncompressed layer through the registry API (skopeo always compresses)."""
    base = f"http://{registry.host}/v2/{repository}"
    auth = httpx.BasicAuth(*registry.creds) if registry.creds else None
    with httpx.Client(auth=auth, timeout=10) as http:

        def upload(data: bytes) -> dict[str, object]:
            digest = f"sha256:{hashlib.sha256(data).hexdigest()}"
            start = http.post(f"{base}/blobs/uploads/")
            start.raise_for_status()
            location = httpx.URL(base).join(start.headers["location"])
            http.put(location.copy_merge_params({"digest": digest}), content=data).raise_for_status()
            return {"digest": digest, "size": len(data)}

        tar = layer_tar(files)
        config = {
            "architecture": "amd64",
            "os": "linux",
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{hashlib.sha256(tar).hexdigest()}"]},
        }
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **upload(_json(config))},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", **upload(tar)}],
        }
        http.put(
            f"{base}/manifests/{tag}",
            content=_json(manifest),
            headers={"Content-Type": "application/vnd.oci.image.manifest.v1+json"},
        ).raise_for_status()


@dataclass(frozen=True)
class Pushed:
    """What a test image holds: its one layer's files and their tar's diff_id."""

    repository: str
    files: dict[str, bytes]

    @property
    def diff_id(self) -> str:
        return "sha256:" + hashlib.sha256(layer_tar(self.files)).hexdigest()


FAST_RETRY = RetryPolicy(attempts=4, base_delay=0.01, max_delay=2.0)


def make_client(
    *insecure: str, auth_files: list[Path] | None = None, retry: RetryPolicy = FAST_RETRY
) -> RegistryClient:
    """A client that trusts only `auth_files` (never the machine's own) and retries quickly."""
    return RegistryClient(
        credentials=DockerConfigCredentials(files=auth_files or []), insecure=insecure, retry=retry
    )


@asynccontextmanager
async def serve(
    app: web.Application, host: str = "127.0.0.1", port: int = 0, tls: ssl.SSLContext | None = None
) -> AsyncIterator[str]:
    """Run an aiohttp app on loopback (over TLS with `tls`) for the duration; yields its `host:port`."""
    runner = web.AppRunner(app)
    await runner.setup()
    port = port or free_port(host)
    site = web.TCPSite(runner, host, port, ssl_context=tls)
    await site.start()
    try:
        yield f"{host}:{port}"
    finally:
        await runner.cleanup()


def htpasswd_section(root: Path, user: str, password: str) -> str:
    """An `auth.htpasswd` config section for one bcrypt user (htpasswd from apache2-utils)."""
    if shutil.which("htpasswd") is None:
        pytest.skip("needs htpasswd (apt-get install apache2-utils) for the registry's Basic auth")
    line = subprocess.run(
        ["htpasswd", "-Bbn", user, password], check=True, capture_output=True, text=True
    ).stdout.strip()
    (root / "htpasswd").write_text(line + "\n")
    return f"auth:\n  htpasswd:\n    realm: ares-test\n    path: {root / 'htpasswd'}\n"


def tls_context(root: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A self-signed certificate for 127.0.0.1: (server context, client context trusting only it)."""
    import datetime as dt
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = root / "tls.pem", root / "tls.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert_path, key_path)
    client = ssl.create_default_context(cafile=str(cert_path))
    return server, client
