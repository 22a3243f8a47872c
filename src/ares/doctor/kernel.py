"""Kernel probes: version, user namespaces, overlayfs in one, idmapped layers (root only).

Each namespace or mount probe runs ``_kernel_probe.py`` in a child process (isolated, stdlib only)
on temp dirs made here, where the sandbox would keep its files, and removed here afterwards.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ares.doctor.check import Check, run_python
from ares.images.cache import default_cache_dir
from ares.sandbox.local.cgroups import unescape

PROBE_SCRIPT = str(Path(__file__).with_name("_kernel_probe.py"))
#: Read-only: settings that forbid or restrict user namespaces (absent on kernels without them).
USERNS_SETTINGS = {
    "user.max_user_namespaces": "/proc/sys/user/max_user_namespaces",
    "kernel.unprivileged_userns_clone": "/proc/sys/kernel/unprivileged_userns_clone",
    "kernel.apparmor_restrict_unprivileged_userns": "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
}
NOT_NEEDED = "not needed (unprivileged: sandbox root maps to your uid)"


def kernel() -> Check:
    uname = os.uname()
    linux = uname.sysname == "Linux"
    detail = f"{uname.sysname} {uname.release} on {uname.machine}"
    return Check("kernel", linux, detail if linux else f"{detail}: the local sandbox needs Linux")


def user_namespaces() -> Check:
    settings = userns_settings()
    result = _probe("userns")
    shown = ", ".join(f"{name.split('.')[-1]}={value}" for name, value in settings.items())
    detail = f"{result['detail']} ({shown})" if shown else result["detail"]
    return Check("user-namespaces", result["ok"], detail, None if result["ok"] else _userns_fix(settings))


def userns_settings() -> dict[str, str]:
    """The user namespace sysctls this kernel has, read (never written) from /proc/sys."""
    found: dict[str, str] = {}
    for name, path in USERNS_SETTINGS.items():
        with contextlib.suppress(OSError):
            found[name] = Path(path).read_text().strip()
    return found


def _userns_fix(settings: dict[str, str]) -> str | None:
    """The sysctl that lifts the restriction in force, if one is."""
    privileged = os.geteuid() == 0
    if settings.get("user.max_user_namespaces") == "0":
        return "sysctl -w user.max_user_namespaces=15000"
    if not privileged and settings.get("kernel.unprivileged_userns_clone") == "0":
        return "sysctl -w kernel.unprivileged_userns_clone=1"
    if not privileged and settings.get("kernel.apparmor_restrict_unprivileged_userns") == "1":
        return "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"
    return None


def overlayfs() -> Check:
    with _scratch(_sandbox_base()) as base:
        result = _probe("overlay", str(base))
        where = f" (on {filesystem_of(base)})"
    fix = None
    if not result["ok"] and "overlay" not in _filesystems():
        fix = "modprobe overlay"
    return Check("overlayfs", result["ok"], result["detail"] + where, fix)


def idmapped_mounts() -> Check:
    """Image layers on disk under an upper dir on disk, both idmapped (root mode only)."""
    return _idmap("idmapped-mounts", "idmap")


def idmapped_tmpfs() -> Check:
    """An idmapped upper dir on a tmpfs, as disk limits put it (root mode only)."""
    return _idmap("idmapped-tmpfs", "idmap-tmpfs")


def _idmap(name: str, mode: str) -> Check:
    if os.geteuid() != 0:
        return Check(name, True, NOT_NEEDED)
    cache = default_cache_dir()
    layers_base = cache if cache.is_dir() else _sandbox_base()
    with _scratch(layers_base) as layers, _scratch(_sandbox_base()) as scratch:
        result = _probe(mode, str(layers), str(scratch))
        where = f" (layer on {filesystem_of(layers)}"
        where += ")" if mode == "idmap-tmpfs" else f", upper dir on {filesystem_of(scratch)})"
    return Check(name, result["ok"], result["detail"] + where)


def _probe(mode: str, *dirs: str) -> dict[str, Any]:
    return run_python(["-I", "-S", PROBE_SCRIPT, mode, *dirs])


def _sandbox_base() -> Path:
    """The parent of the sandbox state dirs: ``$ARES_SANDBOX_DIR``, else the temp dir."""
    override = os.environ.get("ARES_SANDBOX_DIR")
    return Path(override) if override and os.path.isdir(override) else Path(tempfile.gettempdir())


@contextlib.contextmanager
def _scratch(parent: Path) -> Iterator[Path]:
    """A fresh dir in ``parent``, removed with everything the probe left in it (mode-000 work dirs too)."""
    path = Path(tempfile.mkdtemp(prefix="ares-doctor-", dir=parent))
    try:
        yield path
    finally:
        for dirpath, dirnames, _ in os.walk(path):
            for name in dirnames:
                sub = os.path.join(dirpath, name)
                if not os.path.islink(sub):
                    with contextlib.suppress(OSError):
                        os.chmod(sub, 0o700)
        shutil.rmtree(path, ignore_errors=True)


def filesystem_of(path: Path) -> str:
    """The filesystem type of the mount that holds ``path`` (from /proc/self/mountinfo)."""
    best, fstype = "", "an unknown filesystem"
    target = os.path.realpath(path)
    with contextlib.suppress(OSError), open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            point = unescape(left.split()[4])
            inside = target == point or target.startswith(point.rstrip("/") + "/")
            if inside and len(point) >= len(best):
                best, fstype = point, right.split()[0]
    return fstype


def _filesystems() -> str:
    try:
        return Path("/proc/filesystems").read_text()
    except OSError:
        return ""
