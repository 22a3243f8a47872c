"""Stand-in bases: images ARES makes without a registry, under names of their own.

* ``ares/host``: the host's system directories (/usr, /bin, /lib*, /etc minus secrets), read-only;
* ``ares/host-python``: the same plus a cached layer that makes the host's ``python3`` behave like the
  ``python`` image (``python``/``pip`` first on PATH, pip may install: a venv over the host's
  site-packages, so it works on an unprivileged host too);
* ``ares/debian:bookworm``: Debian bookworm (minbase) by debootstrap, built once per cache.

A stand-in is used for a *named* image (``python:3.11-slim``, ``debian:12``, ``ubuntu:24.04``) only
when the user turns the fallback on (``ARES_IMAGE_FALLBACK``, see ``bases``); ``standin_for`` says
which stand-in would serve a name, and the image records the substitution.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import os
import platform
import re
import secrets
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from ares.errors import ImageBuildError
from ares.images.build.steps import StepRunner
from ares.images.cache import ImageCache
from ares.images.config import ImageConfig
from ares.images.rootfs import OverlayMount, RootfsPlan

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
DEBIAN_SUITE = "bookworm"
HOST = "ares/host"
HOST_PYTHON = "ares/host-python"
DEBIAN = f"ares/debian:{DEBIAN_SUITE}"
#: Every stand-in name, and what it is (for errors and docs).
STANDINS = {
    HOST: "the host's system directories",
    HOST_PYTHON: "the host's Python (python3, pip)",
    DEBIAN: f"Debian {DEBIAN_SUITE} by debootstrap",
}
SUPPORTED = (
    "python:<host major.minor>[-slim|-bookworm|-slim-bookworm] (the host's Python), "
    f"debian:*, ubuntu:*, buildpack-deps:* (Debian {DEBIAN_SUITE} via debootstrap)"
)
#: Where ``ares/host-python`` keeps its Python environment (first on PATH, like /usr/local in the
#: python image).
PYTHON_PREFIX = "/opt/ares-python"
# Makes the host's Debian Python behave like the python image: `python`, `python3`, `pip` and `pip3`
# on PATH, and pip installs allowed. A venv over the system site-packages rather than removing Debian's
# EXTERNALLY-MANAGED marker: the venv is the layer's own, so it works when the sandbox's root does not
# own the host's /usr (an unprivileged host), and the host's /usr is never written, even in a layer.
PYTHON_SHIM = rf"""set -e
if ! python3 -m pip --version >/dev/null 2>&1; then
  echo "the host's python3 has no pip: install it on the host (apt-get install python3-pip)" >&2
  exit 3
fi
python3 -m venv --without-pip --system-site-packages {PYTHON_PREFIX}
for name in pip pip3; do
  printf '#!/bin/sh\nexec {PYTHON_PREFIX}/bin/python -m pip "$@"\n' > {PYTHON_PREFIX}/bin/$name
  chmod 755 {PYTHON_PREFIX}/bin/$name
done
"""


class UnsupportedBaseError(ImageBuildError):
    """``FROM`` names an image the local builder cannot provide."""


@dataclass(frozen=True, slots=True)
class BaseImage:
    """Where a build starts: a mount plan, a cache key, setup scripts run as layers, defaults."""

    name: str
    key: str
    kind: str  # "host" | "debian"
    config: ImageConfig
    setup: tuple[str, ...] = ()


def canonical_name(name: str) -> str:
    """``docker.io/library/python:3.11-slim@sha256:...`` -> ``python:3.11-slim``."""
    name = name.split("@", 1)[0]
    for prefix in ("docker.io/library/", "index.docker.io/library/", "library/", "docker.io/"):
        if name.startswith(prefix):
            name = name[len(prefix) :]
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"


@functools.cache
def host_python_version() -> str | None:
    """The version of /usr/bin/python3, the Python a host-based sandbox sees."""
    if not os.path.exists("/usr/bin/python3"):
        return None
    out = subprocess.run(
        ["/usr/bin/python3", "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
        check=False,
        env={},
    )
    return out.stdout.strip() or None


@functools.cache
def host_fingerprint() -> str:
    """Changes when the host's system packages change, so host-based layers are rebuilt.

    Computed once per process (like the host base plan itself)."""
    digest = hashlib.sha256(platform.machine().encode())
    for path in ("/etc/os-release", "/var/lib/dpkg/status", "/usr/bin/python3"):
        try:
            st = os.stat(path)
        except OSError:
            continue
        digest.update(f"{path}:{st.st_size}:{st.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


def resolve_standin(name: str) -> BaseImage | None:
    """The stand-in called ``name`` (``ares/host``, ``ares/host-python``, ``ares/debian:bookworm``)."""
    canon = canonical_name(name)
    if canon in (HOST, f"{HOST}:latest"):
        return BaseImage(HOST, f"host:{host_fingerprint()}", "host", ImageConfig(env={"PATH": DEFAULT_PATH}))
    if canon in (HOST_PYTHON, f"{HOST_PYTHON}:latest"):
        host = host_python_version()
        if host is None:
            raise UnsupportedBaseError(
                f"{HOST_PYTHON} needs the host's /usr/bin/python3, which does not exist"
            )
        env = {"PATH": f"{PYTHON_PREFIX}/bin:{DEFAULT_PATH}", "LANG": "C.UTF-8", "PYTHON_VERSION": host}
        config = ImageConfig(env=env)
        return BaseImage(
            HOST_PYTHON, f"python-host:{host_fingerprint()}", "host", config, setup=(PYTHON_SHIM,)
        )
    if canon in (DEBIAN, "ares/debian:latest"):
        config = ImageConfig(env={"PATH": DEFAULT_PATH})
        return BaseImage(DEBIAN, f"debian:{DEBIAN_SUITE}", "debian", config)
    return None


def standin_for(name: str) -> tuple[BaseImage, str]:
    """The stand-in that may serve the named image, and how close it is; UnsupportedBaseError if none.

    ``python:<x.y>`` (Debian-flavoured tags) -> ``ares/host-python`` when the host's Python is x.y;
    ``debian:*``, ``ubuntu:*``, ``buildpack-deps:*`` -> ``ares/debian:bookworm``.
    """
    canon = canonical_name(name)
    repo, _, tag = canon.rpartition(":")
    if repo == "python":
        return _python_standin(canon, tag)
    if repo in ("debian", "ubuntu", "buildpack-deps"):
        base = resolve_standin(DEBIAN)
        assert base is not None
        exact = repo == "debian" and (tag in ("latest", "stable", "12") or tag.startswith(("bookworm", "12")))
        how = f"Debian {DEBIAN_SUITE}" if exact else f"Debian {DEBIAN_SUITE}, approximating {canon}"
        return base, how
    raise UnsupportedBaseError(f"no stand-in can serve {canon} (stand-ins exist for {SUPPORTED})")


def _python_standin(canon: str, tag: str) -> tuple[BaseImage, str]:
    host = host_python_version()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(?:\.\d+)?(?:-(slim|bookworm|slim-bookworm))?|latest|slim", tag)
    if match is None:
        raise UnsupportedBaseError(
            f"no stand-in can serve {canon}: only Debian-flavoured tags (x.y, x.y-slim, x.y-bookworm) of "
            "python can be served from the host's Python"
        )
    wanted = match.group(1)
    if host is None:
        raise UnsupportedBaseError(
            f"{canon}: the stand-in {HOST_PYTHON} needs /usr/bin/python3, which does not exist"
        )
    if wanted not in (None, "3") and not (host == wanted or host.startswith(wanted + ".")):
        raise UnsupportedBaseError(
            f"no stand-in can serve {canon}: it needs Python {wanted} but the host's /usr/bin/python3 "
            f"({HOST_PYTHON}) is {host}"
        )
    base = resolve_standin(HOST_PYTHON)
    assert base is not None
    return base, f"the host's Python {host}"


def debian_root_ready(cache: ImageCache) -> bool:
    """Whether the Debian stand-in exists already (else its first use debootstraps it)."""
    return (cache.root / "bases" / f"debian-{DEBIAN_SUITE}" / "base.json").exists()


def find_debootstrap() -> str | None:
    """debootstrap lives in /usr/sbin, which a non-root PATH often lacks."""
    found = shutil.which("debootstrap")
    return found or next(
        (p for p in ("/usr/sbin/debootstrap", "/sbin/debootstrap") if os.path.exists(p)), None
    )


async def base_plan(
    base: BaseImage, cache: ImageCache, runner: StepRunner, log: list[str] | None = None
) -> RootfsPlan:
    """The mount plan for a base, creating the Debian root on first use."""
    if base.kind == "host":
        return await runner.host_base()
    rootfs = await ensure_debian_root(cache, log)
    return RootfsPlan((OverlayMount("/", (str(rootfs),)),))


async def debian_base_key(cache: ImageCache) -> str:
    """``debian:bookworm:<id>``: the id changes if the root is ever rebuilt, invalidating its layers."""
    rootfs = await ensure_debian_root(cache)
    meta = json.loads((rootfs.parent / "base.json").read_text())
    return f"debian:{DEBIAN_SUITE}:{meta['id']}"


async def ensure_debian_root(cache: ImageCache, log: list[str] | None = None) -> Path:
    """Debian bookworm (minbase) under ``bases/debian-bookworm/rootfs``, built once by debootstrap."""
    home = cache.root / "bases" / f"debian-{DEBIAN_SUITE}"
    rootfs = home / "rootfs"
    if (home / "base.json").exists():
        return rootfs
    async with cache.lock(f"base-debian-{DEBIAN_SUITE}"):
        if (home / "base.json").exists():
            return rootfs
        if os.geteuid() != 0:
            raise UnsupportedBaseError(
                "building the Debian base needs root (debootstrap creates device nodes and root-owned "
                "files); "
                "run `ares images build` once as root, or use the docker backend"
            )
        tool = find_debootstrap()
        if tool is None:
            raise UnsupportedBaseError("the Debian base needs debootstrap: apt-get install debootstrap")
        staging = cache.scratch() / f"debian-{secrets.token_hex(4)}"
        mirror = os.environ.get("ARES_DEBIAN_MIRROR", "http://deb.debian.org/debian")
        started = time.monotonic()
        if log is not None:
            log.append(f"building the Debian {DEBIAN_SUITE} base with debootstrap from {mirror} (once)")
        logfile = cache.log_path(f"debootstrap-{DEBIAN_SUITE}")
        with open(logfile, "wb") as out:  # noqa: ASYNC230 - opening a local log file
            proc = await asyncio.create_subprocess_exec(
                tool, "--variant=minbase", "--include=ca-certificates", DEBIAN_SUITE, str(staging / "rootfs"),
                mirror, stdout=out, stderr=out, stdin=asyncio.subprocess.DEVNULL,
            )  # fmt: skip
            code = await proc.wait()
        if code != 0:
            tail = logfile.read_text(errors="replace")[-1500:]
            raise UnsupportedBaseError(f"debootstrap failed (exit {code}); log {logfile}:\n{tail}")
        meta = {"id": secrets.token_hex(8), "suite": DEBIAN_SUITE, "mirror": mirror, "created": time.time()}
        (staging / "base.json").write_text(json.dumps(meta))
        home.parent.mkdir(parents=True, exist_ok=True)
        os.rename(staging, home)
        if log is not None:
            log.append(f"Debian base ready in {time.monotonic() - started:.1f}s")
        return rootfs
