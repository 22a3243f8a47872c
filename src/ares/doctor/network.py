"""User-mode networking for sandboxes with network access: pasta (preferred) or slirp4netns, and /dev/net/tun.

A sandbox always has a network namespace of its own; with network on, a user-mode stack connects it,
and both stacks create their tap device through /dev/net/tun. pasta is tried for real: it connects a
fresh namespace and runs ``true`` in it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import tempfile

from ares.doctor.check import Check
from ares.doctor.tools import find, program

TUN = "/dev/net/tun"
PASTA_TIMEOUT_S = 3.0


def pasta() -> Check:
    found = program("pasta", "passt", "user-mode networking for tasks with network access")
    path = find("pasta")
    if not found.ok or path is None:
        return found
    # As root, pasta otherwise switches to nobody, which may not write the new namespace's id maps.
    run_as = ["--runas", "0"] if os.geteuid() == 0 else []
    code, said = _run_in_own_group([path, *run_as, "--config-net", "--", "true"], PASTA_TIMEOUT_S)
    if code is None:
        return Check("pasta", False, f"{found.detail}; `pasta --config-net true` hung", _tun_fix())
    if code != 0:
        fix = _tun_fix() or "apt-get install -y passt"
        return Check("pasta", False, f"cannot connect a network namespace: {said}", fix)
    return Check("pasta", True, f"{found.detail}; connected a fresh network namespace")


def _run_in_own_group(command: list[str], timeout_s: float) -> tuple[int | None, str]:
    """(exit code or None on timeout, last line of output) of ``command`` in a process group of its
    own, which is killed afterwards: a failing pasta leaves a child behind that would live on."""
    with tempfile.TemporaryFile() as log:  # not a pipe: a straggler holding it open must not block us
        try:
            proc = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
            )
        except OSError as exc:
            return 127, exc.strerror or str(exc)
        try:
            code: int | None = proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            code = None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        log.seek(0)
        lines = [line for line in log.read().decode(errors="replace").splitlines() if "syslog" not in line]
    return code, lines[-1] if lines else f"exit status {code}"


def slirp4netns() -> Check:
    return program("slirp4netns", "slirp4netns", "user-mode networking, used when pasta is missing")


def tun_device() -> Check:
    try:
        os.close(os.open(TUN, os.O_RDWR | os.O_CLOEXEC))
    except OSError as exc:
        return Check(
            "tun-device", False, f"{TUN}: {exc.strerror} (user-mode networking needs it)", _tun_fix()
        )
    return Check("tun-device", True, f"{TUN} opens for this user")


def _tun_fix() -> str | None:
    """The command that makes /dev/net/tun usable, or None if it already is."""
    try:
        os.close(os.open(TUN, os.O_RDWR | os.O_CLOEXEC))
    except FileNotFoundError:
        return "modprobe tun"
    except OSError as exc:
        # 0666 is the usual mode: creating a device still needs CAP_NET_ADMIN in a network namespace.
        return f"chmod 0666 {TUN}" if exc.errno == errno.EACCES else None
    return None
