"""Probes of the non-local backends: a Docker API engine and its SDK, and the cloud SDKs and keys.

The engine is pinged (``GET /_ping``) over its socket with a short timeout; SDKs are imported in a
child process. A cloud backend's adapter (with its SDK) is only imported when its API key is set:
that takes a second or more, and without a key the backend cannot run anyway.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import socket
from urllib.parse import urlsplit

from ares.doctor.check import Check, run_python

#: Engine sockets tried when DOCKER_HOST is not set (the order of ares.sandbox.docker.client).
SOCKETS = ("/var/run/docker.sock", "/run/podman/podman.sock")
PING_TIMEOUT_S = 1.0
PODMAN_SERVICE = "podman system service --time=0 unix:///run/podman/podman.sock &"
ROOTLESS_PODMAN_SERVICE = 'podman system service --time=0 "unix://$XDG_RUNTIME_DIR/podman/podman.sock" &'
#: backend -> (the module of its adapter, its SDK's distribution, the env var of its key)
CLOUDS = {
    "daytona": ("ares.sandbox.cloud.daytona", "daytona", "DAYTONA_API_KEY"),
    "e2b": ("ares.sandbox.cloud.e2b", "e2b", "E2B_API_KEY"),
}
IMPORT_PROBE = """
import importlib, json, sys
try:
    importlib.import_module(sys.argv[1])
except Exception as exc:
    print(json.dumps({"ok": False, "detail": f"{type(exc).__name__}: {exc}"}))
else:
    print(json.dumps({"ok": True, "detail": "imports"}))
"""


def docker_socket() -> Check:
    urls = _engine_urls()
    tried: list[str] = []
    for url in urls:
        answer = ping(url)
        if answer.startswith("answers"):
            return Check("docker-socket", True, f"{url} {answer}")
        tried.append(f"{url}: {answer}")
    # Unprivileged, a rootless Podman service on the user's runtime dir (tried above) is the way.
    fix: str | None = PODMAN_SERVICE if os.geteuid() == 0 else ROOTLESS_PODMAN_SERVICE
    if not shutil.which("podman") and not shutil.which("dockerd"):
        fix = f"apt-get install -y podman runc && {fix}"
    if os.environ.get("DOCKER_HOST"):
        fix = None  # the user chose an engine: starting it is theirs to do
    return Check("docker-socket", False, "no engine answers: " + "; ".join(tried), fix)


def _engine_urls() -> list[str]:
    if env := os.environ.get("DOCKER_HOST"):
        return [env]
    paths = [*SOCKETS]
    if runtime := os.environ.get("XDG_RUNTIME_DIR"):
        paths.append(f"{runtime}/podman/podman.sock")
    return [f"unix://{path}" for path in paths]


def ping(url: str, timeout_s: float = PING_TIMEOUT_S) -> str:
    """``answers ...`` (with the engine's Server and API version) if ``url`` pongs, else why not."""
    parts = urlsplit(url)
    try:
        if parts.scheme == "unix":
            if not os.path.exists(parts.path):
                return "no such socket"
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(timeout_s)
            sock.connect(parts.path)
        elif parts.scheme in ("tcp", "http") and parts.hostname:
            sock = socket.create_connection((parts.hostname, parts.port or 2375), timeout=timeout_s)
        else:
            return f"unsupported URL scheme {parts.scheme!r}"
        with sock:
            sock.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            reply = b""
            while len(reply) < 65536 and (chunk := sock.recv(4096)):
                reply += chunk
    except OSError as exc:
        return exc.strerror or str(exc) or type(exc).__name__
    head, _, body = reply.decode(errors="replace").partition("\r\n\r\n")
    lines = head.split("\r\n")
    if not lines[0].startswith("HTTP/") or lines[0].split()[1:2] != ["200"]:
        return f"unexpected reply {lines[0][:80]!r}"
    headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
    server = headers.get("Server", "an engine")
    api = headers.get("Api-Version")
    return f"answers /_ping ({server}{f', API {api}' if api else ''}): {body.strip()}"


def docker_sdk() -> Check:
    result = run_python(["-c", IMPORT_PROBE, "docker"])
    if not result["ok"]:
        return Check("docker-sdk", False, f"the docker SDK does not import: {result['detail']}",
                     "pip install 'ares[docker]'")  # fmt: skip
    return Check("docker-sdk", True, f"docker {_version('docker')} imports")


def cloud_key(backend: str) -> Check:
    """Whether the backend's API key is set (its value is never shown)."""
    var = CLOUDS[backend][2]
    if os.environ.get(var):
        return Check(f"{backend}-api-key", True, f"{var} is set")
    return Check(f"{backend}-api-key", False, f"{var} is not set", f"export {var}=<your {backend} API key>")


def cloud_sdk(backend: str) -> Check:
    module, dist, var = CLOUDS[backend]
    name, fix = f"{backend}-sdk", f"pip install 'ares[{backend}]'"
    version = _version(dist)
    if version is None:
        return Check(name, False, f"the {dist} SDK is not installed", fix)
    if not os.environ.get(var):
        return Check(name, True, f"{dist} {version} installed (import not tried without {var})")
    result = run_python(["-c", IMPORT_PROBE, module])
    if not result["ok"]:
        return Check(name, False, f"the {backend} backend does not import: {result['detail']}", fix)
    return Check(name, True, f"{dist} {version} imports")


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None
