"""From checks to verdicts: which backends can run, how each limit would be enforced, what to install.

The rules mirror the backends: the local sandbox as root needs idmapped layers (sandbox root is an
unprivileged host id range) besides user namespaces, overlayfs and seccomp; unprivileged it maps
root to the caller and needs no idmapping. Limits name the mechanisms of
``ares.sandbox.local.limits``: a cgroup where one can be created, else an rlimit, else unenforced.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from typing import Any

from ares.doctor.check import Check
from ares.doctor.probes import run_all
from ares.sandbox.local import cgroups as local_cgroups
from ares.sandbox.local.limits import MODE_ENV, can_mount

#: The checks each backend needs; the local backend's depend on whether ARES runs as root.
LOCAL_UNPRIVILEGED = ("kernel", "user-namespaces", "overlayfs", "seccomp-kernel", "seccomp-library")
LOCAL_ROOT = (*LOCAL_UNPRIVILEGED, "idmapped-mounts")
OTHER_BACKENDS = {
    "docker": ("docker-socket", "docker-sdk"),
    "daytona": ("daytona-sdk", "daytona-api-key"),
    "e2b": ("e2b-sdk", "e2b-api-key"),
}
_APT = re.compile(r"apt-get install -y ([\w.+ -]+)")
_EXTRA = re.compile(r"pip install 'ares\[([\w,-]+)\]'")
_NEEDS_ROOT = ("apt-get ", "sysctl ", "chmod ", "modprobe ")


@dataclass(frozen=True, slots=True)
class Backend:
    name: str
    ready: bool
    detail: str


@dataclass(frozen=True, slots=True)
class Limit:
    """How a sandbox resource limit would be enforced here: a mechanism (as in LimitsReport) and why."""

    resource: str
    mechanism: str
    detail: str


@dataclass(frozen=True, slots=True)
class Diagnosis:
    checks: tuple[Check, ...]
    backends: tuple[Backend, ...]
    limits: tuple[Limit, ...]
    install: tuple[str, ...]
    root: bool
    elapsed_s: float

    @property
    def local_ready(self) -> bool:
        return any(b.name == "local" and b.ready for b in self.backends)

    def to_json(self) -> dict[str, Any]:
        return {
            "checks": {c.name: {"ok": c.ok, "detail": c.detail, "fix": c.fix} for c in self.checks},
            "backends": {b.name: {"ready": b.ready, "detail": b.detail} for b in self.backends},
            "limits": {
                lim.resource: {"mechanism": lim.mechanism, "detail": lim.detail} for lim in self.limits
            },
            "install": list(self.install),
            "local_ready": self.local_ready,
            "root": self.root,
            "elapsed_s": round(self.elapsed_s, 3),
        }


def diagnose() -> Diagnosis:
    """Run every probe and judge the results."""
    started = time.perf_counter()
    checks = run_all()
    return assess(checks, root=os.geteuid() == 0, elapsed_s=time.perf_counter() - started)


def assess(checks: list[Check], *, root: bool, elapsed_s: float = 0.0) -> Diagnosis:
    by_name = {c.name: c for c in checks}
    local = LOCAL_ROOT if root else LOCAL_UNPRIVILEGED
    mode = "root mode" if root else "unprivileged mode"
    backends = [_backend("local", local, by_name, mode)]
    backends += [_backend(name, needs, by_name) for name, needs in OTHER_BACKENDS.items()]
    return Diagnosis(
        checks=tuple(checks),
        backends=tuple(backends),
        limits=tuple(_limits(by_name, root)),
        install=tuple(install_commands(checks, root=root)),
        root=root,
        elapsed_s=elapsed_s,
    )


def _backend(name: str, needs: tuple[str, ...], checks: dict[str, Check], mode: str = "") -> Backend:
    missing = [n for n in needs if n not in checks or not checks[n].ok]
    suffix = f" ({mode})" if mode else ""
    if missing:
        return Backend(name, False, f"missing: {', '.join(missing)}{suffix}")
    return Backend(name, True, f"ready{suffix}")


def _limits(checks: dict[str, Check], root: bool) -> list[Limit]:
    rlimit_mode = os.environ.get(MODE_ENV) == "rlimit"

    def cgroup(controller: str) -> str | None:
        """The cgroup mechanism usable for ``controller``, or None."""
        check = checks.get(f"cgroup-{controller}")
        hierarchy = local_cgroups.available().get(controller)
        if rlimit_mode or check is None or not check.ok or isinstance(hierarchy, str) or hierarchy is None:
            return None
        return f"cgroup-v{hierarchy.version}"

    def why_not(controller: str) -> str:
        if rlimit_mode:
            return f"${MODE_ENV}=rlimit"
        check = checks.get(f"cgroup-{controller}")
        return check.detail if check else "not checked"

    limits = []
    if mechanism := cgroup("memory"):
        limits.append(Limit("memory", mechanism, "memory cgroup, swap included"))
    else:
        limits.append(Limit("memory", "rlimit", f"RLIMIT_AS per process ({why_not('memory')})"))
    if mechanism := cgroup("pids"):
        limits.append(Limit("pids", mechanism, "pids cgroup"))
    else:
        limits.append(Limit("pids", "rlimit", f"RLIMIT_NPROC of the sandbox user ({why_not('pids')})"))
    if mechanism := cgroup("cpu"):
        limits.append(Limit("cpu", mechanism, "CFS quota of a cpu cgroup"))
    else:
        limits.append(Limit("cpu", "unenforced", f"no rlimit caps a CPU share ({why_not('cpu')})"))
    limits.append(_disk(checks, root, rlimit_mode))
    limits.append(_network(checks))
    return limits


def _disk(checks: dict[str, Check], root: bool, rlimit_mode: bool) -> Limit:
    idmapped = checks.get("idmapped-tmpfs")
    if rlimit_mode:
        why = f"${MODE_ENV}=rlimit"
    elif not can_mount():
        why = "mounting a tmpfs needs CAP_SYS_ADMIN"
    elif root and idmapped is not None and not idmapped.ok:
        why = f"an idmapped tmpfs does not work here: {idmapped.detail}"
    else:
        return Limit("disk", "tmpfs", "upper dirs on a tmpfs of the limit's size (counts as memory)")
    return Limit("disk", "rlimit", f"RLIMIT_FSIZE caps each file, not the total ({why})")


def _network(checks: dict[str, Check]) -> Limit:
    pasta, slirp, tun = (checks.get(n) for n in ("pasta", "slirp4netns", "tun-device"))
    plumbing = [c for c in (checks.get("ip"), checks.get("util-linux")) if c is not None and not c.ok]
    if plumbing:
        reasons = "; ".join(f"{c.name}: {c.detail}" for c in plumbing)
        return Limit("network", "unavailable", f"tasks that need the network cannot run locally; {reasons}")
    if pasta is not None and pasta.ok:
        return Limit("network", "pasta", "tasks with network access get a user-mode stack (pasta)")
    if slirp is not None and slirp.ok and (tun is None or tun.ok):
        return Limit(
            "network", "slirp4netns", "tasks with network access get a user-mode stack (slirp4netns)"
        )
    reasons = [f"{c.name}: {c.detail}" for c in (pasta, slirp, tun) if c is not None and not c.ok]
    return Limit(
        "network", "unavailable", "tasks that need the network cannot run locally; " + "; ".join(reasons)
    )


def install_commands(checks: list[Check], *, root: bool) -> list[str]:
    """The failed checks' fixes, deduplicated; apt packages and ARES extras merged into one line each."""
    packages: list[str] = []
    extras: list[str] = []
    others: list[str] = []
    for check in checks:
        if check.ok or not check.fix:
            continue
        if apt := _APT.fullmatch(check.fix):
            packages += [p for p in apt.group(1).split() if p not in packages]
        elif extra := _EXTRA.fullmatch(check.fix):
            extras += [e for e in extra.group(1).split(",") if e not in extras]
        elif check.fix not in others:
            others.append(check.fix)
    commands = [f"apt-get install -y {' '.join(packages)}"] if packages else []
    commands += [f"pip install 'ares[{','.join(extras)}]'"] if extras else []
    commands += others
    sudo = "" if root else "sudo "
    return [f"{sudo}{c}" if c.startswith(_NEEDS_ROOT) else c for c in commands]
