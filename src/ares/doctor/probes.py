"""Every probe of ``ares doctor``, in report order, and running them all at once.

Most probes wait on a child process, a socket or a subprocess, so they run on threads side by side:
the whole run takes about as long as its slowest probe.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from ares.doctor import cgroups, engines, kernel, network, seccomp, tools
from ares.doctor.check import Check

Probe = Callable[[], Check]

PROBES: tuple[Probe, ...] = (
    kernel.kernel,
    kernel.user_namespaces,
    kernel.overlayfs,
    kernel.idmapped_mounts,
    kernel.idmapped_tmpfs,
    seccomp.seccomp_kernel,
    seccomp.seccomp_library,
    cgroups.cgroup_version,
    functools.partial(cgroups.cgroup_controller, "memory"),
    functools.partial(cgroups.cgroup_controller, "pids"),
    functools.partial(cgroups.cgroup_controller, "cpu"),
    network.pasta,
    network.slirp4netns,
    network.tun_device,
    tools.iproute2,
    tools.util_linux,
    tools.debootstrap,
    tools.tar,
    tools.bash,
    tools.python3,
    engines.docker_socket,
    engines.docker_sdk,
    functools.partial(engines.cloud_sdk, "daytona"),
    functools.partial(engines.cloud_key, "daytona"),
    functools.partial(engines.cloud_sdk, "e2b"),
    functools.partial(engines.cloud_key, "e2b"),
)


def run_all(probes: tuple[Probe, ...] = PROBES) -> list[Check]:
    """Each probe's check, in the order of ``probes``; a probe that raises becomes a failed check."""
    with ThreadPoolExecutor(max_workers=len(probes), thread_name_prefix="ares-doctor") as pool:
        futures = [pool.submit(_guarded, probe) for probe in probes]
        return [future.result() for future in futures]


def _guarded(probe: Probe) -> Check:
    try:
        return probe()
    except Exception as exc:  # a probe's own bug must not hide the other checks
        name = getattr(probe, "__name__", None) or getattr(getattr(probe, "func", None), "__name__", "probe")
        return Check(name.replace("_", "-"), False, f"the probe failed: {type(exc).__name__}: {exc}")
