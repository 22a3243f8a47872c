"""Base images for ``FROM``: the host's own system directories, or Debian bookworm by debootstrap.

No registry is involved: ``python:3.11-slim`` is served by the host's Python when its version matches,
and ``debian:*``/``ubuntu:*``/``buildpack-deps:*`` by one Debian bookworm root built once per cache.
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
from dataclasses import dataclass, field
from pathlib import Path

from ares.errors import ImageBuildError
from ares.images.build.steps import StepRunner
from ares.images.cache import ImageCache
from ares.images.config import ImageConfig
from ares.images.rootfs import OverlayMount, RootfsPlan

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
DEBIAN_SUITE = "bookworm"
SUPPORTED = (
    "python:<host major.minor>[-slim|-bookworm|-slim-bookworm] (the host's Python), "
    "debian:*, ubuntu:*, buildpack-deps:* (Debian bookworm via debootstrap), ares/host, "
    "or an image built earlier and tagged in the cache"
)
# Makes the host's Debian Python behave like the python image: pip may install system-wide and
# `python`/`pip` exist. Runs once as a cached layer.
PYTHON_SHIM = r"""set -e
if ! python3 -m pip --version >/dev/null 2>&1; then
  echo "the host's python3 has no pip: install it on the host (apt-get install python3-pip)" >&2
  exit 3
fi
rm -f /usr/lib/python3*/EXTERNALLY-MANAGED
mkdir -p /usr/local/bin
for pair in python:python3 pip:pip3 pip3:pip3; do
  name=${pair%%:*}; target=$(command -v "${pair#*:}" || true)
  if [ -n "$target" ] && ! command -v "$name" >/dev/null 2>&1; then ln -s "$target" "/usr/local/bin/$name"; fi
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
    notes: tuple[str, ...] = field(default=())


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


def resolve_base(name: str) -> BaseImage:
    """Map a ``FROM`` name to a base; raise UnsupportedBaseError naming the supported set."""
    canon = canonical_name(name)
    repo, _, tag = canon.rpartition(":")
    if repo in ("ares/host", "host"):
        config = ImageConfig(env={"PATH": DEFAULT_PATH})
        return BaseImage(canon, f"host:{host_fingerprint()}", "host", config)
    if repo == "python":
        return _python_base(canon, tag)
    if repo in ("debian", "ubuntu", "buildpack-deps"):
        notes = []
        if not (
            repo == "debian" and (tag in ("latest", "stable", "12") or tag.startswith(("bookworm", "12")))
        ):
            notes.append(f"{canon} is approximated by Debian {DEBIAN_SUITE} (the only debootstrap base)")
        config = ImageConfig(env={"PATH": DEFAULT_PATH})
        return BaseImage(canon, f"debian:{DEBIAN_SUITE}", "debian", config, notes=tuple(notes))
    raise UnsupportedBaseError(
        f"unsupported base image {name!r} for the local builder; supported: {SUPPORTED}"
    )


def _python_base(canon: str, tag: str) -> BaseImage:
    host = host_python_version()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(?:\.\d+)?(?:-(slim|bookworm|slim-bookworm))?|latest|slim", tag)
    if match is None:
        raise UnsupportedBaseError(
            f"unsupported base image {canon!r}: only Debian-flavoured tags (x.y, x.y-slim, x.y-bookworm) can "
            f"be served from the host; supported: {SUPPORTED}"
        )
    wanted = match.group(1)
    if host is None:
        raise UnsupportedBaseError(f"{canon} needs the host's /usr/bin/python3, which does not exist")
    notes = []
    if wanted is None or wanted == "3":
        notes.append(f"{canon} is served by the host's Python {host}")
    elif not (host == wanted or host.startswith(wanted + ".")):
        raise UnsupportedBaseError(
            f"{canon} needs Python {wanted} but the host's /usr/bin/python3 is {host}: the local builder "
            f"serves python images from the host. Use FROM python:{'.'.join(host.split('.')[:2])}-slim, "
            "or the docker backend for other versions"
        )
    config = ImageConfig(env={"PATH": DEFAULT_PATH, "LANG": "C.UTF-8", "PYTHON_VERSION": host})
    key = f"python-host:{host_fingerprint()}"
    return BaseImage(canon, key, "host", config, setup=(PYTHON_SHIM,), notes=tuple(notes))


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
