"""Programs ARES needs on the host: network plumbing, image bootstrapping, the host base's basics.

Each is looked up on PATH (plus the sbin dirs, which an unprivileged PATH often lacks) and asked
for its version, so a binary that is present but broken fails too.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from ares.doctor.check import Check

#: The sandbox's own PATH: the host base image sees the host's programs through these dirs.
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: Searched after PATH: root's tools (debootstrap) live there, and users' PATHs often omit them.
SBIN_PATH = "/usr/local/sbin:/usr/sbin:/sbin"
VERSION_TIMEOUT_S = 3.0


def debootstrap() -> Check:
    return program("debootstrap", "debootstrap", "builds Debian base images")


def tar() -> Check:
    return program("tar", "tar", "image layers and file transfers")


def bash() -> Check:
    return program("bash", "bash", "the shell agents' commands run in")


def python3() -> Check:
    """The python3 sandboxes on the host base image see (the sandbox PATH, not this venv's)."""
    return program("python3", "python3", "python3 inside host-base sandboxes", path=SYSTEM_PATH)


def iproute2() -> Check:
    return program("ip", "iproute2", "configures sandbox network namespaces", version_flag="-V")


def util_linux() -> Check:
    """nsenter, unshare and setpriv, which join, make and confine the helpers of sandbox networking."""
    missing = [name for name in ("unshare", "setpriv") if find(name) is None]
    check = program("nsenter", "util-linux", "joins sandbox namespaces")
    if check.ok and missing:
        return Check("util-linux", False, f"not found: {', '.join(missing)}", "apt-get install -y util-linux")
    return Check("util-linux", check.ok, check.detail, check.fix)


def program(
    name: str, package: str, role: str, path: str | None = None, version_flag: str = "--version"
) -> Check:
    """``name`` found and answering ``version_flag``; the fix installs its Debian ``package``."""
    fix = f"apt-get install -y {package}"
    found = find(name, path)
    if found is None:
        return Check(name, False, f"not found ({role})", fix)
    try:
        done = subprocess.run(
            [found, version_flag], capture_output=True, text=True, timeout=VERSION_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check(name, False, f"{found} does not run: {exc}", fix)
    lines = (done.stdout or done.stderr).strip().splitlines()
    if done.returncode != 0:
        said = lines[-1] if lines else f"exit status {done.returncode}"
        return Check(name, False, f"{found} {version_flag} failed: {said}", fix)
    return Check(name, True, f"{found}: {lines[0] if lines else 'no version'}")


def find(name: str, path: str | None = None) -> str | None:
    """``name`` on ``path``, else on PATH and then the sbin dirs."""
    return shutil.which(name, path=path or os.pathsep.join(filter(None, [os.environ.get("PATH"), SBIN_PATH])))
