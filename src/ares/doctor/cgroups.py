"""cgroup probes: which hierarchies are mounted, and per controller whether we may create a child.

Sandboxes get their memory, pids and cpu limits from cgroups nested under this process's own
(``ares.sandbox.local.cgroups``); where that fails, limits fall back to rlimits, so a failed
controller check degrades limits rather than breaking the local backend.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from ares.doctor.check import Check
from ares.sandbox.local import cgroups as local_cgroups


def cgroup_version() -> Check:
    """v1, v2 or hybrid (v1 controllers plus a mounted v2 hierarchy), from /proc/self/mountinfo."""
    v1: set[str] = set()
    v2: list[str] = []
    with contextlib.suppress(OSError), open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields = right.split()
            if len(fields) < 3:
                continue
            if fields[0] == "cgroup2":
                v2.append(local_cgroups.unescape(left.split()[4]))
            elif fields[0] == "cgroup":
                v1 |= set(fields[2].split(",")) & set(local_cgroups.CONTROLLERS)
    if not v1 and not v2:
        return Check("cgroups", False, "no cgroup filesystem is mounted; limits fall back to rlimits")
    if v1 and v2:
        kind = f"hybrid: v1 controllers {', '.join(sorted(v1))}; v2 at {v2[0]}"
    elif v1:
        kind = f"v1: controllers {', '.join(sorted(v1))}"
    else:
        kind = f"v2 at {v2[0]}"
    return Check("cgroups", True, kind)


def cgroup_controller(controller: str) -> Check:
    """Whether a sandbox cgroup for ``controller`` can be made: mkdir (and rmdir) a probe cgroup."""
    name = f"cgroup-{controller}"
    hierarchy = local_cgroups.available()[controller]
    if isinstance(hierarchy, str):
        return Check(name, False, f"{hierarchy}; limits fall back to rlimits")
    probe = hierarchy.own / f"ares-doctor-{os.getpid()}-{controller}"
    try:
        probe.mkdir()
    except OSError as exc:
        why = exc.strerror or str(exc)
        return Check(
            name, False, f"v{hierarchy.version}: cannot create a cgroup under {hierarchy.own}: {why}"
        )
    with contextlib.suppress(OSError):
        probe.rmdir()
    if hierarchy.version == 2 and (problem := _v2_delegation(hierarchy.own, hierarchy.mount, controller)):
        return Check(name, False, f"v2: {problem}")
    return Check(name, True, f"v{hierarchy.version}: can create cgroups under {hierarchy.own}")


def _v2_delegation(own: Path, mount: Path, controller: str) -> str | None:
    """Why ARES could not enable ``controller`` for cgroups below ``own`` (v2), or None if it can."""
    try:
        enabled = (own / "cgroup.subtree_control").read_text().split()
    except OSError as exc:
        return f"cannot read {own}/cgroup.subtree_control: {exc.strerror}"
    if controller in enabled:
        return None
    if not os.access(own / "cgroup.subtree_control", os.W_OK):
        return f"{controller} is not enabled below {own} and this user may not enable it"
    if own != mount:
        return (
            f"{controller} is not enabled below {own}, which holds processes (give ARES a cgroup of its own)"
        )
    return None
